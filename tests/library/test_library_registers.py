"""fuse_updates, hoist_loads and warp_reduce on hand-written kernels and specs: where the access model proves them,
the refusal's reason where it does not, and that each rewrite compiles (nvcc)."""
from __future__ import annotations


import pytest

from mepgen.optimize.dry_run import STRUCTURAL, plan
from mepgen.optimize.library.fuse_updates import FuseUpdates
from mepgen.optimize.library.hoist_loads import HoistLoads
from mepgen.optimize.library.source import Refused
from mepgen.optimize.library.warp_reduce import WarpReduce
from library_fixtures import compiles, written

YAML = """version: 1
kernel: {{name: {name}, id: {name}, source: k.cu, source_sha256: "0", start_byte: 0, end_byte: 1}}
sizes: {{N: 65536, M: 32}}
params:
  - {{name: a, role: in, ctype: const float *, dtype: float32, count: N * M, init: {{kind: uniform, low: -1.0, high: 1.0}}}}
  - {{name: b, role: in, ctype: const float *, dtype: float32, count: N * M, init: {{kind: uniform, low: -1.0, high: 1.0}}}}
  - {{name: out, role: {out_role}, ctype: float *, dtype: float32, count: N * M, init: {{kind: uniform, low: -1.0, high: 1.0}}}}
  - {{name: n, role: scalar, ctype: int, dtype: int32, value: N}}
  - {{name: m, role: scalar, ctype: int, dtype: int32, value: M}}
constants: []
launch: {{grid: [{grid}], block: [{block}], shared_mem: '0'}}
build: {{arch: sm_90, std: c++17, nvcc_flags: [-O3]}}
verify: {{input_sets: 2, seed: 1, tolerance: {{out: {{rtol: 0.00001, atol: 0.000001}}}}}}
timing: {{warmup: 5, reps: 50, flush_l2: true}}
todo: []
"""


def make(tmp_path, text, name, grid="(N + 127) / 128", block="128", out_role="inout"):
    return written(tmp_path, YAML.format(name=name, grid=grid, block=block, out_role=out_role), text)


def refusal(t, src, spec, launch) -> str:
    with pytest.raises(Refused) as e:
        t.space(src, spec, launch)
    return str(e.value)


# --- fuse_updates ----------------------------------------------------------------------------------------------

# each thread owns two neighbouring outputs and corrects them on every step of a loop, with work in between
FUSE = """__global__ void blend(const float *a, const float *b, float *out, int n, int m) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t < n / 2) {
        for (int k = 0; k < m; ++k) {
            out[2 * t] += a[k * n + t] * b[k];
            float d = a[k * n + t] - b[k * n + t];
            out[2 * t + 1] -= d * d;
            out[2 * t] *= 0.5f;
        }
    }
}
"""


def test_two_elements_updated_in_a_loop_live_in_registers(tmp_path):
    src, spec, launch = make(tmp_path, FUSE, "blend")
    t = FuseUpdates()
    assert t.space(src, spec, launch) == {}
    rw = t.apply(src, spec, launch, {})
    # loaded once where the loop runs, stored once after it; the updates in the same order on the register
    assert "if ((0) < (m)) {" in rw.text
    assert "auto mepgen_r0 = out[2 * t];" in rw.text and "auto mepgen_r1 = out[2 * t + 1];" in rw.text
    assert "mepgen_r0 += a[k * n + t] * b[k];" in rw.text and "mepgen_r1 -= d * d;" in rw.text
    assert "mepgen_r0 *= 0.5f;" in rw.text
    assert rw.text.index("out[2 * t] = mepgen_r0;") > rw.text.index("mepgen_r0 *= 0.5f;")
    assert rw.text.count("out[") == 4 and rw.launch is None
    compiles(tmp_path, spec, rw.text)
    assert "fuse_updates" in STRUCTURAL
    assert "fuse_updates" in [c["name"] for c in plan(spec, FUSE).candidates]


