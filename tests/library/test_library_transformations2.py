"""The issue-5 transformations (split_columns, coarsen, vector_loads) on the example MEPs: where each
applies (rewritten text, launch and explanation asserted; nvcc compiles the rewritten MEP) and where it
must refuse (the reason asserted), including variants of the examples edited to hit each refusal."""
from __future__ import annotations

import shutil
import subprocess

import pytest

from library_fixtures import load
from mepgen.evaluate.launchcfg import launch_from
from mepgen.evaluate.native import NativeBackend
from mepgen.evaluate.results import CompileFailed
from mepgen.optimize.library.catalog import all_transformations
from mepgen.optimize.library.coarsen import Coarsen
from mepgen.optimize.library.source import Refused
from mepgen.optimize.library.split_columns import SplitColumns
from mepgen.optimize.library.vector_loads import VectorLoads
from mepgen.spec import Tolerance


@pytest.fixture(scope="module")
def meps(library_meps):
    return library_meps


def original(meps, kernel) -> str:
    return (meps[kernel] / "kernel.cu").read_text()


def refusal(meps, kernel, t, text=None, edit_spec=None) -> str:
    src, spec, launch = load(meps[kernel], text)
    if edit_spec:
        edit_spec(spec)
    with pytest.raises(Refused) as e:
        t.space(src, spec, launch)
    return str(e.value)


def test_registered():
    names = [t.name for t in all_transformations()]
    assert {"split_columns", "coarsen", "vector_loads", "vector_elements"} <= set(names)


# --- split_columns ------------------------------------------------------------------------------------

def test_split_columns_column_mean(meps):
    src, spec, launch = load(meps["analysis.column_mean"])
    t = SplitColumns()
    space = t.space(src, spec, launch)
    assert space == {"shape": ["32x4", "32x8", "16x16", "8x32", "32x16", "16x32", "32x32", "8x64", "8x128"],
                     "unroll": [8, 4, 16]}
    rw = t.apply(src, spec, launch, {"shape": "16x16"})
    assert "    #pragma unroll 8\n    for (int row = (0) + threadIdx.y;" in rw.text
    deep = t.apply(src, spec, launch, {"shape": "32x32", "unroll": 16})
    assert "    #pragma unroll 16\n    for (int row = (0) + threadIdx.y; row < nrows; row += 32) {" in deep.text
    assert "16 loads in flight per slice" in deep.explanation
    assert "__shared__ float scratch[BLOCK_SIZE];" not in rw.text and "__syncthreads();\n        acc" not in rw.text
    assert "__shared__ float mepgen_part[16][16];" in rw.text
    assert "for (int row = (0) + threadIdx.y; row < nrows; row += 16) {\n" \
           "        acc += (col < ncols) ? A[row * ncols + col] : 0.0f;" in rw.text
    assert "acc += mepgen_part[mepgen_s][threadIdx.x];" in rw.text
    assert "mean[col] = acc / static_cast<float>(nrows);" in rw.text          # the division by nrows is kept
    assert rw.text.index("if (threadIdx.y == 0)") < rw.text.index("mean[col] = acc")
    assert "__global__ void __launch_bounds__(BLOCK_SIZE) column_mean(const float* A, float* mean, int nrows, " \
           "int ncols)" in rw.text
    assert rw.launch == {"grid": ["(MAT_N + 16 - 1) / 16"], "block": ["16", "16"], "shared_mem": "0"}
    assert "16 row slices per column" in rw.explanation and "deterministic" in rw.explanation
    assert "__launch_bounds__" not in rw.explanation and "chunks" not in rw.explanation
    big = t.apply(src, spec, launch, {"shape": "8x128"})
    assert "__global__ void __launch_bounds__(1024) column_mean(" in big.text
    assert "__launch_bounds__ raised to 1024" in big.explanation and big.launch["block"] == ["8", "128"]
    with pytest.raises(Refused, match="assigned, not accumulated"):
        t.apply(src, spec, launch, {"shape": "16x16", "chunks": 8})
    capped = src.text.replace("__launch_bounds__(BLOCK_SIZE)", "__launch_bounds__(BLOCK_SIZE, 2)")
    src2, spec2, launch2 = load(meps["analysis.column_mean"], capped)
    assert t.space(src2, spec2, launch2)["shape"] == ["32x4", "32x8", "16x16", "8x32"]
    with pytest.raises(Refused, match="names a minimum of resident blocks"):
        t.apply(src2, spec2, launch2, {"shape": "32x32"})


