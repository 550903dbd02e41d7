"""warp_atomics on hand-written kernels and specs: an atomic update of one address made once per warp where the
syntax tree proves every thread of a warp reaches the same address at most once; the refusal's reason where it
does not; that the rewrite compiles (nvcc) and updates the same totals as the original, thread by thread on the CPU
(whole warps: the shuffles; a block that is not whole warps: each thread's own update)."""
from __future__ import annotations

import pytest

from mepgen.optimize.dry_run import STRUCTURAL, plan
from mepgen.optimize.library.source import Refused
from mepgen.optimize.library.warp_atomics import WarpAtomics
from library_fixtures import assert_same_on_cpu, compiles, written

YAML = """version: 1
kernel: {{name: {name}, id: {name}, source: k.cu, source_sha256: "0", start_byte: 0, end_byte: 1{template}}}
sizes: {{N: {n}}}
params:
  - {{name: x, role: in, ctype: const {ty} *, dtype: {dtype}, count: N, init: {{kind: uniform, low: {low}, high: 8}}}}
  - {{name: total, role: inout, ctype: {ty} *, dtype: {dtype}, count: 4, init: {{kind: zeros}}}}
  - {{name: n, role: scalar, ctype: int, dtype: int32, value: N}}
constants: []
launch: {{grid: [(N + 127) / 128], block: [128], shared_mem: '0'}}
build: {{arch: sm_90, std: c++17, nvcc_flags: [-O3]}}
verify: {{input_sets: 2, seed: 1}}
timing: {{warmup: 5, reps: 50, flush_l2: true}}
todo: []
"""

# the positive elements' doubled sum, each thread adding its own under a guard (the early return is normalized)
POSITIVE = """__global__ void positive(const float *x, float *total, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = x[i];
    if (v > 0.0f)
        atomicAdd(total, v * 2.0f);
}
"""

# a block's partial sum in one shared variable every thread adds to, then one thread adds it to the total
BLOCK_SUM = """__global__ void block_sum(const float *x, float *total, int n) {
    __shared__ float part;
    if (threadIdx.x == 0) part = 0.0f;
    __syncthreads();
    float s = 0.0f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        s += x[i];
    atomicAdd(&part, s);
    __syncthreads();
    if (threadIdx.x == 0) atomicAdd(total, part);
}
"""

# counts and extremes of integer data: a counter, the largest value, a bit mask, the slot chosen by the block
COUNTS = """__global__ void counts(const int *x, int *total, int n) {
    const int slot = blockIdx.x % 2;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        int v = x[i];
        if (v > 2)
            atomicAdd(&total[slot], 1);
        atomicMax(total + 2, v);
        atomicOr(&total[3], 1 << (v & 7));
    }
}
"""


# per-bin totals in a loop every thread runs alike: the bin is the loop's counter, the same in every lane
BINS = """__global__ void bins(const float *x, float *total, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = i < n ? x[i] : 0.0f;
    for (int b = 0; b < 4; b++) {
        const int edge = b * 4 - 8;
        if (v > edge)
            atomicAdd(&total[b], v);
    }
}
"""


def make(tmp_path, text, name, ty="float", template="", n=4096, low=-8):
    dtype = {"float": "float32", "int": "int32"}[ty]
    return written(tmp_path, YAML.format(name=name, ty=ty, dtype=dtype, template=template, n=n, low=low), text)


def refusal(tmp_path, text, name, ty="float") -> str:
    src, spec, launch = make(tmp_path, text, name, ty)
    with pytest.raises(Refused) as e:
        WarpAtomics().space(src, spec, launch)
    return str(e.value)


def test_a_guarded_update_of_one_address_is_made_once_per_warp(tmp_path):
    src, spec, launch = make(tmp_path, POSITIVE, "positive")
    t = WarpAtomics()
    assert t.space(src, spec, launch) == {}
    rw = t.apply(src, spec, launch, {})
    assert rw.launch is None
    text = rw.text
    # the thread's value is kept where the update was; the update itself follows the guard, once per warp
    assert "float mepgen_wa0 = (float)0; bool mepgen_hit0 = false;" in text
    assert "(mepgen_wa0 = (v * 2.0f), mepgen_hit0 = true);" in text
    assert text.index("mepgen_hit0 = true") < text.index("__any_sync(0xffffffffu, mepgen_hit0)")
    assert "{ float mepgen_n = __shfl_down_sync(0xffffffffu, mepgen_wa0, mepgen_o); " \
           "mepgen_wa0 = (mepgen_wa0) + (mepgen_n); }" in text
    assert "& 31u) == 0u) atomicAdd(total, mepgen_wa0);" in text
    # a block that is not whole warps: each thread that reached the update makes it, as before
    assert "} else if (mepgen_hit0) {\n        atomicAdd(total, mepgen_wa0);" in text
    assert "warp_atomics" in STRUCTURAL
    compiles(tmp_path, spec, text)


