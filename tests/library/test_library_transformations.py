"""Every transformation of the library on kernels where it applies (rewritten text and explanation
asserted; nvcc compiles the rewritten MEP) and where it must refuse (the reason asserted)."""
from __future__ import annotations

import pytest

from library_fixtures import load
from mepgen.evaluate.launchcfg import launch_from
from mepgen.evaluate.native import NativeBackend
from mepgen.evaluate.results import CompileFailed
from mepgen.optimize.library.launch_bounds import LaunchBounds
from mepgen.optimize.library.launch_config import LaunchConfig
from mepgen.optimize.library.tile_window import TileWindow
from mepgen.optimize.library.privatize import Privatize
from mepgen.optimize.library.restrict import Restrict
from mepgen.optimize.library.scalar_replace import ScalarReplace
from mepgen.optimize.library.source import Refused
from mepgen.optimize.library.unroll import Unroll
from mepgen.optimize.library.warp_row import WarpPerRow


@pytest.fixture(scope="module")
def meps(library_meps):
    return library_meps


def rewrite(meps, kernel, t, params=None):
    src, spec, launch = load(meps[kernel])
    space = t.space(src, spec, launch)
    return t.apply(src, spec, launch, params or {k: v[0] for k, v in space.items()})


def refusal(meps, kernel, t) -> str:
    src, spec, launch = load(meps[kernel])
    with pytest.raises(Refused) as e:
        t.space(src, spec, launch)
    return str(e.value)


def test_warp_per_row_global_accumulator(meps):
    rw = rewrite(meps, "analysis.dense_matvec", WarpPerRow(), {"tpr": 32, "block": 256})
    assert "for (int j = (0) + mepgen_lane; j < ncols; j += 32)" in rw.text
    assert "__shfl_down_sync(0xffffffffu, mepgen_part, mepgen_off, 32)" in rw.text
    assert "y[row] = mepgen_part;" in rw.text
    assert "void dense_matvec(const float* A, const float* x, float* y, int nrows, int ncols)" in rw.text
    assert rw.launch == {"grid": ["((long long)(MAT_N) * 32 + 256 - 1) / 256"], "block": ["256"], "shared_mem": "0"}
    assert "warp per row" in rw.explanation and "y[row]" in rw.explanation


def test_warp_per_row_local_accumulator_and_csr(meps):
    rw = rewrite(meps, "matvec_rows", WarpPerRow(), {"tpr": 16, "block": 128})
    assert "float s = mepgen_part;" in rw.text and "y[row] = s;" in rw.text
    csr = rewrite(meps, "cg.spmv_csr", WarpPerRow(), {"tpr": 8, "block": 256})
    assert "for (int k = (row_ptr[row]) + mepgen_lane; k < row_ptr[row+1]; k += 8)" in csr.text


def test_warp_per_row_vector_loads(meps):
    src, spec, launch = load(meps["analysis.dense_matvec"])
    assert WarpPerRow().space(src, spec, launch)["vec"] == [1, 4]
    rw = WarpPerRow().apply(src, spec, launch, {"tpr": 32, "block": 256, "vec": 4})
    assert "struct __align__(16) mepgen_vec0 { float c[4]; };" in rw.text
    assert "*reinterpret_cast<const mepgen_vec0*>(&A[row * ncols + mepgen_j4]);" in rw.text
    assert "*reinterpret_cast<const mepgen_vec0*>(&x[mepgen_j4]);" in rw.text
    assert "mepgen_part += mepgen_v0.c[mepgen_k] * mepgen_v1.c[mepgen_k];" in rw.text
    # run-time guard (pointer alignment, row pitch a multiple of 4) with the scalar loop as the fallback
    assert ("if (reinterpret_cast<unsigned long long>(A) % 16 == 0 && reinterpret_cast<unsigned long long>(x) % 16 "
            "== 0 && ((long long)(1) * ncols) % 4 == 0) {") in rw.text
    assert "} else {\n            for (int j = (0) + mepgen_lane; j < ncols; j += 32) {" in rw.text
    # the tail after the last whole vector, so any row length stays correct
    assert "for (int j = (0) + ((ncols) - (0)) / 4 * 4 + mepgen_lane; j < ncols; j += 32) {" in rw.text
    assert "A, x read 4 elements per 128-bit load" in rw.explanation and "checked at run time" in rw.explanation
    sq = rewrite(meps, "row_sumsq", WarpPerRow(), {"tpr": 32, "block": 256, "vec": 4})
    assert sq.text.count("reinterpret_cast<const mepgen_vec0*>") == 1      # A[r*n+j] twice: one load
    assert "mepgen_part += mepgen_v0.c[mepgen_k] * mepgen_v0.c[mepgen_k];" in sq.text


