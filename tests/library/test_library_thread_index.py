"""The global thread index in the spellings applications write (thread_index.py): locals that copy blockIdx.x and
threadIdx.x, a block-size macro that is the launch's block, `__umul24`, other orders and types, the index declared
after other statements. Each is read as `blockIdx.x * blockDim.x + threadIdx.x` only where that is provable; the
1D rewrites then apply and their candidates compile. Hand-written kernels and specs."""
from __future__ import annotations


import pytest

from mepgen.optimize.library.analysis import thread_index_var
from mepgen.optimize.library.coarsen import Coarsen
from mepgen.optimize.library.source import Refused
from mepgen.optimize.library.vector_elements import VectorElements
from library_fixtures import compiles, written

YAML = """version: 1
kernel: {{name: scale, id: scale, source: s.cu, source_sha256: "0", start_byte: 0, end_byte: 1{template}}}
sizes: {{{sizes}}}
params:
  - {{name: a, role: in, ctype: const float *, dtype: float32, count: LEN, init: {{kind: uniform, low: 0.0, high: 1.0}}}}
  - {{name: b, role: out, ctype: float *, dtype: float32, count: LEN}}
  - {{name: len, role: scalar, ctype: int, dtype: int32, value: LEN}}
constants: []
launch: {{grid: ['{grid}'], block: ['{block}'], shared_mem: '0'}}
build: {{arch: sm_90, std: c++17, nvcc_flags: [-O3]}}
verify: {{input_sets: 2, seed: 1}}
timing: {{warmup: 5, reps: 50, flush_l2: true}}
todo: []
"""

# the block and thread indices copied to locals, the block size a macro for the launch's literal block
COPIED = """#define THREADS_PER_BLOCK 128
__global__ void scale(const float *a, float *b, int len) {
    int blk = blockIdx.x;
    int lane = threadIdx.x;
    int e = blk * THREADS_PER_BLOCK + lane;
    if (e < len) b[e] = 3.0f * a[e] + 1.0f;
}
"""

# the thread index in another order, `const unsigned`, declared after a value-less local
LATE = """__global__ void scale(const float *a, float *b, int len) {
    float bias;
    const unsigned int e = threadIdx.x + blockDim.x * blockIdx.x;
    if (e >= len) return;
    bias = 0.5f;
    b[e] = a[e] * 2.0f + bias;
}
"""

# the 24-bit product
MUL24 = """__global__ void scale(const float *a, float *b, int len) {
    int e = __umul24(blockIdx.x, blockDim.x) + threadIdx.x;
    if (e < len) b[e] = a[e] - 1.0f;
}
"""


def make(tmp_path, text, block="128", grid="(LEN + 127) / 128", sizes="LEN: 1000000", template=""):
    return written(tmp_path, YAML.format(block=block, grid=grid, sizes=sizes, template=template), text)


def rewrite(tmp_path, src, spec, launch, t):
    space = t.space(src, spec, launch)
    point = {k: v[0] for k, v in space.items()}
    rw = t.apply(src, spec, launch, point)
    compiles(tmp_path, spec, rw.text)
    return rw


def test_locals_and_a_launch_equal_macro_are_the_global_index(tmp_path):
    src, spec, launch = make(tmp_path, COPIED)
    var, _ = thread_index_var(src)
    assert var == "e"
    body = src.src(src.body)
    assert "int e = blockIdx.x * blockDim.x + threadIdx.x;" in body
    assert "blk" not in body and "lane" not in body          # the copies nothing else read are gone
    rw = rewrite(tmp_path, src, spec, launch, Coarsen())
    assert "THREADS_PER_BLOCK" not in rw.text.split("__global__")[1]   # coarsening changes the grid: no baked block
    rewrite(tmp_path, src, spec, launch, VectorElements())


def test_a_local_still_read_elsewhere_stays(tmp_path):
    text = COPIED.replace("b[e] = 3.0f * a[e] + 1.0f;", "b[e] = 3.0f * a[e] + lane;")
    src, spec, launch = make(tmp_path, text)
    assert thread_index_var(src)[0] == "e"
    assert "int lane = threadIdx.x;" in src.text and "int blk" not in src.text
    with pytest.raises(Refused, match="not the kernel's first statement"):
        Coarsen().space(src, spec, launch)