ACCUMULATED = ("mean[col] = acc /", "mean[col] += acc /")


def test_split_columns_atomic_row_chunks(meps):
    text = original(meps, "analysis.column_mean").replace(*ACCUMULATED)
    src, spec, launch = load(meps["analysis.column_mean"], text)
    t = SplitColumns()
    assert t.space(src, spec, launch)["chunks"] == [1, 8, 32, 128]           # mean: rtol 1e-4 in mep.yaml
    rw = t.apply(src, spec, launch, {"shape": "32x8", "chunks": 8})
    assert "const int mepgen_r0 = (0) + (int)blockIdx.y * mepgen_per;" in rw.text
    assert "for (int row = mepgen_r0 + threadIdx.y; row < mepgen_r1; row += 8) {" in rw.text
    assert "atomicAdd(&mean[col], acc / static_cast<float>(nrows));" in rw.text and "mean[col] +=" not in rw.text
    assert rw.launch["grid"] == ["(MAT_N + 32 - 1) / 32", "8"]
    assert "atomicAdd" in rw.explanation and "nondeterministic" in rw.explanation

    def strict(spec):
        spec.verify.tolerance["mean"] = Tolerance(rtol=1e-5, atol=1e-3)
    src, spec, launch = load(meps["analysis.column_mean"], text)
    strict(spec)
    assert "chunks" not in t.space(src, spec, launch)
    with pytest.raises(Refused, match="rtol 1e-05.*is below 0.0001"):
        t.apply(src, spec, launch, {"shape": "32x8", "chunks": 8})
    squared = text.replace("mean[col] += acc /", "mean[col] += acc * acc /")
    src, spec, launch = load(meps["analysis.column_mean"], squared)
    with pytest.raises(Refused, match="not linear in acc"):
        t.apply(src, spec, launch, {"shape": "32x8", "chunks": 8})


def test_split_columns_refuses(meps):
    text = original(meps, "analysis.column_mean")
    t = SplitColumns()
    assert "no accumulator declared with zero right before a row loop" in refusal(meps, "analysis.dense_matvec", t)
    assert "the launch is not 1D" in refusal(meps, "heat.diffuse_step", t)
    side = text.replace("        acc += scratch[tid];\n", "        acc += scratch[tid];\n        mean[col] = acc;\n")
    assert "does more than accumulate one value (other side effects)" in refusal(meps, "analysis.column_mean", t, side)
    reused = text.replace("mean[col] = acc /", "mean[col] = scratch[tid] + acc /")
    assert "used beyond staging" in refusal(meps, "analysis.column_mean", t, reused)
    baked = text.replace("static_cast<float>(nrows)", "static_cast<float>(nrows + 0 * BLOCK_SIZE)")
    assert "bakes the block size BLOCK_SIZE in" in refusal(meps, "analysis.column_mean", t, baked)

    def exact(spec):
        spec.verify.tolerance["mean"] = Tolerance(rtol=0.0, atol=0.0)
    assert "mean must match exactly" in refusal(meps, "analysis.column_mean", t, edit_spec=exact)


def test_split_columns_inside_a_column_guard(meps):
    """matvec_cols after scalar_replace: `if (col < n) { float acc = 0; for (...) acc += ...; y[col] = acc; }`."""
    from mepgen.optimize.library.scalar_replace import ScalarReplace
    from mepgen.optimize.library.source import KernelSource
    src, spec, launch = load(meps["matvec_cols"])
    replaced = ScalarReplace().apply(src, spec, launch, {})
    src = KernelSource(replaced.text, spec)
    assert "8x64" in SplitColumns().space(src, spec, launch)["shape"]
    rw = SplitColumns().apply(src, spec, launch, {"shape": "8x64"})
    # the accumulator hoisted out of the guard so that every thread reaches the barrier
    assert rw.text.index("float mepgen_acc0 = (0.0f);") < rw.text.index("if (col < n) {")
    assert "for (int i = (0) + threadIdx.y; i < n; i += 64) {" in rw.text
    assert "__syncthreads();" in rw.text and "mepgen_acc0 += mepgen_part[mepgen_s][threadIdx.x];" in rw.text
    assert "        if (col < n) {\n            y[col] = mepgen_acc0;" in rw.text
    assert rw.launch == {"grid": ["(N + 8 - 1) / 8"], "block": ["8", "64"], "shared_mem": "0"}
    assert "the column guard kept around the row slices and the output" in rw.explanation
    with_else = replaced.text.replace("y[col] = mepgen_acc0;\n    }", "y[col] = mepgen_acc0;\n    } else { y[0] = 0; }")
    assert with_else != replaced.text
    assert "the column guard has an else branch" in refusal(meps, "matvec_cols", SplitColumns(), with_else)