def test_warp_per_row_several_warps_per_row(meps):
    src, spec, launch = load(meps["row_sumsq"])
    assert WarpPerRow().space(src, spec, launch)["tpr"] == [32, 64, 128, 256, 16, 8, 4]
    rw = WarpPerRow().apply(src, spec, launch, {"tpr": 128, "block": 256})
    assert "mepgen_part += __shfl_down_sync(0xffffffffu, mepgen_part, mepgen_off, 32);" in rw.text
    assert "__shared__ float mepgen_warps[256 / 32];" in rw.text
    assert "if (threadIdx.x % 32 == 0) mepgen_warps[threadIdx.x / 32] = mepgen_part;" in rw.text
    assert "__syncthreads();" in rw.text and "for (int mepgen_w = 0; mepgen_w < 4; ++mepgen_w)" in rw.text
    assert "the 4 warps of a row added through shared memory" in rw.explanation
    assert rw.launch["grid"] == ["((long long)(N) * 128 + 256 - 1) / 256"]
    with pytest.raises(Refused, match="do not tile a block of 64 threads"):
        WarpPerRow().apply(src, spec, launch, {"tpr": 128, "block": 64})
    # the block is baked in: launch_config must not change it under the kernel
    from mepgen.optimize.library.source import KernelSource
    with pytest.raises(Refused, match="bakes the block size 256 in"):
        LaunchConfig().space(KernelSource(rw.text, spec), spec, rw.launch)


def test_warp_per_row_vector_loads_refused(meps):
    src, spec, launch = load(meps["cg.spmv_csr"])        # the row starts at row_ptr[row]: alignment unknown
    assert WarpPerRow().space(src, spec, launch)["vec"] == [1]
    with pytest.raises(Refused, match="row loop's start is not affine"):
        WarpPerRow().apply(src, spec, launch, {"tpr": 8, "block": 256, "vec": 4})
    src, spec, launch = load(meps["matvec_rows"])
    spec.sizes["N"] = 4098                                  # rows of 4098 floats do not start 16-byte aligned
    with pytest.raises(Refused, match="not a multiple of 4 for the MEP's sizes"):
        WarpPerRow().apply(src, spec, launch, {"tpr": 32, "block": 256, "vec": 4})
    assert WarpPerRow().space(src, spec, launch)["vec"] == [1]


def test_warp_per_row_refuses(meps):
    assert "already read neighbouring elements (coalesced)" in refusal(meps, "matvec_cols", WarpPerRow())
    # `tid = threadIdx.x; col = blockIdx.x * blockDim.x + tid` is the index (thread_index.py); the column loop is not
    assert "the kernel is not `col = global index; if (col < bound) {...}`" in refusal(meps, "analysis.column_mean",
                                                                                WarpPerRow())


def test_scalar_replace(meps):
    rw = rewrite(meps, "matvec_cols", ScalarReplace())
    assert "float mepgen_acc0 = (0.0f);" in rw.text and "y[col] = mepgen_acc0;" in rw.text
    assert "y[col] += " not in rw.text and "y[col] = 0.0f;" not in rw.text
    assert "y[col]" in rw.explanation and "register" in rw.explanation
    assert "no loop accumulates into global memory" in refusal(meps, "matvec_rows", ScalarReplace())