def test_one_thread_s_update_is_left_alone(tmp_path):
    src, spec, launch = make(tmp_path, BLOCK_SUM, "block_sum")
    rw = WarpAtomics().apply(src, spec, launch, {})
    assert "atomicAdd(&part, mepgen_wa0);" in rw.text
    # `if (threadIdx.x == 0) atomicAdd(total, part)`: a single update per block has nothing to combine
    assert "atomicAdd(total, part);" in rw.text and "mepgen_wa1" not in rw.text
    # the aggregated update lands before the barrier that publishes it
    assert rw.text.index("atomicAdd(&part, mepgen_wa0)") < rw.text.rindex("__syncthreads();")
    compiles(tmp_path, spec, rw.text)


def test_integer_updates_get_their_own_identities(tmp_path):
    src, spec, launch = make(tmp_path, COUNTS, "counts", ty="int")
    rw = WarpAtomics().apply(src, spec, launch, {})
    assert "int mepgen_wa0 = (int)0;" in rw.text                              # atomicAdd
    assert "int mepgen_wa1 = (int)(-0x7fffffff - 1);" in rw.text              # atomicMax
    assert "int mepgen_wa2 = (int)0;" in rw.text                              # atomicOr
    # every lane reads its neighbour once, then keeps the larger
    assert "{ int mepgen_n = __shfl_down_sync(0xffffffffu, mepgen_wa1, mepgen_o); " \
           "mepgen_wa1 = ((mepgen_n) > (mepgen_wa1) ? (mepgen_n) : (mepgen_wa1)); }" in rw.text
    assert "atomicAdd(&total[slot], mepgen_wa0);" in rw.text
    compiles(tmp_path, spec, rw.text)


@pytest.mark.parametrize("new, reason", [
    ("int old = atomicAdd((int *)total, 1); (void)old;", "its result is used"),
    ("for (int k = 0; atomicAdd((int *)total + 2, 1) < 3 && k < 2; k++) v += 1.0f;", "its result is used"),
    ("atomicAdd(total + (threadIdx.x & 3), v);", "depends on the thread"),
    ("atomicAdd(&total[(int)x[0] & 3], v);", "reads memory"),
    # a loop around it that reads the total: the updates it delays would be seen
    ("for (int k = 0; k < i % 3; k++) atomicAdd(total, v + total[1]);", "total is used after it"),
    ("{ atomicAdd(total, v); v = total[1]; }", "total is used after it"),
    ("{ atomicAdd(total, v); __threadfence(); }", "`__threadfence` follows it"),
    # a function of the kernel's file may read the thread's index: the lanes' addresses may differ
    ("atomicAdd(total + lane_slot(), v);", "calls `lane_slot`, whose value may depend on the thread"),
])
def test_the_refusal_names_what_is_not_proven(tmp_path, new, reason):
    text = "__device__ int lane_slot() { return threadIdx.x & 3; }\n" + POSITIVE.replace("atomicAdd(total, v * 2.0f);", new)
    assert reason in refusal(tmp_path, text, "positive")


def test_a_return_before_the_update_is_refused(tmp_path):
    """An early return of the kernel's own top is read as a guard (normalize.py: POSITIVE has one); one that
    stays a return (inside a loop) lets some threads of a warp leave before the shuffles."""
    text = POSITIVE.replace("    if (v > 0.0f)\n", "    for (int k = 0; k < 4; k++)\n        if (x[k] > 7.9f) return;\n"
                                                    "    if (v > 0.0f)\n")
    assert "a `return` or `goto` before it" in refusal(tmp_path, text, "positive")


# a template's element type: the call has dependent arguments (libclang gives it no name of its own)
TEMPLATE = "template <typename T>\n" + BLOCK_SUM.replace("block_sum(const float *x, float *total", "tsum(const T *x, T *total") \
    .replace("__shared__ float part", "__shared__ T part").replace("part = 0.0f", "part = 0") \
    .replace("float s = 0.0f", "T s = 0")


