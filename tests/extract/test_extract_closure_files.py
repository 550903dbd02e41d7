"""Everything a kernel needs, from every file: a device function declared in a header and defined in another
source file comes with its body (and what that body uses), and a header from a folder outside the
application reaches the MEP by its path, with that folder on the MEP's include path."""
from __future__ import annotations

import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

from mepgen.extract import ExtractOptions, extract
from mepgen.mep.kernelsrc import render_kernel_file


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text))


LINKED = {
    "geom.h": """
        #pragma once
        struct Seg { float lo, hi; };
        __device__ float clamp_to(Seg s, float v);
    """,
    "geom.cu": """
        #include "geom.h"
        #define MARGIN 0.5f
        __device__ float clamp_to(Seg s, float v) { return fminf(fmaxf(v, s.lo - MARGIN), s.hi + MARGIN); }
    """,
    "main.cu": """
        #include "geom.h"
        __global__ void limit(const Seg *segs, float *v, int n) {
          int i = blockIdx.x * blockDim.x + threadIdx.x;
          if (i < n) v[i] = clamp_to(segs[i], v[i]);
        }
        int main() { Seg *s; float *v; cudaMalloc(&s, 8 * 512); cudaMalloc(&v, 4 * 512); limit<<<2, 256>>>(s, v, 512); }
    """,
}


def test_declared_here_defined_there_brings_the_body_and_its_macros(tmp_path):
    _write(tmp_path, LINKED)
    inv = extract(tmp_path, ExtractOptions(jobs=1, use_cache=False))
    k = next(k for k in inv["kernels"] if k["name"] == "limit")
    fns = k["closure"]["device_functions"]
    assert [(f["name"], f["file"]) for f in fns] == [("clamp_to", "geom.cu")]
    assert not fns[0].get("declaration_only")
    assert [m["name"] for m in k["closure"]["macros"]] == ["MARGIN"]
    assert "geom.cu" in [f["path"] for f in k["files"]]          # a change there makes the inventory stale
    text = render_kernel_file(tmp_path, k, None)
    assert text.index("struct Seg") < text.index("__device__ float clamp_to(Seg s, float v) {") \
        < text.index("__global__ void limit")


@pytest.mark.nvcc
def test_the_linked_kernel_file_compiles_alone(tmp_path):
    if shutil.which("nvcc") is None:
        pytest.skip("needs nvcc")
    _write(tmp_path, LINKED)
    inv = extract(tmp_path, ExtractOptions(jobs=1, use_cache=False))
    k = next(k for k in inv["kernels"] if k["name"] == "limit")
    (tmp_path / "alone.cu").write_text(render_kernel_file(tmp_path, k, None))
    r = subprocess.run(["nvcc", "-std=c++17", "-c", "alone.cu", "-o", "alone.o"], cwd=tmp_path,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_header_outside_the_app_is_included_by_path_and_its_folder_reaches_the_build(tmp_path):
    _write(tmp_path, {
        "shared/halves.cuh": "#pragma once\n__device__ inline float half_of(float v) { return 0.5f * v; }\n",
        "app/Makefile": "FLAGS = -I../shared\nall:\n\tnvcc $(FLAGS) k.cu -o k\n",
        "app/k.cu": """
            #include "halves.cuh"
            #define LEN 1024
            __global__ void halve(float *x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] = half_of(x[i]); }
            int main() { float *x; cudaMalloc(&x, 4 * LEN); halve<<<LEN / 256, 256>>>(x, LEN); }
        """,
    })
    app = tmp_path / "app"
    inv = extract(app, ExtractOptions(jobs=1, use_cache=False))
    k = inv["kernels"][0]
    shared = str((tmp_path / "shared").resolve())
    inc = [i for i in k["closure"]["includes"] if i["spelling"] == "halves.cuh"]
    assert inc and inc[0]["external"] == str((tmp_path / "shared" / "halves.cuh").resolve())
    assert f'#include "{shared}/halves.cuh"' in render_kernel_file(app, k, None)
    from mepgen.mep.buildcfg import build_config
    assert f"-I{shared}" in build_config(inv, k, set(), detect_gpu=False).nvcc_flags