def test_privatize(meps):
    rw = rewrite(meps, "analysis.histogram", Privatize())
    assert "__shared__ unsigned int mepgen_hist[(NBINS)];" in rw.text
    assert "atomicAdd(&bins[mepgen_b], mepgen_hist[mepgen_b])" in rw.text
    assert "bins" in rw.explanation and "shared" in rw.explanation
    assert "not a single atomicAdd" in refusal(meps, "cg.axpy", Privatize())


def test_launch_config(meps):
    rw = rewrite(meps, "cg.dot", LaunchConfig(), {"block": 512})
    assert rw.launch == {"grid": ["std::max(1, std::min((N + 512 - 1) / 512, 1024))"], "block": ["512"],
                         "shared_mem": "512 * sizeof(float)"}
    assert rw.text == load(meps["cg.dot"])[0].text and "512 threads per block" in rw.explanation
    assert "bakes the block size BLOCK_SIZE in" in refusal(meps, "analysis.column_mean", LaunchConfig())
    two = rewrite(meps, "heat.diffuse_step", LaunchConfig(), {"block": "64x4"})
    assert two.launch["block"] == ["64", "4"] and "(NX + 64 - 1) / 64" in two.launch["grid"][0]
    with pytest.raises(Refused, match="already 256 threads"):     # BLOCK_SIZE is 256: the same launch
        rewrite(meps, "cg.dot", LaunchConfig(), {"block": 256})


def test_restrict(meps):
    rw = rewrite(meps, "analysis.dense_matvec", Restrict())
    assert "const float* __restrict__ A" in rw.text and "__ldg(&A[row * ncols + j])" in rw.text
    assert "__restrict__ on A, x, y" in rw.explanation
    src, spec, launch = load(meps["analysis.dense_matvec"], rw.text)
    with pytest.raises(Refused, match="already __restrict__"):
        Restrict().space(src, spec, launch)


def test_unroll_and_launch_bounds(meps):
    rw = rewrite(meps, "conv1d", Unroll(), {"factor": 8})
    assert "#pragma unroll 8\nfor (int k = 0; k < KW; ++k)" in rw.text and "unroll 8" in rw.explanation
    assert "no innermost for loop" in refusal(meps, "heat.apply_boundary", Unroll())
    lb = rewrite(meps, "cg.axpy", LaunchBounds(), {"min_blocks": 4})
    assert "__global__ __launch_bounds__(256, 4) void axpy" in lb.text and "256" in lb.explanation
    assert "already has __launch_bounds__" in refusal(meps, "analysis.column_mean", LaunchBounds())


CASES = [("analysis.dense_matvec", WarpPerRow, {"tpr": 32, "block": 256}),
         ("analysis.dense_matvec", WarpPerRow, {"tpr": 16, "block": 128, "vec": 4}),
         ("row_sumsq", WarpPerRow, {"tpr": 32, "block": 256, "vec": 4}),
         ("analysis.dense_matvec", WarpPerRow, {"tpr": 128, "block": 512, "vec": 4}), ("cg.spmv_csr", WarpPerRow, {"tpr": 4, "block": 128}),
         ("matvec_rows", WarpPerRow, {"tpr": 32, "block": 512}), ("matvec_cols", ScalarReplace, {}),
         ("analysis.histogram", Privatize, {}), ("label_counts", Privatize, {}),
         ("cg.axpy", Restrict, {"ldg": True}), ("conv1d", Unroll, {"factor": 4}), ("cg.xpay", LaunchBounds, {"min_blocks": 2}),
         ("heat.diffuse_step", LaunchConfig, {"block": "64x4"}),
         ("conv1d", TileWindow, {"block": 128, "per_thread": 8, "reuse": "registers"})]


@pytest.mark.nvcc
@pytest.mark.parametrize("kernel,cls,params", CASES, ids=[f"{k}-{c.__name__}" for k, c, _ in CASES])
def test_rewritten_mep_compiles(meps, kernel, cls, params, tmp_path):
    src, spec, launch = load(meps[kernel])
    rw = cls().apply(src, spec, launch, params)
    f = tmp_path / "kernel.cu"
    f.write_text(rw.text)
    built = NativeBackend(spec, meps[kernel], tmp_path / "build").compile(f, launch=launch_from(spec, rw.launch))
    assert not isinstance(built, CompileFailed), built.message