def test_a_template_s_update_takes_the_launched_element_type(tmp_path):
    src, spec, launch = make(tmp_path, TEMPLATE, "tsum", template=", template_args: [float]")
    rw = WarpAtomics().apply(src, spec, launch, {})
    assert "T mepgen_wa0 = (T)0; bool mepgen_hit0 = false;" in rw.text
    assert "atomicAdd(&part, mepgen_wa0);" in rw.text
    # launched with an element type shuffles cannot combine under atomicOr: refused by that type
    text = TEMPLATE.replace("atomicAdd(&part, s);", "atomicOr(&part, s);")
    src, spec, launch = make(tmp_path, text, "tsum", template=", template_args: [float]")
    with pytest.raises(Refused, match="atomicOr on `float`"):
        WarpAtomics().space(src, spec, launch)


def test_a_template_s_pointer_plus_offset_takes_the_launched_element_type(tmp_path):
    """`atomicAdd(total + 1, s)` on a `T *total`: the address's own type is dependent, the pointer's is `T *`."""
    text = TEMPLATE.replace("atomicAdd(&part, s);", "atomicAdd(total + 1, s);")
    src, spec, launch = make(tmp_path, text, "tsum", template=", template_args: [float]")
    rw = WarpAtomics().apply(src, spec, launch, {})
    assert "T mepgen_wa0 = (T)0;" in rw.text and "atomicAdd(total + 1, mepgen_wa0);" in rw.text


def test_a_test_on_the_data_is_not_one_thread(tmp_path):
    """`x[i] == 0` lets any number of threads through (only a test of the thread's own index picks one)."""
    text = POSITIVE.replace("if (v > 0.0f)", "if (x[i] == 0.5f)")
    src, spec, launch = make(tmp_path, text, "positive")
    assert "atomicAdd(total, mepgen_wa0)" in WarpAtomics().apply(src, spec, launch, {}).text
    assert "one thread of the block" in refusal(tmp_path, POSITIVE.replace("if (v > 0.0f)", "if (i == 0)"), "positive")


def test_an_update_in_a_loop_every_lane_runs_alike_is_made_once_per_warp_and_pass(tmp_path):
    src, spec, launch = make(tmp_path, BINS, "bins")
    rw = WarpAtomics().apply(src, spec, launch, {})
    body = rw.text[rw.text.index("for (int b = 0; b < 4; b++) {"):]
    # inside the loop's body: declared before the `if`, made after it, on every pass
    assert body.index("float mepgen_wa0 = (float)0;") < body.index("if (v > edge)") < \
        body.index("atomicAdd(&total[b], mepgen_wa0);")
    compiles(tmp_path, spec, rw.text)


@pytest.mark.parametrize("loop", [
    "for (int b = 0; b < (i & 3); b++) {",                      # a bound that differs between the threads
    "for (int b = 0; b < 4; b++) { b += v > 100.0f;",            # a counter the body changes
    "for (int b = 0; b < 4; b++) { if (v < -7.5f) break;",       # a break: some lanes leave early
])
def test_a_loop_the_lanes_may_run_differently_is_refused_where_its_counter_is_the_address(tmp_path, loop):
    """The lanes of a warp may be at different bins: the update's address is not the same in every lane."""
    text = BINS.replace("for (int b = 0; b < 4; b++) {", loop)
    assert "the local b in its address is assigned" in refusal(tmp_path, text, "bins")


# a grid-stride sum: each thread adds several elements to one total, in a loop whose trip count is its own
STRIDED = """__global__ void strided(const float *x, float *total, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        if (x[i] > 0.0f)
            atomicAdd(total, x[i]);
        if (x[i] < -6.0f)
            atomicAdd(total + 1, 1.0f);
    }
}
"""


def test_updates_repeated_by_a_loop_are_accumulated_then_made_once_per_warp(tmp_path):
    src, spec, launch = make(tmp_path, STRIDED, "strided")
    rw = WarpAtomics().apply(src, spec, launch, {})
    # the thread's own updates added up in a register, whatever its number of passes; one update per warp after
    assert "(mepgen_wa0 = (mepgen_wa0) + ((x[i])), mepgen_hit0 = true);" in rw.text
    assert "(mepgen_wa1 = (mepgen_wa1) + ((1.0f)), mepgen_hit1 = true);" in rw.text
    assert rw.text.index("i += blockDim.x * gridDim.x") < rw.text.index("atomicAdd(total, mepgen_wa0)")
    compiles(tmp_path, spec, rw.text)