@pytest.mark.parametrize("old, new, reason", [
    # another element of the same buffer, at an index the model cannot tell apart from the updated one
    ("a[k * n + t] * b[k];", "a[k * n + t] * out[k];", "may be the same element"),
    # the updated element moves with the counter
    ("out[2 * t] += a", "out[2 * t + k] += a", "changes in the loop"),
    # a barrier: another thread may read the element between iterations
    ("float d =", "__syncthreads(); float d =", "__syncthreads"),
    # a return would skip the store after the loop
    ("float d =", "if (b[k] > 2.0f) return; float d =", "a return or goto"),
])
def test_fusion_refuses_what_the_model_cannot_prove(tmp_path, old, new, reason):
    src, spec, launch = make(tmp_path, FUSE.replace(old, new), "blend")
    assert reason in refusal(FuseUpdates(), src, spec, launch)


def test_a_buffer_handed_to_a_function_may_be_read_at_the_element(tmp_path):
    # `peek` has no side effects, but it reads `out` wherever it likes: the register's element among them
    text = "__device__ float peek(const float *p, int i) { return p[i]; }\n" + FUSE.replace(
        "out[2 * t] *= 0.5f;", "out[2 * t] *= peek(out, k);")
    src, spec, launch = make(tmp_path, text, "blend")
    assert "`out` may be the same element" in refusal(FuseUpdates(), src, spec, launch)
    tree = "__device__ float first(const float *p) { return p[1]; }\n" + TREE.replace(
        "if (me == 0) out[blockIdx.x] = part[0];", "if (me == 0) out[blockIdx.x] = first(part);")
    src, spec, launch = make(tmp_path, tree, "block_total", grid="N / 256", block="256")
    assert "`part` reads the tree's array at an element other than 0" in refusal(WarpReduce(), src, spec, launch)


def test_a_pointer_the_kernel_offsets_may_alias_the_element(tmp_path):
    text = FUSE.replace("float d = a[k * n + t] - b[k * n + t];",
                        "float *o = out + 1; float d = a[k * n + t] - o[k];")
    src, spec, launch = make(tmp_path, text, "blend")
    assert "may be the same element" in refusal(FuseUpdates(), src, spec, launch)


def test_what_nvcc_keeps_in_registers_itself_is_left_to_it(tmp_path):
    """PTX of nvcc -O3: a run of updates among `__restrict__` accesses, a loop's updates of a shared element among
    global reads, an invariant load in a loop that stores through `__restrict__` pointers come out the same
    rewritten or not: each transformation says so instead of offering a candidate that changes nothing."""
    restricted = RUN.replace("const float *a, const float *b, float *out",
                             "const float *__restrict__ a, const float *__restrict__ b, float *__restrict__ out")
    src, spec, launch = make(tmp_path, restricted, "correct")
    assert "keeps `out[2 * t]` in a register itself" in refusal(FuseUpdates(), src, spec, launch)
    shared = """__global__ void partial(const float *a, const float *b, float *out, int n, int m) {
    __shared__ float acc[128];
    acc[threadIdx.x] = 0.0f;
    for (int k = threadIdx.x; k < n; k += 128) {
        acc[threadIdx.x] += a[k];
        acc[threadIdx.x] *= b[k];
    }
    out[blockIdx.x * 128 + threadIdx.x] = acc[threadIdx.x];
}
"""
    src, spec, launch = make(tmp_path, shared, "partial")
    assert "every other access of the loop is in another memory space" in refusal(FuseUpdates(), src, spec, launch)
    hoisted = HOIST.replace("const float *a, const float *b, float *out",
                            "const float *__restrict__ a, const float *__restrict__ b, float *__restrict__ out")
    src, spec, launch = make(tmp_path, hoisted, "affine_rows", out_role="out")
    assert "nvcc hoists `b[t]` itself" in refusal(HoistLoads(), src, spec, launch)


def test_a_loop_that_is_the_body_of_an_if_keeps_its_else(tmp_path):
    text = FUSE.replace("if (t < n / 2) {\n        for", "if (t < n / 2) {\n        if (m > 0) for").replace(
        "            out[2 * t] *= 0.5f;\n        }\n", "            out[2 * t] *= 0.5f;\n        } else out[2 * t] = 0.0f;\n")
    src, spec, launch = make(tmp_path, text, "blend")
    rw = FuseUpdates().apply(src, spec, launch, {})
    assert "if (m > 0) { if ((0) < (m)) {" in rw.text and "} } else out[2 * t] = 0.0f;" in rw.text
    compiles(tmp_path, spec, rw.text)


