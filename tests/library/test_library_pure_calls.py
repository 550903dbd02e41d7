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


# the math library's rounding and bit functions, and an application's own function named like one of them
ROUNDING = """__device__ int round_up(float *p) { *p += 0.5f; return (int)*p; }
__device__ float rintf_own(float v) { return v; }
__global__ void k(const float2 *a, float2 *out, const Box *pb, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float t = a[i].x;
        long r = lroundf(t) + lrintf(t) + __float2int_rn(t) + __popc(i) + llround((double)t);
        float u = exp2f(t) + __fdividef(t, 3.0f) + hypotf(t, 1.0f) + copysignf(t, -1.0f);
        out[i] = make_float2((float)r + u + rintf_own(t), (float)round_up(&t));
    }
}
"""

SHADOWED = """struct Box { float lo, hi; };
__device__ float lroundf(float *p) { *p = 0.0f; return 1.0f; }
__global__ void k(const float2 *a, float2 *out, const Box *pb, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float t = a[i].x;
    out[i] = make_float2(lroundf(&t), t);
}
"""


def test_the_math_library_is_pure_an_application_function_of_the_same_name_is_judged_by_its_body(tmp_path):
    """lroundf in a loop stopped hoist_loads and fuse_updates ("may write memory") on resize; the CUDA math API's
    functions of values are pure. A kernel.cu function named like one of them is the application's own."""
    src, spec, launch = written(tmp_path, YAML, "struct Box { float lo, hi; };\n" + ROUNDING)
    verdicts = {c.spelling: pure_call(src, c) for c in walk(src.body) if kind(c) == "CALL_EXPR"}
    for name in ("lroundf", "lrintf", "__float2int_rn", "__popc", "llround", "exp2f", "__fdividef", "hypotf",
                 "copysignf", "rintf_own"):
        assert verdicts[name] is True, name
    assert verdicts["round_up"] is False
    src, spec, launch = written(tmp_path, YAML, SHADOWED)
    calls = [c for c in walk(src.body) if kind(c) == "CALL_EXPR" and c.spelling == "lroundf"]
    assert calls and pure_call(src, calls[0]) is False


TEMPLATE_YAML = YAML.replace("source_sha256: \"0\", start_byte: 0, end_byte: 1}",
                             "source_sha256: \"0\", start_byte: 0, end_byte: 1, template_args: [%s, '8']}")

CONVERTS = """struct Box { float lo, hi; };
template <class T, int C>
__global__ void k(const float2 *a, float2 *out, const Box *pb, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        T t = T(a[i].x * C);
        out[i] = make_float2((float)t, a[i].y);
    }
}
"""


def test_a_conversion_to_a_type_parameter_is_pure_where_the_mep_launches_numbers(tmp_path):
    """`T(x)` in a template (libclang: an unresolved call, T first) converts a number when the MEP launches the kernel
    with numeric arguments; with a struct argument it is that struct's constructor, judged unknown."""
    def verdict(arg):
        src, spec, launch = written(tmp_path, TEMPLATE_YAML % arg, CONVERTS)
        calls = [c for c in walk(src.body) if kind(c) == "CALL_EXPR" and not c.spelling]
        assert calls, arg
        return pure_call(src, calls[0])
    assert verdict("unsigned char") is True and verdict("float") is True
    assert verdict("Box") is False


HALVES = """#include <cuda_fp16.h>
#include <cuda_bf16.h>
struct Box { float lo, hi; };
__global__ void k(const float2 *a, float2 *out, const Box *pb, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    __half2 h = __hmul2(__floats2half2_rn(a[i].x, a[i].y), __float2half2_rn(0.5f));
    __nv_bfloat162 b = __floats2bfloat162_rn(a[i].y, a[i].x);
    out[i] = make_float2(__low2float(h) + __bfloat162float(b.x), __high2float(h));
}
"""


def test_half_and_bfloat16_values_are_pure(tmp_path):
    """cuda_fp16.h's and cuda_bf16.h's constructors, conversions and arithmetic make values from values."""
    src, spec, launch = written(tmp_path, YAML, HALVES)
    calls = [c for c in walk(src.body) if kind(c) == "CALL_EXPR" and c.spelling.startswith("__")]
    named = {c.spelling for c in calls}
    assert {"__hmul2", "__floats2half2_rn", "__floats2bfloat162_rn", "__low2float", "__bfloat162float"} <= named
    assert all(pure_call(src, c) for c in calls), [c.spelling for c in calls if not pure_call(src, c)]
