"""pack_components on hand-written kernels: a thread's adjacent components (an interleaved complex number, the four
bytes of a pixel) move through one 8- or 4-byte access; the PTX shows the one access; thread by thread on the CPU
the rewrite writes what the original writes, on aligned and on shifted pointers (the element-by-element path); and
the refusals where reading early or writing late could change what a thread sees."""
from __future__ import annotations

import re

import pytest

from mepgen.optimize.dry_run import STRUCTURAL, plan
from mepgen.optimize.library.pack_components import PackComponents
from mepgen.optimize.library.source import Refused
from library_fixtures import assert_same_on_cpu, compiles, ptx_of, written

YAML = """version: 1
kernel: {name: cplx, id: cplx, source: k.cu, source_sha256: "0", start_byte: 0, end_byte: 1}
sizes: {N: 4096}
params:
  - {name: x, role: in, ctype: const float *, dtype: float32, count: 2 * N, init: {kind: uniform, low: 0.0, high: 1.0}}
  - {name: px, role: out, ctype: unsigned char *, dtype: uint8, count: 4 * N, init: {kind: zeros}}
  - {name: y, role: out, ctype: float *, dtype: float32, count: 2 * N, init: {kind: zeros}}
  - {name: n, role: scalar, ctype: int, dtype: int32, value: N}
constants: []
launch: {grid: ['(N + 255) / 256'], block: ['256'], shared_mem: '0'}
build: {arch: sm_90, std: c++17, nvcc_flags: [-O3]}
verify: {input_sets: 2, seed: 1}
timing: {warmup: 5, reps: 50, flush_l2: true}
todo: []
"""

# an interleaved complex number read, its magnitude written as an RGBA pixel, the number scaled back
CPLX = """__global__ void cplx(const float *x, unsigned char *px, float *y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const int base = 4 * i;
    float re = x[2 * i];
    float im = x[2 * i + 1];
    float m = re * re + im * im;
    px[base + 0] = (unsigned char)(m * 100.f);
    px[base + 1] = (unsigned char)(re * 200.f);
    px[base + 2] = (unsigned char)(im * 200.f);
    px[base + 3] = 255;
    y[2 * i] = re * m;
    y[2 * i + 1] = im * m;
}
"""


def make(tmp_path, text=CPLX):
    return written(tmp_path, YAML, text)


def test_components_move_as_one_access(tmp_path):
    src, spec, launch = make(tmp_path)
    t = PackComponents()
    assert t.space(src, spec, launch) == {}
    rw = t.apply(src, spec, launch, {})
    assert "2 loads of x[2 * i..] as one 8-byte access" in rw.explanation
    assert "4 stores to px[base + 0..] as one 4-byte access" in rw.explanation
    assert "2 stores to y[2 * i..] as one 8-byte access" in rw.explanation
    assert "float re = mepgen_v0.c[0];" in rw.text and "mepgen_s1.c[3] = 255;" in rw.text
    # every component is still reachable one by one where the address is not aligned
    assert "else { px[base + 0] = mepgen_s1.c[0]; px[base + 1] = mepgen_s1.c[1];" in rw.text
    assert rw.launch is None
    compiles(tmp_path, spec, rw.text)


def test_the_ptx_makes_one_access_per_group(tmp_path):
    src, spec, launch = make(tmp_path)
    ptx = ptx_of(tmp_path, spec, PackComponents().apply(src, spec, launch, {}), tmp_path)
    assert re.search(r"ld\.global(\.nc)?\.v2\.u32", ptx)          # x's pair
    assert re.search(r"st\.global\.u32", ptx)                     # the pixel's 4 bytes
    assert re.search(r"st\.global\.v2\.(f32|u32)", ptx)           # y's pair


SIM_DEFINES = """#include <cstdint>
#define __align__(n) __attribute__((aligned(n)))
struct alignas(8) uint2 { unsigned x, y; };
struct alignas(16) uint4 { unsigned x, y, z, w; };
"""


@pytest.mark.parametrize("shift", [0, 1])
def test_the_rewrite_writes_what_the_original_writes(tmp_path, shift):
    """Thread by thread on the CPU; shift 1 passes every pointer one element past an aligned one, so each group
    takes the element-by-element path."""
    src, spec, launch = make(tmp_path)
    after = PackComponents().apply(src, spec, launch, {}).text
    main = f"""
    const int n = 300, s = {shift};
    alignas(16) static float x[2 * n + 8], ya[2 * n + 8], yb[2 * n + 8];
    alignas(16) static unsigned char pa[4 * n + 8], pb[4 * n + 8];
    for (int i = 0; i < 2 * n + 8; i++) {{ x[i] = 0.001f * (float)((i * 37) % 997); ya[i] = yb[i] = -1.0f; }}
    for (int i = 0; i < 4 * n + 8; i++) pa[i] = pb[i] = 7;
    blockDim = {{64, 1, 1}};
    gridDim = {{5, 1, 1}};
    for (unsigned g = 0; g < 5; g++)
        for (unsigned t = 0; t < 64; t++) {{
            blockIdx = {{g, 0, 0}}; threadIdx = {{t, 0, 0}};
            before::cplx(x + s, pa + s, ya + s, n);
            after::cplx(x + s, pb + s, yb + s, n);
        }}
    for (int i = 0; i < 2 * n + 8; i++)
        if (ya[i] != yb[i]) {{ std::printf("y[%d]: %g vs %g\\n", i, ya[i], yb[i]); return 1; }}
    for (int i = 0; i < 4 * n + 8; i++)
        if (pa[i] != pb[i]) {{ std::printf("px[%d]: %d vs %d\\n", i, pa[i], pb[i]); return 1; }}
    return 0;
"""
    assert_same_on_cpu(tmp_path, CPLX, after, main, defines=SIM_DEFINES)