def test_a_single_sum_is_left_to_scalar_replace(tmp_path):
    text = """__global__ void rowsum(const float *a, const float *b, float *out, int n, int m) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t < n) {
        for (int k = 0; k < m; ++k)
            out[t] += a[t * m + k];
    }
}
"""
    src, spec, launch = make(tmp_path, text, "rowsum")
    assert "scalar_replace" in refusal(FuseUpdates(), src, spec, launch)


# --- hoist_loads -----------------------------------------------------------------------------------------------

# a per-thread scale and offset read on every step of a loop that also stores
HOIST = """__global__ void affine_rows(const float *a, const float *b, float *out, int n, int m) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t < n) {
        #pragma unroll 4
        for (int k = 0; k < m; ++k)
            out[k * n + t] = a[k * n + t] * b[t] + b[n + t];
    }
}
"""


def test_loads_at_an_invariant_index_are_read_once_before_the_loop(tmp_path):
    src, spec, launch = make(tmp_path, HOIST, "affine_rows", out_role="out")
    t = HoistLoads()
    assert t.space(src, spec, launch) == {}
    rw = t.apply(src, spec, launch, {})
    assert "const auto mepgen_h0 = b[t];" in rw.text and "const auto mepgen_h1 = b[n + t];" in rw.text
    assert "out[k * n + t] = a[k * n + t] * mepgen_h0 + mepgen_h1;" in rw.text
    # the pragma stays in front of its loop, inside the guard that reads only where the loop runs
    assert rw.text.index("if ((0) < (m)) {") < rw.text.index("#pragma unroll 4") < rw.text.index("for (int k")
    compiles(tmp_path, spec, rw.text)


@pytest.mark.parametrize("body, reason", [
    # the load happens only on some iterations: reading it before the loop could read out of bounds
    ("out[k * n + t] = k > 0 ? b[t] : a[k];", "only under a condition"),
    # the loop stores into the buffer it reads
    ("out[k * n + t] = out[t] * a[k];", "may write"),
    # nothing stored in the loop: the compiler hoists itself
    ("acc += a[k * n + t] * b[t];", "writes no memory"),
])
def test_hoisting_refuses_with_its_reason(tmp_path, body, reason):
    text = HOIST.replace("out[k * n + t] = a[k * n + t] * b[t] + b[n + t];", body)
    text = text.replace("if (t < n) {", "if (t < n) { float acc = 0.0f;").replace(
        "    }\n}", "    out[t] = acc; }\n}") if "acc" in body else text
    src, spec, launch = make(tmp_path, text, "affine_rows", out_role="inout")
    assert reason in refusal(HoistLoads(), src, spec, launch)


# --- warp_reduce -----------------------------------------------------------------------------------------------

# one partial result per block from a tree in shared memory, spelled with a local thread index and `/= 2`
TREE = """__global__ void block_total(const float *a, const float *b, float *out, int n, int m) {
    __shared__ float part[256];
    unsigned int me = threadIdx.x;
    unsigned int i = blockIdx.x * blockDim.x + me;
    part[me] = i < n ? a[i] * b[i] : 0.0f;
    __syncthreads();
    for (unsigned int half = blockDim.x >> 1; half != 0; half /= 2) {
        if (me < half)
            part[me] = part[me] + part[me + half];
        __syncthreads();
    }
    if (me == 0) out[blockIdx.x] = part[0];
}
"""


