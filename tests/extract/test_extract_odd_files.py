"""Files in odd places: a header that is a symlink to a file outside the application (e.g. under the system's
include folder) is still the application's, and `__constant__` arrays of vector or struct elements get data."""
from __future__ import annotations

import textwrap
from pathlib import Path

from click.testing import CliRunner

from mepgen.cli import main
from mepgen.extract import ExtractOptions, extract
from mepgen.extract.source import SourceFiles


def test_a_symlinked_header_stays_in_the_application(tmp_path):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "half.cuh").write_text("#pragma once\n__device__ inline float half(float v) { return v * 0.5f; }\n")
    app = tmp_path / "app"
    app.mkdir()
    (app / "half.cuh").symlink_to(tmp_path / "elsewhere" / "half.cuh")
    (app / "k.cu").write_text(textwrap.dedent("""
        #include "half.cuh"
        __global__ void halve(float *x, int n) { int i = threadIdx.x; if (i < n) x[i] = half(x[i]); }
        int main() { float *x; cudaMalloc(&x, 1024); halve<<<1, 256>>>(x, 256); }
    """))
    inv = extract(app, ExtractOptions(jobs=1, use_cache=False))
    k = inv["kernels"][0]
    assert [(m["name"], m["file"]) for m in k["closure"]["device_functions"]] == [("half", "half.cuh")]


def test_relative_paths_never_raise_for_files_outside(tmp_path):
    src = SourceFiles(tmp_path)
    assert src.rel("/usr/include/stdio.h") == "/usr/include/stdio.h"
    assert not src.in_app("/usr/include/stdio.h")
    assert src.rel(str(tmp_path / "a" / "b.cu")) == "a/b.cu"


def test_constant_arrays_of_vectors_and_structs_become_scalar_data(tmp_path):
    (tmp_path / "c.cu").write_text(textwrap.dedent("""
        #define LEN 1024
        struct Gain { float lo, hi; };
        struct Mixed { float f; int i; };
        __constant__ float4 weights[8];
        __constant__ Gain gains[4];
        __global__ void weigh(const float *x, float *y, int n) {
          int i = blockIdx.x * blockDim.x + threadIdx.x;
          if (i < n) y[i] = x[i] * weights[i % 8].w + gains[i % 4].hi;
        }
        __constant__ Mixed mixed[2];
        __global__ void pick(float *y, int n) {
          int i = blockIdx.x * blockDim.x + threadIdx.x;
          if (i < n) y[i] = mixed[i % 2].f * mixed[i % 2].i;
        }
        int main() { float *x, *y; cudaMalloc(&x, LEN * 4); cudaMalloc(&y, LEN * 4);
                     weigh<<<LEN / 256, 256>>>(x, y, LEN); pick<<<LEN / 256, 256>>>(y, LEN); }
    """))
    r = CliRunner().invoke(main, ["ready", "-C", str(tmp_path), "--json"])
    import json
    report = json.loads(r.output)
    by = {k["kernel"]: k for k in report["kernels"]}
    assert by["weigh"]["outcome"] == "ready", by["weigh"]
    yaml_text = (Path(by["weigh"]["mep"]) / "mep.yaml").read_text()
    assert "name: weights, ctype: 'float4[8]', dtype: float32, count: '32'" in yaml_text
    assert "name: gains, ctype: 'Gain[4]', dtype: float32, count: '8'" in yaml_text
    assert by["pick"]["outcome"] == "needs a person"
    assert any(t["field"] == "constants[0].init" and "capture" in t["reason"] for t in by["pick"]["todo"])


def test_a_system_header_included_inside_a_linkage_block_is_not_the_applications(tmp_path):
    (tmp_path / "k.cu").write_text(textwrap.dedent("""
        extern "C++" {
        #include <utility>
        }
        const int kScale = 3;
        __global__ void scale(float *x, int n) { int i = threadIdx.x; if (i < n) x[i] *= kScale; }
        int main() { float *x; cudaMalloc(&x, 1024); scale<<<1, 256>>>(x, 256); }
    """))
    inv = extract(tmp_path, ExtractOptions(jobs=1, use_cache=False))
    assert list(inv["host_constants"]) == ["kScale"] and inv["kernels"][0]["name"] == "scale"