@pytest.mark.parametrize("old, new, group, why", [
    # a read of the stored array between the stores would see the components not yet written
    ("px[base + 2] = (unsigned char)(im * 200.f);",
     "px[base + 2] = (unsigned char)(im * 200.f) + px[base + 1];", "stores to px", "may touch px's components"),
    # a branch between the loads: when the second load does not run, nor may it run early
    ("float im = x[2 * i + 1];", "if (n > 7) re = 2.f; float im = x[2 * i + 1];", "loads of x", "may skip or repeat"),
    # a call that may write memory between the stores
    ("px[base + 3] = 255;", "note(px); px[base + 3] = 255;", "stores to px", "which may have side effects"),
    # the index's variable changes between the stores
    ("y[2 * i + 1] = im * m;", "i = i + 0; y[2 * i + 1] = im * m;", "stores to y", "is assigned in the run"),
])
def test_each_group_refused_for_what_could_change(tmp_path, old, new, group, why):
    text = ("__device__ void note(unsigned char *p);\n" + CPLX).replace(old, new)
    src, spec, launch = make(tmp_path, text)
    t = PackComponents()
    rw = t.apply(src, spec, launch, {})                     # the other groups still move
    assert group not in rw.explanation and rw.explanation.count("as one") == 2
    reasons = []
    t._groups(src, spec, reasons)
    assert any(why in r for r in reasons), reasons


def test_incomplete_or_misaligned_groups_are_left_alone(tmp_path):
    text = """__global__ void cplx(const float *x, unsigned char *px, float *y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float a = x[2 * i + 1];
    float b = x[2 * i + 2];
    y[4 * i] = a;
    y[4 * i + 1] = b;
    y[4 * i + 2] = a * b;
    px[3 * i] = 1;
    px[3 * i + 1] = 2;
}
"""
    src, spec, launch = make(tmp_path, text)
    rw = PackComponents().apply(src, spec, launch, {})
    # x's pair straddles two 8-byte vectors; y's first two of four are one 8-byte vector; px's stride 3 is not one
    assert rw.explanation.startswith("packed components: 2 stores to y[4 * i..] as one 8-byte access")
    assert "x[2 * i + 1]" in rw.text and "px[3 * i] = 1;" in rw.text and "y[4 * i + 2] = a * b;" in rw.text


def test_conditional_component_is_refused(tmp_path):
    text = CPLX.replace("float im = x[2 * i + 1];", "float im = n > 3 ? x[2 * i + 1] : 0.f;") \
        .replace("px[base + 3] = 255;", "if (n > 2) px[base + 3] = 255;").replace("y[2 * i + 1] = im * m;", "")
    src, spec, launch = make(tmp_path, text)
    with pytest.raises(Refused, match="adjacent components"):
        PackComponents().space(src, spec, launch)


def test_volatile_arrays_keep_their_accesses(tmp_path):
    text = CPLX.replace("const float *x", "const volatile float *x").replace(
        "unsigned char *px", "volatile unsigned char *px").replace("float *y", "volatile float *y")
    src, spec, launch = make(tmp_path, text)
    with pytest.raises(Refused):
        PackComponents().space(src, spec, launch)


def test_the_dry_run_counts_it_structural(tmp_path):
    assert "pack_components" in STRUCTURAL
    src, spec, launch = make(tmp_path)
    (tmp_path / "kernel.cu").write_text(CPLX)
    p = plan(spec, CPLX, tmp_path / "plan")
    assert "pack_components" in p.structural


def test_elements_of_a_class_type_are_left_alone(tmp_path):
    """A union cannot hold a class with its own constructors as it is (`__half`): reads of such elements keep their
    accesses, while the float pair next to them still moves as one."""
    text = """struct H { unsigned short b; __device__ H() {} __device__ H(float v) : b((unsigned short)v) {} };
__global__ void cplx(const float *x, unsigned char *px, H *y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    H h0 = y[2 * i];
    H h1 = y[2 * i + 1];
    float a = x[2 * i] + (float)h0.b;
    float b = x[2 * i + 1] + (float)h1.b;
    px[i] = (unsigned char)(a * b);
}
"""
    src, spec, launch = make(tmp_path, text)
    rw = PackComponents().apply(src, spec, launch, {})
    assert rw.explanation.startswith("packed components: 2 loads of x[2 * i..]") and "y[" not in rw.explanation
    assert "H h0 = y[2 * i];" in rw.text