# --- coarsen ------------------------------------------------------------------------------------------

def test_coarsen_apply_boundary(meps):
    src, spec, launch = load(meps["heat.apply_boundary"])
    t = Coarsen()
    assert t.space(src, spec, launch) == {"factor": [2, 4, 8], "layout": ["strided", "consecutive"]}
    rw = t.apply(src, spec, launch, {"factor": 4, "layout": "strided"})
    assert "const long long mepgen_base = (long long)blockIdx.x * blockDim.x * 4 + threadIdx.x;" in rw.text
    assert "for (int mepgen_c = 0; mepgen_c < 4; ++mepgen_c) {\n    const int t = mepgen_base + mepgen_c * " \
           "blockDim.x;" in rw.text
    # the early return is analysed (and kept) as the guard it is: `if (t < ...) { ... }` inside the coarsened loop
    assert "if (t < 2 * nx + 2 * side) {" in rw.text and "return" not in rw.text.split("apply_boundary")[-1]
    assert "void apply_boundary(float* u, int nx, int ny, BoundaryKind kind, float value)" in rw.text
    assert rw.launch["grid"] == ["((((2 * NX + 2 * (NY - 2)) + BLOCK_SIZE - 1) / BLOCK_SIZE) + 4 - 1) / 4"]
    assert rw.launch["block"] == ["BLOCK_SIZE"]
    assert "4 elements per thread" in rw.explanation and "grid divided by 4" in rw.explanation
    cons = t.apply(src, spec, launch, {"factor": 2, "layout": "consecutive"})
    assert "(long long)(blockIdx.x * blockDim.x + threadIdx.x) * 2;" in cons.text
    assert "const int t = mepgen_base + mepgen_c;" in cons.text


def test_coarsen_refuses(meps):
    t = Coarsen()
    assert "grid-stride loop" in refusal(meps, "cg.axpy", t)
    assert "loops per element" in refusal(meps, "matvec_rows", t)
    unguarded = original(meps, "heat.apply_boundary").replace(
        "    if (t >= 2 * nx + 2 * side) {\n        return;\n    }\n", "")
    assert "no guard of the thread index t against the problem size" in \
        refusal(meps, "heat.apply_boundary", t, unguarded)


# --- vector_loads -------------------------------------------------------------------------------------

def test_vector_loads_axpy_template(meps):
    src, spec, launch = load(meps["cg.axpy"])
    t = VectorLoads()
    assert t.space(src, spec, launch) == {}
    rw = t.apply(src, spec, launch, {})
    assert "struct __align__(16) mepgen_vec0 { T c[4]; };" in rw.text        # valid for axpy<double> as well
    assert "const mepgen_vec0 mepgen_x = reinterpret_cast<const mepgen_vec0*>(x)[mepgen_q];" in rw.text
    assert "mepgen_y.c[mepgen_l] = a * mepgen_x.c[mepgen_l] + mepgen_y.c[mepgen_l];" in rw.text
    assert "reinterpret_cast<mepgen_vec0*>(y)[mepgen_q] = mepgen_y;" in rw.text
    assert "reinterpret_cast<mepgen_vec0*>(x)" not in rw.text                 # x is only read
    tail = "for (int i = mepgen_n4 * 4 + (blockIdx.x * blockDim.x + threadIdx.x); i < n; i += stride) {\n" \
           "            y[i] = a * x[i] + y[i];"
    assert tail in rw.text                                                     # any n stays correct
    assert rw.launch is None
    assert "not 16-byte aligned at run time the original loop runs" in rw.explanation and "scalar tail" in rw.explanation
    test = "if ((reinterpret_cast<unsigned long long>(x) & 15) == 0 && (reinterpret_cast<unsigned long long>(y) & 15) == 0) {"
    assert test in rw.text
    otherwise = rw.text[rw.text.index("} else {"):]
    assert "for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)" in otherwise   # the original loop


