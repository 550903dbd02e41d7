"""int_division: `%` by run-time values through an exact cheap path (periodic neighbours). The helper must give the
operator's result for every operand the operator is defined for; the rewrite must pick exactly the remainders it
can make cheap, keep everything else (a remainder sharing its division with a `/`, literals, unsigned and 64-bit
operands), and compile."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from library_fixtures import load, nvcc_cubin
from mepgen import mepbuild
from mepgen.optimize.library.int_division import HELPERS, IntDivision
from mepgen.optimize.library.source import Refused


def test_helpers_agree_with_the_operators(tmp_path):
    """Compiled for the host, the helper against `%` on a grid of operands around every branch's edges (negative,
    zero, n - 1, n, 2n - 1, 2n, near 2^31), divisors of both signs but never 0."""
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.skip("no C++ compiler")
    helpers = "".join(HELPERS.values()).replace("static __device__ __forceinline__", "static inline")
    (tmp_path / "h.cpp").write_text("#include <cstdio>\n" + helpers + """
int main() {
    int bad = 0;
    for (int a = -70; a <= 70; ++a) for (int n = -30; n <= 30; ++n) {
        if (n == 0) continue;
        if (mepgen_wrap32(a, n) != a % n) { printf("32 %d %d\\n", a, n); ++bad; }
    }
    const int big[] = {2147483647, 2147483646, 1073741824, 1073741823, -2147483647};
    for (int a : big) for (int n : big) if (mepgen_wrap32(a, n) != a % n) { printf("32 %d %d\\n", a, n); ++bad; }
    return bad != 0;
}
""")
    built = subprocess.run([cxx, "-O1", "-o", str(tmp_path / "h"), str(tmp_path / "h.cpp")], capture_output=True,
                           text=True)
    assert built.returncode == 0, built.stderr[-2000:]
    ran = subprocess.run([str(tmp_path / "h")], capture_output=True, text=True)
    assert ran.returncode == 0, ran.stdout[-2000:]


@pytest.fixture(scope="module")
def stencil(tiling_meps):
    return next(iter(tiling_meps.values()))


def _with_body(mep: Path, params: str, body: str):
    """The MEP's kernel with its parameter list and body replaced (the rest of kernel.cu kept)."""
    text = (mep / "kernel.cu").read_text()
    g = text.index("__global__")
    name_end = text.index("(", g)
    start = text.index("{", g)
    return load(mep, text[:name_end] + f"({params})\n" + body + "\n" + text[text.index("\n}", start) + 2:])


PERIODIC = """{
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    int c = t % w;
    int r = t / w;
    float s = in[r * w + (c + 1) % w] + in[r * w + (w + c - 1) % w] + in[((r + 1) % h) * w + c];
    out[r * w + c] = s + in[t % 2];
}"""

OTHERS = """{
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const int r = t / cols;
    const int c = t % cols;
    unsigned int u = threadIdx.x % blockDim.x;
    if (r < h) out[r * cols + c] = in[r * cols + c] + (float)u;
}"""


def test_periodic_neighbours_and_a_wide_split(stencil, tmp_path):
    src, spec, launch = _with_body(stencil, "const float* in, float* out, int w, int h", PERIODIC)
    rw = IntDivision().apply(src, spec, launch, {})
    wrap = f"mepgen_wrap32_{src.name}"          # named after the kernel
    body = " ".join(rw.text[rw.text.index("int t = blockIdx.x"):].split())
    # the neighbours' wraps go through the helper; `t % w` shares its division with `t / w`; `t % 2` is a literal
    assert "int c = t % w; int r = t / w;" in body
    assert f"in[r * w + {wrap}((c + 1), w)] + in[r * w + {wrap}((w + c - 1), w)]" in body
    assert f"{wrap}((r + 1), h)" in body and "in[t % 2]" in body
    assert rw.text.count(f"int {wrap}(int a, int n)") == 1 and "3 `%`" in rw.explanation
    src2, spec2, launch2 = _with_body(stencil, "const float* in, float* out, long long cols, int h", OTHERS)
    with pytest.raises(Refused, match="no `%` by a run-time value on ints"):          # 64-bit, unsigned: left alone
        IntDivision().space(src2, spec2, launch2)
    if shutil.which(mepbuild.nvcc_executable()):
        cu = tmp_path / "kernel.cu"
        cu.write_text(rw.text)
        done = nvcc_cubin(spec, cu, tmp_path / "k.cubin", stencil)
        assert done.returncode == 0, done.stderr[-2000:]


def test_nothing_to_make_cheap(stencil):
    src, spec, launch = _with_body(stencil, "const float* in, float* out, int w, int h",
                                   "{\n    int t = blockIdx.x * blockDim.x + threadIdx.x;\n"
                                   "    if (t < w * h) out[t] = in[t / w] + in[t % 4];\n}")
    with pytest.raises(Refused, match="no `%` by a run-time value"):
        IntDivision().space(src, spec, launch)