def test_the_last_steps_of_a_tree_become_shuffles(tmp_path):
    src, spec, launch = make(tmp_path, TREE, "block_total", grid="N / 256", block="256")
    t = WarpReduce()
    assert t.space(src, spec, launch) == {}
    rw = t.apply(src, spec, launch, {})
    assert "unsigned int half = blockDim.x >> 1;" in rw.text
    assert "for (; half > 32; half /= 2) {" in rw.text
    assert "if (half == 32 && blockDim.x >= 32) {" in rw.text
    # the same operation, first with the element 32 away, then with the lanes 16 ... 1 away
    assert "float mepgen_v = (part[me]) + (part[(me) + 32]);" in rw.text
    for o in (16, 8, 4, 2, 1):
        assert f"mepgen_v = (mepgen_v) + (__shfl_down_sync(0xffffffffu, mepgen_v, {o}));" in rw.text
    assert "if ((me) == 0) part[0] = mepgen_v;" in rw.text
    # where the counter never reaches 32 the original loop finishes the tree
    assert "for (; half != 0; half /= 2) {" in rw.text
    compiles(tmp_path, spec, rw.text)


def test_a_max_tree_with_the_barrier_first_gets_a_barrier_before_the_shuffles(tmp_path):
    text = TREE.replace("part[me] = part[me] + part[me + half];", "part[me] = fmaxf(part[me], part[me + half]);")
    text = text.replace("""        if (me < half)
            part[me] = fmaxf(part[me], part[me + half]);
        __syncthreads();""", """        __syncthreads();
        if (half > me) part[me] = fmaxf(part[me], part[me + half]);""")
    src, spec, launch = make(tmp_path, text, "block_total", grid="N / 256", block="256")
    rw = WarpReduce().apply(src, spec, launch, {})
    assert "float mepgen_v = fmaxf((part[me]), (part[(me) + 32]));" in rw.text
    assert "mepgen_v = fmaxf((mepgen_v), (__shfl_down_sync(0xffffffffu, mepgen_v, 16)));" in rw.text
    warp = rw.text[rw.text.index("if (half == 32"):]
    assert warp.index("__syncthreads();") < warp.index("if ((me) < 32)")


@pytest.mark.parametrize("change, reason", [
    (("if (me == 0) out[blockIdx.x] = part[0];", "out[i] = part[me];"), "element other than 0"),
    (("part[me] = part[me] + part[me + half];", "part[me] = part[me] - part[me + half];"), "associative"),
    (("part[me] = part[me] + part[me + half];", "part[me] = part[me] + part[me + half + 1];"), "away"),
    # a start the parse cannot read (a macro no header of the MEP defines): a reason, not a crash
    (("unsigned int half = blockDim.x >> 1;", "unsigned int half = NO_SUCH_MACRO / 2;"), "has no value the parse"),
])
def test_warp_reduce_refuses_what_is_not_the_tree(tmp_path, change, reason):
    src, spec, launch = make(tmp_path, TREE.replace(*change), "block_total", grid="N / 256", block="256")
    assert reason in refusal(WarpReduce(), src, spec, launch)


def test_warp_reduce_needs_a_1d_block(tmp_path):
    src, spec, launch = make(tmp_path, TREE, "block_total", grid="N / 256", block="128, 2")
    assert "not 1D" in refusal(WarpReduce(), src, spec, launch)


# several corrections of one output in a row, no loop around them that keeps the index
RUN = """__global__ void correct(const float *a, const float *b, float *out, int n, int m) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t < n / 2) {
        float s = a[t];
        out[2 * t] += s * b[t];
        out[2 * t + 1] = s;
        out[2 * t] -= b[n + t] * b[n + t];
        out[2 * t] *= 2.0f;
    }
}
"""


def test_updates_in_a_row_are_fused_between_the_first_and_the_last(tmp_path):
    src, spec, launch = make(tmp_path, RUN, "correct")
    rw = FuseUpdates().apply(src, spec, launch, {})
    body = rw.text[rw.text.index("float s = a[t];"):]
    assert body.index("auto mepgen_r0 = out[2 * t];") < body.index("mepgen_r0 += s * b[t];")
    # the store in between is another element (its index differs by the constant 1): it stays
    assert "out[2 * t + 1] = s;" in body and "mepgen_r0 -= b[n + t] * b[n + t];" in body
    assert body.index("mepgen_r0 *= 2.0f;") < body.index("out[2 * t] = mepgen_r0;")
    assert body.count("out[2 * t]") == 2
    compiles(tmp_path, spec, rw.text)


