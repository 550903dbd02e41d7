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


# the kernel lives in a header the main file includes after its own system headers, and the header names none
# itself; the kernel's record type has a host constructor that calls a host-only helper of the same header
INCLUDED = {
    "kernels.h": """
        template <typename T> T smaller(const T &a, const T &b) { return b < a ? b : a; }
        struct Span {
          int lo, hi;
          __host__ __device__ Span() : lo(0), hi(0) {}
          Span(int a, int b) : lo(smaller(a, b)), hi(a + b - smaller(a, b)) {}
        };
        __global__ void widths(const Span *s, uint32_t *w, int n) {
          int i = blockIdx.x * blockDim.x + threadIdx.x;
          if (i < n) w[i] = (uint32_t)(s[i].hi - s[i].lo) + (uint32_t)INT8_MAX;
        }
    """,
    "main.cu": """
        #include <stdint.h>
        #include <cstdio>
        #include <absent_message_passing.h>
        #include "kernels.h"
        int main() {
          Span *s; uint32_t *w;
          cudaMalloc(&s, sizeof(Span) * 512); cudaMalloc(&w, 4 * 512);
          widths<<<2, 256>>>(s, w, 512);
          std::printf("%d\\n", Span(3, 1).lo);
        }
    """,
}


@pytest.mark.nvcc
def test_a_kernel_in_an_included_file_gets_what_its_includer_included_first(tmp_path):
    """uint32_t and INT8_MAX come from main.cu's <stdint.h>, before it includes kernels.h; Span's host
    constructor calls the host template `smaller`: the MEP's kernel.cu has both and compiles alone (a public
    merge program's MEP failed on uint32_t, a public aligner's on its host-only min template). A header the includer
    names that is on no include path stays out (a public halo finder's <mpi.h>)."""
    if shutil.which("nvcc") is None:
        pytest.skip("needs nvcc")
    _write(tmp_path, INCLUDED)
    inv = extract(tmp_path, ExtractOptions(jobs=1, use_cache=False))
    k = next(k for k in inv["kernels"] if k["name"] == "widths")
    assert [i["spelling"] for i in k["closure"]["context_includes"]] == ["stdint.h", "cstdio",
                                                                         "absent_message_passing.h"]
    text = render_kernel_file(tmp_path, k, None)
    # a header on no include path (an MPI the machine lacks) stays out: the MEP would not find it either
    assert "#include <absent_message_passing.h>" not in text
    assert "#include <stdint.h>" in text and text.count("T smaller(const T &a, const T &b)") == 1
    (tmp_path / "alone.cu").write_text(text)
    r = subprocess.run(["nvcc", "-std=c++17", "-c", "alone.cu", "-o", "alone.o"], cwd=tmp_path,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


@pytest.mark.nvcc
def test_a_device_function_called_before_its_definition_is_declared_first(tmp_path):
    """The header declares it, the closure copies only definitions: kernel.cu declares it before its caller."""
    app = tmp_path / "app"
    app.mkdir()
    (app / "ops.h").write_text("#pragma once\n__device__ float twice(float x);\n")
    (app / "ops.cu").write_text('#include "ops.h"\n'
                                "__device__ float quad(float x) { return twice(twice(x)); }\n"
                                "__device__ float twice(float x) { return 2.0f * x; }\n"
                                "__global__ void grow(float* v) { v[threadIdx.x] = quad(v[threadIdx.x]); }\n")
    inv = extract(app, ExtractOptions(jobs=1))
    text = render_kernel_file(app, inv["kernels"][0], None)
    assert text.index("__device__ float twice(float x);") < text.index("__device__ float quad")
    (tmp_path / "k.cu").write_text(text)
    r = subprocess.run(["nvcc", "-std=c++17", "-c", "k.cu", "-o", "k.o"], cwd=tmp_path, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