@pytest.mark.parametrize("start, step", [("(size_t)blockIdx.x * blockDim.x + threadIdx.x", "stride"),
                                         ("static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x",
                                          "(size_t)blockDim.x * gridDim.x")])
def test_vector_loads_read_a_64_bit_index_through_its_casts_and_keep_them(meps, start, step):
    """`for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; ...)`, as code indexing past 2^31 elements
    writes it: the same loop for the analysis; the vector loop, the tail and the fallback all keep the loop's own
    start, step and counter type, so the patched kernel indexes as the application's did."""
    text = original(meps, "cg.axpy")
    loop = next(ln for ln in text.splitlines() if ln.strip().startswith("for (int i ="))
    wide = loop.replace("int i = blockIdx.x * blockDim.x + threadIdx.x", f"size_t i = {start}")
    wide = wide.replace("i += stride", f"i += {step}")
    assert wide != loop
    src, spec, launch = load(meps["cg.axpy"], text.replace(loop, wide))
    rw = VectorLoads().apply(src, spec, launch, {})
    assert f"for (size_t mepgen_q = {start}; mepgen_q < mepgen_n4; mepgen_q += {step})" in rw.text
    assert f"for (size_t i = mepgen_n4 * 4 + ({start}); i < n; i += {step})" in rw.text
    assert wide.strip() in rw.text[rw.text.index("} else {"):]                # the original loop, as written


@pytest.mark.nvcc
def test_vector_loads_of_a_64_bit_index_compile(meps, tmp_path):
    text = original(meps, "cg.axpy")
    loop = next(ln for ln in text.splitlines() if ln.strip().startswith("for (int i ="))
    wide = loop.replace("int i = blockIdx.x * blockDim.x + threadIdx.x", "size_t i = (size_t)blockIdx.x * blockDim.x + "
                                                                         "threadIdx.x")
    src, spec, launch = load(meps["cg.axpy"], text.replace(loop, wide))
    f = tmp_path / "kernel.cu"
    f.write_text(VectorLoads().apply(src, spec, launch, {}).text)
    built = NativeBackend(spec, meps["cg.axpy"], tmp_path / "build").compile(f)
    assert not isinstance(built, CompileFailed), built.message


def test_vector_loads_count_a_bound_of_scalars(tmp_path):
    """`i < rows * cols`: the element count is the product of the scalars' recorded values (analysis.bound_value),
    so its divisibility by 4 is known and the loop goes through vectors."""
    from library_fixtures import written
    yaml = "\n".join([
        "version: 1", 'kernel: {name: scale, id: scale, source: s.cu, source_sha256: "0", start_byte: 0, end_byte: 1}',
        "sizes: {}", "params:",
        "  - {name: a, role: out, ctype: float *, dtype: float32, count: 4096}",
        "  - {name: b, role: in, ctype: const float *, dtype: float32, count: 4096, init: {kind: uniform, low: 0, high: 1}}",
        "  - {name: rows, role: scalar, ctype: int, dtype: int32, value: '64'}",
        "  - {name: cols, role: scalar, ctype: int, dtype: int32, value: '64'}",
        "constants: []", "launch: {grid: ['16'], block: ['256'], shared_mem: '0'}",
        "build: {arch: sm_90, std: c++17, nvcc_flags: [-O3]}", "verify: {input_sets: 1, seed: 1}",
        "timing: {warmup: 5, reps: 50, flush_l2: true}", "todo: []", ""])
    text = ("__global__ void scale(float *a, const float *b, int rows, int cols) {\n"
            "    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < rows * cols;"
            " i += blockDim.x * gridDim.x) {\n        a[i] = 2.0f * b[i];\n    }\n}\n")
    src, spec, launch = written(tmp_path, yaml, text)
    rw = VectorLoads().apply(src, spec, launch, {})
    assert "const size_t mepgen_n4 = (rows * cols) / 4;" in rw.text
    odd = yaml.replace("value: '64'", "value: '63'").replace("count: 4096", "count: 3969")
    (tmp_path / "b").mkdir()
    src, spec, launch = written(tmp_path / "b", odd, text)
    with pytest.raises(Refused, match="is 3969 for the MEP's sizes, not a multiple of 4"):
        VectorLoads().space(src, spec, launch)


