"""analysis.pure_call, the one test of whether a call may have side effects that every analysis asks: CUDA vector
values (a float2 copied or made), a plain struct copied by the compiler's own constructor, math functions and pure
helpers of kernel.cu pass; a helper that writes through a pointer, an atomic and a user constructor do not."""
from __future__ import annotations

from mepgen.optimize.library.analysis import pure_call
from mepgen.optimize.library.source import kind, walk
from library_fixtures import written

YAML = """version: 1
kernel: {name: k, id: k, source: k.cu, source_sha256: "0", start_byte: 0, end_byte: 1}
sizes: {N: 1024}
params:
  - {name: a, role: in, ctype: const float2 *, dtype: float32, count: 2 * N, init: {kind: uniform, low: 0.0, high: 1.0}}
  - {name: out, role: out, ctype: float2 *, dtype: float32, count: 2 * N}
  - {name: pb, role: in, ctype: const Box *, dtype: float32, count: '2', init: {kind: uniform, low: 0.0, high: 1.0}}
  - {name: n, role: scalar, ctype: int, dtype: int32, value: N}
constants: []
launch: {grid: [(N + 127) / 128], block: ['128'], shared_mem: '0'}
build: {arch: sm_90, std: c++17, nvcc_flags: [-O3]}
verify: {input_sets: 1, seed: 1}
timing: {warmup: 5, reps: 50, flush_l2: true}
todo: []
"""

KERNEL = """struct Box { float lo, hi; };
struct Counter { int *c; __device__ Counter(int *p) : c(p) { *c += 1; } };
__device__ float clampf(float v, Box b) { return fminf(fmaxf(v, b.lo), b.hi); }
__device__ void bump(float *t) { *t += 1.0f; }
__global__ void k(const float2 *a, float2 *out, const Box *pb, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float2 v = a[i];
        Box q = *pb;
        float t = clampf(v.x, q) + sqrtf(v.y);
        out[i] = make_float2(t, v.y);
        bump(&t);
        atomicAdd(&out[0].x, t);
        Counter c((int *)0);
    }
}
"""


def test_values_are_pure_writes_are_not(tmp_path):
    src, spec, launch = written(tmp_path, YAML, KERNEL)
    verdicts = {}
    for c in walk(src.body):
        if kind(c) == "CALL_EXPR" and c.spelling not in ("operator=",):
            verdicts.setdefault(c.spelling, pure_call(src, c))
    assert verdicts["float2"] is True          # `float2 v = a[i];`: the vector's implicit copy
    assert verdicts["Box"] is True             # `Box q = *pb;`: the compiler's memberwise copy
    assert verdicts["make_float2"] is True and verdicts["sqrtf"] is True and verdicts["clampf"] is True
    assert verdicts["bump"] is False and verdicts["atomicAdd"] is False
    assert verdicts["Counter"] is False        # a constructor of its own, which writes through its pointer
