"""Every complete MEP builds on both backends: the native harness and the pycuda entry (a cubin).

Four idioms that built in the application but not in its MEP: an `extern __shared__` array declared at file
scope, a `__device__` array with a brace initializer (its `;` lies outside its extent), a device function whose
text starts inside an `#if` of the application (its `#endif` came without the
`#if`: "#endif without #if"), a kernel with no parameters (a zero-sized layout array in the pycuda entry), and
application macros named like the harness's own names (`block`, `p`, `check(x)`: "expected an identifier").
"""
from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path

import pytest

from mepgen.harness_names import guard_names
from mepgen.mep.kernelsrc import balance

HEADER = """
    #pragma once
    #ifndef STEPS_H
    #define STEPS_H
    #define block 16
    #define p 3
    #define check(x) ((x) > 0)
    #ifdef WIDE
    typedef double real;
    #else
    typedef float real;
    #endif
    #endif
"""
SOURCE = """
    #include "steps.h"
    #define LEN 2048
    extern __shared__ real staged[];
    __device__ int calls;
    __device__ const real weights[3] = {
      0.25, 0.5, 0.25}
    ;
    __global__ void shift(real *v, int n) {
      int i = blockIdx.x * blockDim.x + threadIdx.x;
      staged[threadIdx.x] = i < n ? v[i] : 0;
      __syncthreads();
      if (i < n && check(n)) v[i] = staged[(threadIdx.x + p) % blockDim.x];
    }
    #if defined(WIDE)
    __device__ real grow(real x) {
      x = x * 1.0;
    #else
    __device__ real grow(real x) {
    #endif
      return x + x;
    }
    __global__ void grown(real *v, int n) {
      int i = blockIdx.x * blockDim.x + threadIdx.x;
      if (i < n) v[i] = grow(v[i]) * weights[i % 3];
    }
    __global__ void count_calls() { if (threadIdx.x == 0) atomicAdd(&calls, 1); }
    int main() {
      real *v; cudaMalloc(&v, LEN * sizeof(real));
      shift<<<LEN / block, block, block * sizeof(real)>>>(v, LEN);
      grown<<<LEN / 256, 256>>>(v, LEN);
      count_calls<<<1, 32>>>();
    }
"""


def test_balance_counts_what_a_cut_text_lacks():
    assert balance("int f() {\n#if A\n  a();\n#endif\n}") == (0, 0)
    assert balance("void f(int x) {\n#endif\n  return;\n}") == (1, 0)           # its #if lies before it
    assert balance("void f(int x) {\n#else\nvoid f() {\n#endif\n}") == (1, 0)   # the #else branch was not taken
    assert balance("void f() {\n#if A\n  a();\n}") == (0, 1)                    # closed after it
    assert balance("x\n#elif B\ny\n#endif\n#else\nz\n#endif\n") == (2, 0)


def test_the_harness_keeps_its_names_but_not_those_mep_yaml_uses():
    from types import SimpleNamespace
    harness = ('#include <cstdio>\n#include MEP_KERNEL_FILE\nint main() { const dim3 block(BLOCK); int p = 0;\n'
               '  real* d_x; MEP_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)); assert(p == 0); }\n')
    spec = SimpleNamespace(launch="(n + BLOCK - 1) / BLOCK", ctype="real *")
    out = guard_names(harness, spec)
    undone = {ln.split()[1] for ln in out.splitlines() if ln.startswith("#undef")}
    assert {"block", "p", "main"} <= undone
    assert not undone & {"BLOCK", "real", "MEP_CHECK", "cudaStreamNonBlocking", "assert", "int"}
    assert out.index("#undef block") > out.index("#include MEP_KERNEL_FILE")


def _builds(mep_dir: Path, spec, tmp: Path) -> tuple[str, str]:
    """(native error, pycuda error): '' for a build that compiled."""
    from mepgen import mepbuild
    from mepgen.evaluate.pycuda_entry import entry_source
    native = mepbuild.nvcc_command(spec, mep_dir, mep_dir / "kernel.cu", tmp / f"{spec.kernel.id}.o")
    native.insert(-3, "-c")
    entry = tmp / f"{spec.kernel.id}.entry.cu"
    entry.write_text(entry_source(spec, mep_dir / "kernel.cu"))
    cubin = [mepbuild.nvcc_executable(), *mepbuild.build_flags(spec), f"-I{mep_dir}", "-cubin", str(entry), "-o",
             str(tmp / f"{spec.kernel.id}.cubin")]
    out = []
    for cmd in (native, cubin):
        done = subprocess.run(cmd, capture_output=True, text=True, cwd=mep_dir)
        out.append("" if done.returncode == 0 else
                   next((ln for ln in done.stderr.splitlines() if "error" in ln), done.stderr[-300:]))
    return out[0], out[1]


@pytest.mark.nvcc
def test_each_idiom_builds_on_both_backends(tmp_path):
    from mepgen.extract import ExtractOptions, extract
    from mepgen.mep.generate import generate
    from mepgen.workspace import Workspace
    app = tmp_path / "app"
    app.mkdir()
    (app / "steps.h").write_text(textwrap.dedent(HEADER))
    (app / "k.cu").write_text(textwrap.dedent(SOURCE))
    extract(app, ExtractOptions(jobs=1))
    results = generate(Workspace(app), [], every=True, detect_gpu=False)
    assert sorted(r.kernel for r in results) == ["count_calls", "grown", "shift"]
    for r in results:
        assert not r.spec.todo, (r.kernel, r.spec.todo)
        assert _builds(r.path, r.spec, tmp_path) == ("", ""), r.kernel
    text = (Workspace(app).mep_dir("grown") / "kernel.cu").read_text()
    assert text.count("#if 1") == 1            # the #if before grow's text, so its #endif has one