FLOAT2_YAML = "\n".join([
    "version: 1", 'kernel: {name: scale2, id: scale2, source: s.cu, source_sha256: "0", start_byte: 0, end_byte: 1}',
    "sizes: {}", "params:",
    "  - {name: a, role: out, ctype: float2 *, dtype: float32, count: 8192, lanes: 2}",
    "  - {name: b, role: in, ctype: const float2 *, dtype: float32, count: 8192, lanes: 2, "
    "init: {kind: uniform, low: 0, high: 1}}",
    "  - {name: n, role: scalar, ctype: size_t, dtype: uint64, value: '4096'}",
    "  - {name: f, role: scalar, ctype: float, dtype: float32, value: '0.5'}",
    "constants: []", "launch: {grid: ['16'], block: ['256'], shared_mem: '0'}",
    "build: {arch: sm_90, std: c++17, nvcc_flags: [-O3]}", "verify: {input_sets: 1, seed: 1}",
    "timing: {warmup: 5, reps: 50, flush_l2: true}", "todo: []", ""])
FLOAT2 = ("__global__ void scale2(float2 *a, const float2 *b, size_t n, float f) {\n"
          "    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {\n"
          "        a[i] = make_float2(f * b[i].x, f * b[i].y);\n    }\n}\n")


def test_vector_loads_store_whole_struct_elements_and_read_first_where_a_member_is_written(tmp_path):
    """float2 elements (complex numbers, as FFT codes keep them): `a[i] = make_float2(...)` is the struct's copy
    assignment, a call of `operator=` to libclang; it is read as a store of the whole element (every lane writes it:
    no load first), and make_float2 as a value. A store to one member (`a[i].x = ...`) leaves the other: the
    element is loaded first, then stored whole."""
    from library_fixtures import written
    src, spec, launch = written(tmp_path, FLOAT2_YAML, FLOAT2)
    rw = VectorLoads().apply(src, spec, launch, {})
    assert "struct __align__(16) mepgen_vec0 { float2 c[4]; };" in rw.text
    assert "            mepgen_vec0 mepgen_a;\n" in rw.text and "reinterpret_cast<mepgen_vec0*>(a)[mepgen_q] = mepgen_a;" in rw.text
    assert "mepgen_a.c[mepgen_l] = make_float2(f * mepgen_b.c[mepgen_l].x, f * mepgen_b.c[mepgen_l].y);" in rw.text
    (tmp_path / "m").mkdir()
    member = FLOAT2.replace("a[i] = make_float2(f * b[i].x, f * b[i].y);", "a[i].x = f * b[i].x;")
    src, spec, launch = written(tmp_path / "m", FLOAT2_YAML, member)
    rw = VectorLoads().apply(src, spec, launch, {})
    assert "mepgen_vec0 mepgen_a = reinterpret_cast<const mepgen_vec0*>(a)[mepgen_q];" in rw.text
    assert "reinterpret_cast<mepgen_vec0*>(a)[mepgen_q] = mepgen_a;" in rw.text