def test_an_update_aggregated_already_is_not_aggregated_again(tmp_path):
    """The fallback's `else if (mepgen_hit0) atomicAdd(...)` is an update of one address too; the statement holding
    it exchanges values within the warp already (a second application declared mepgen_wa0 twice: nvcc refused)."""
    src, spec, launch = make(tmp_path, BLOCK_SUM, "block_sum")
    once = WarpAtomics().apply(src, spec, launch, {}).text
    src, spec, launch = make(tmp_path, once, "block_sum")
    with pytest.raises(Refused, match=r"exchanges values within the warp already \(__any_sync, __shfl_down_sync\)"):
        WarpAtomics().space(src, spec, launch)


def test_the_dry_run_offers_it(tmp_path):
    src, spec, launch = make(tmp_path, POSITIVE, "positive")
    p = plan(spec, POSITIVE, tmp_path / "plan")
    assert "warp_atomics" in p.structural


# --- the same totals on the CPU: every thread of a block runs at once, each warp's exchanges a barrier of its 32

WARPS = """#include <cstring>
#include <mutex>
static std::mutex mepgen_atomic;
template <class T> T atomicAdd(T *p, T v) { std::lock_guard<std::mutex> g(mepgen_atomic); T o = *p; *p = o + v; return o; }
template <class T> T atomicMax(T *p, T v) { std::lock_guard<std::mutex> g(mepgen_atomic); T o = *p; *p = v > o ? v : o; return o; }
template <class T> T atomicOr(T *p, T v) { std::lock_guard<std::mutex> g(mepgen_atomic); T o = *p; *p = o | v; return o; }
struct MepgenWarp { std::barrier<> bar{32}; unsigned long long slot[32]; bool flag[32]; };
static MepgenWarp mepgen_warps[32];
"""
WARP_FUNCTIONS = """
static unsigned mepgen_lin() { return (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x; }
template <class T> T __shfl_down_sync(unsigned, T v, int o) {
    MepgenWarp &w = mepgen_warps[mepgen_lin() / 32]; unsigned l = mepgen_lin() % 32;
    std::memcpy(&w.slot[l], &v, sizeof(T)); w.bar.arrive_and_wait();
    T r = v; if (l + o < 32) std::memcpy(&r, &w.slot[l + o], sizeof(T)); w.bar.arrive_and_wait();
    return r;
}
static bool __any_sync(unsigned, bool p) {
    MepgenWarp &w = mepgen_warps[mepgen_lin() / 32];
    w.flag[mepgen_lin() % 32] = p; w.bar.arrive_and_wait();
    bool any = false; for (bool f : w.flag) any = any || f; w.bar.arrive_and_wait();
    return any;
}
"""


@pytest.mark.parametrize("block", [64, 48])
@pytest.mark.parametrize("name, text, ty", [("positive", POSITIVE, "float"), ("counts", COUNTS, "int"),
                                            ("bins", BINS, "float"), ("strided", STRIDED, "float")])
def test_the_totals_are_the_same_on_the_cpu(tmp_path, block, name, text, ty):
    """Small integers (floats too): every order of the additions gives the same sums, so the comparison is exact;
    with 64 threads the shuffles run, with 48 (not whole warps) each thread's own update."""
    src, spec, launch = make(tmp_path, text, name, ty)
    rw = WarpAtomics().apply(src, spec, launch, {})
    body = f"""
    const int n = 200;
    std::vector<{ty}> x(n), t1(4, 0), t2(4, 0);
    for (int i = 0; i < n; i++) x[i] = ({ty})((i * 37 % 17) - 8);
    const unsigned grid = {2 if name == "strided" else f"(n + {block} - 1) / {block}"};   // strided: several passes
    launch(grid, {block}, 1, [&] {{ before::{name}(x.data(), t1.data(), n); }});
    launch(grid, {block}, 1, [&] {{ after::{name}(x.data(), t2.data(), n); }});
    for (int k = 0; k < 4; k++)
        if (t1[k] != t2[k]) {{ printf("total %d differs: %g %g\\n", k, (double)t1[k], (double)t2[k]); return 1; }}
    if (t1[0] == 0) {{ printf("nothing was added\\n"); return 1; }}
    return 0;
"""
    before = WARP_FUNCTIONS + text
    after = WARP_FUNCTIONS + rw.text
    assert_same_on_cpu(tmp_path, before, after, body, defines=WARPS, blocks=True)