def test_an_index_declared_late_in_another_order_moves_first(tmp_path):
    src, spec, launch = make(tmp_path, LATE)
    first = next(iter(src.body.get_children()))
    assert src.src(first).startswith("const unsigned int e = threadIdx.x + blockDim.x * blockIdx.x")
    rw = rewrite(tmp_path, src, spec, launch, Coarsen())
    assert "bias = 0.5f;" in rw.text
    rewrite(tmp_path, src, spec, launch, VectorElements())


def test_a_local_with_a_value_before_the_index_keeps_its_place(tmp_path):
    text = LATE.replace("    float bias;\n", "    float bias = 0.25f;\n")
    src, spec, launch = make(tmp_path, text)
    first = next(iter(src.body.get_children()))
    assert src.src(first).startswith("float bias = 0.25f")
    with pytest.raises(Refused, match="not the kernel's first statement"):
        Coarsen().space(src, spec, launch)


def test_umul24_where_the_grid_fits_24_bits(tmp_path):
    src, spec, launch = make(tmp_path, MUL24)
    assert "int e = blockIdx.x * blockDim.x + threadIdx.x;" in src.text and "__umul24" not in src.text
    rewrite(tmp_path, src, spec, launch, Coarsen())


def test_umul24_on_a_grid_past_23_bits_is_refused(tmp_path):
    src, spec, launch = make(tmp_path, MUL24, grid="(LEN + 127) / 128", sizes="LEN: 2147483520")
    assert "__umul24" in src.text
    with pytest.raises(Refused, match=r"`__umul24` and the grid along x \(16777215 blocks\) exceeds 23 bits"):
        thread_index_var(src)


def test_a_reassigned_local_is_refused_with_its_reason(tmp_path):
    text = COPIED.replace("    int e =", "    if (len > 4096) blk += 1;\n    int e =")
    src, spec, launch = make(tmp_path, text)
    with pytest.raises(Refused, match="`blk`, which holds blockIdx.x, is assigned in the kernel"):
        Coarsen().space(src, spec, launch)


def test_a_narrow_local_is_refused(tmp_path):
    src, spec, launch = make(tmp_path, COPIED.replace("int lane", "short lane"))
    with pytest.raises(Refused, match="`lane`, which holds threadIdx.x, is a `short`, not a 32-bit int"):
        thread_index_var(src)


# the block size a template parameter (CUB and SDK style), launched as scale<128> with blocks of 128
TEMPLATED = """template <int THREADS>
__global__ void scale(const float *a, float *b, int len) {
    int e = blockIdx.x * THREADS + threadIdx.x;
    if (e < len) b[e] = 3.0f * a[e] + 1.0f;
}
"""


def test_a_template_block_size_the_launch_gives_is_the_global_index(tmp_path):
    src, spec, launch = make(tmp_path, TEMPLATED, template=", template_args: ['128']")
    var, _ = thread_index_var(src)
    assert var == "e" and "int e = blockIdx.x * blockDim.x + threadIdx.x;" in src.src(src.body)
    rewrite(tmp_path, src, spec, launch, Coarsen())
    # launched as scale<256> on blocks of 128: not the launch's block
    src, spec, launch = make(tmp_path, TEMPLATED, template=", template_args: ['256']")
    with pytest.raises(Refused, match=r"`THREADS` \(= 256\) is not the launch's block size along x"):
        Coarsen().space(src, spec, launch)


def test_a_macro_other_than_the_launch_block_is_refused(tmp_path):
    src, spec, launch = make(tmp_path, COPIED, block="256", grid="(LEN + 255) / 256")
    with pytest.raises(Refused, match=r"`THREADS_PER_BLOCK` \(= 128\) is not the launch's block size along x "
                                      r"\(`256` = 256\)"):
        Coarsen().space(src, spec, launch)


def test_a_macro_against_a_block_size_symbol_is_refused(tmp_path):
    # the launch's block is a size of the MEP (tune_params may set it); the kernel's macro is a fixed 128
    src, spec, launch = make(tmp_path, COPIED, block="BS", grid="(LEN + BS - 1) / BS", sizes="LEN: 1000000, BS: 128")
    with pytest.raises(Refused, match="the launch's block size along x `BS` is a size of the MEP"):
        thread_index_var(src)