@pytest.mark.nvcc
def test_vector_loads_of_struct_elements_compile(tmp_path):
    from library_fixtures import written
    src, spec, launch = written(tmp_path, FLOAT2_YAML, FLOAT2)
    f = tmp_path / "cand.cu"
    f.write_text(VectorLoads().apply(src, spec, launch, {}).text)
    done = subprocess.run([shutil.which("nvcc"), "-arch=sm_90", "-O3", "-c", str(f), "-o", str(tmp_path / "c.o")],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_vector_loads_refuses(meps):
    t = VectorLoads()
    text = original(meps, "cg.axpy")
    offset = text.replace("y[i] = a * x[i] + y[i];", "y[i] = a * x[i] + y[i];\n        (void)(x + 1);")
    assert "pointer x is used other than as x[i]" in refusal(meps, "cg.axpy", t, offset)
    shifted = text.replace("a * x[i]", "a * x[i + 1]")
    assert "`x[i + 1]` is not the loop's own element x[i]" in refusal(meps, "cg.axpy", t, shifted)
    assert "calls atomicAdd" in refusal(meps, "analysis.histogram", t)

    def odd(spec):
        spec.sizes["N"] = 4194303
    assert "4194303 for the MEP's sizes, not a multiple of 4" in refusal(meps, "cg.axpy", t, edit_spec=odd)
    assert "not exactly one loop" in refusal(meps, "heat.apply_boundary", t)


# --- nvcc --------------------------------------------------------------------------------------------

CASES = [("analysis.column_mean", SplitColumns, {"shape": "16x16"}),
         ("analysis.column_mean", SplitColumns, {"shape": "8x128"}),
         ("analysis.column_mean", SplitColumns, {"shape": "32x8", "chunks": 32}),
         ("heat.apply_boundary", Coarsen, {"factor": 4, "layout": "strided"}),
         ("heat.apply_boundary", Coarsen, {"factor": 8, "layout": "consecutive"}),
         ("cg.axpy", VectorLoads, {}), ("cg.xpay", VectorLoads, {})]


@pytest.mark.nvcc
@pytest.mark.parametrize("kernel,cls,params", CASES, ids=[f"{k}-{c.__name__}-{i}" for i, (k, c, _) in enumerate(CASES)])
def test_rewritten_mep_compiles(meps, kernel, cls, params, tmp_path):
    text = original(meps, kernel).replace(*ACCUMULATED) if "chunks" in params else None
    src, spec, launch = load(meps[kernel], text)
    rw = cls().apply(src, spec, launch, params)
    f = tmp_path / "kernel.cu"
    f.write_text(rw.text)
    built = NativeBackend(spec, meps[kernel], tmp_path / "build").compile(f, launch=launch_from(spec, rw.launch))
    assert not isinstance(built, CompileFailed), built.message


@pytest.mark.nvcc
def test_vector_loads_emit_128_bit_accesses(meps, tmp_path):
    """The aligned struct is moved with ld/st.global.v4.f32 (one 128-bit access per 4 floats)."""
    src, spec, launch = load(meps["cg.xpay"])
    f = tmp_path / "kernel.cu"
    f.write_text(VectorLoads().apply(src, spec, launch, {}).text)
    ptx = tmp_path / "kernel.ptx"
    subprocess.run([shutil.which("nvcc"), "-arch=sm_90", "-O3", "-ptx", *[f"-D{k}={v}" for k, v in spec.sizes.items()],
                    str(f), "-o", str(ptx)], check=True, capture_output=True)
    code = ptx.read_text()
    assert "ld.global.v4.f32" in code and "st.global.v4.f32" in code


def test_launch_config_after_the_new_rewrites(meps):
    """A literal 2D block the kernel spells (split_columns' shared partials) is not retuned; coarsen keeps the
    block macro, so the block size stays tunable with the divided grid."""
    from mepgen.optimize.library.launch_config import LaunchConfig
    src, spec, launch = load(meps["analysis.column_mean"])
    rw = SplitColumns().apply(src, spec, launch, {"shape": "32x8"})
    src2, spec2, _ = load(meps["analysis.column_mean"], rw.text)
    with pytest.raises(Refused, match="bakes the block size 32 in"):
        LaunchConfig().space(src2, spec2, {**launch, **rw.launch})
    src, spec, launch = load(meps["heat.apply_boundary"])
    rw = Coarsen().apply(src, spec, launch, {"factor": 4, "layout": "strided"})
    src2, spec2, _ = load(meps["heat.apply_boundary"], rw.text)
    lc = LaunchConfig().apply(src2, spec2, rw.launch, {"block": 128})
    assert lc.launch["grid"] == ["((((2 * NX + 2 * (NY - 2)) + 128 - 1) / 128) + 4 - 1) / 4"]


@pytest.mark.nvcc
def test_split_columns_inside_a_column_guard_compiles(meps, tmp_path):
    from mepgen.optimize.library.scalar_replace import ScalarReplace
    from mepgen.optimize.library.source import KernelSource
    src, spec, launch = load(meps["matvec_cols"])
    src = KernelSource(ScalarReplace().apply(src, spec, launch, {}).text, spec)
    rw = SplitColumns().apply(src, spec, launch, {"shape": "32x8"})
    f = tmp_path / "kernel.cu"
    f.write_text(rw.text)
    built = NativeBackend(spec, meps["matvec_cols"], tmp_path / "build").compile(f, launch=launch_from(spec, rw.launch))
    assert not isinstance(built, CompileFailed), built.message