def test_a_store_the_model_cannot_tell_apart_stops_the_run(tmp_path):
    # `n + 2 * t` and `2 * t` differ by n, a parameter: it may be 0 as far as the kernel says
    src, spec, launch = make(tmp_path, RUN.replace("out[2 * t + 1] = s;", "out[n + 2 * t] = s;"), "correct")
    assert "may be the same element" in refusal(FuseUpdates(), src, spec, launch)


# --- the rewrites compute what the originals do: both run on the CPU, thread by thread, results compared bit for bit

SIM_INPUTS = """
    std::vector<float> a(N * M), b(N * M), o1(N * M), o2(N * M);
    for (int i = 0; i < N * M; i++) {
        a[i] = (i * 37 % 11) * 0.25f - 1.0f;
        b[i] = (i * 13 % 7) * 0.5f - 1.5f;
        o1[i] = o2[i] = (i % 5) * 0.1f;
    }
"""
SIM_COMPARE = """
    for (int i = 0; i < N * M; i++)
        if (o1[i] != o2[i]) { printf("differs at %d: %g %g\\n", i, o1[i], o2[i]); return 1; }
    return 0;
"""


def per_thread(kernel: str, m: str) -> str:
    """main's body: every thread of a 2-block launch of 32 runs `kernel` before and after the rewrite."""
    return SIM_INPUTS + f"""
    blockDim = {{32, 1, 1}};
    gridDim = {{N / 32, 1, 1}};
    for (unsigned g = 0; g < N / 32; g++)
        for (unsigned x = 0; x < 32; x++) {{
            blockIdx = {{g, 0, 0}};
            threadIdx = {{x, 0, 0}};
            before::{kernel}(a.data(), b.data(), o1.data(), N, {m});
            after::{kernel}(a.data(), b.data(), o2.data(), N, {m});
        }}
""" + SIM_COMPARE


@pytest.mark.parametrize("m", ["M", "0"])
@pytest.mark.parametrize("name, text, t", [("blend", FUSE, FuseUpdates()), ("correct", RUN, FuseUpdates()),
                                           ("affine_rows", HOIST, HoistLoads())])
def test_the_rewrites_compute_the_same_on_the_cpu(tmp_path, name, text, t, m):
    from library_fixtures import assert_same_on_cpu
    src, spec, launch = make(tmp_path, text, name)
    rw = t.apply(src, spec, launch, {})
    assert_same_on_cpu(tmp_path, text, rw.text, per_thread(name, m), defines="#define N 64\n#define M 5")


#: a warp's shuffle on the CPU: lanes 0..31 of block threads run at once, each exchange a barrier of the 32
SHUFFLE = """#include <barrier>
static float mepgen_slots[32];
static std::barrier<> mepgen_warp(32);
template <class T> T mepgen_shfl(T v, unsigned o, unsigned lane) {
    mepgen_slots[lane] = v;
    mepgen_warp.arrive_and_wait();
    T r = lane + o < 32 ? mepgen_slots[lane + o] : v;
    mepgen_warp.arrive_and_wait();
    return r;
}
#define __shfl_down_sync(mask, v, o) mepgen_shfl(v, o, threadIdx.x)
#define N 1024
#define M 1
#define fmaxf(a, b) ((a) > (b) ? (a) : (b))
"""


@pytest.mark.parametrize("block", [256, 32])
def test_the_shuffled_tree_sums_the_same_on_the_cpu(tmp_path, block):
    """Bit for bit (the same pairs in the same order), with 256 threads (the shuffles) and 32 (the original loop)."""
    from library_fixtures import assert_same_on_cpu
    src, spec, launch = make(tmp_path, TREE, "block_total", grid="N / 256", block="256")
    rw = WarpReduce().apply(src, spec, launch, {})
    body = SIM_INPUTS + f"""
    launch(N / {block}, {block}, 1, [&] {{ before::block_total(a.data(), b.data(), o1.data(), N, M); }});
    launch(N / {block}, {block}, 1, [&] {{ after::block_total(a.data(), b.data(), o2.data(), N, M); }});
""" + SIM_COMPARE
    assert_same_on_cpu(tmp_path, TREE, rw.text, body, defines=SHUFFLE, blocks=True)
