"""privatize_histogram's 128-bit input loads and grid_stride (the grid of a grid-stride kernel sized for the work)
on the examples' histograms: the rewritten text, the launch, the refusals and the PTX; pure device helpers."""
from __future__ import annotations

import re

import pytest

from library_fixtures import load, ptx_of, refusal, rewrite
from mepgen.evaluate.launchcfg import launch_from
from mepgen.evaluate.native import NativeBackend
from mepgen.evaluate.results import CompileFailed
from mepgen.optimize.library.analysis import check_pure
from mepgen.optimize.library.base import apply_chain
from mepgen.optimize.library.catalog import all_transformations
from mepgen.optimize.library.grid_stride import GridStride
from mepgen.optimize.library.launch_config import LaunchConfig
from mepgen.optimize.library.privatize import Privatize
from mepgen.optimize.library.source import KernelSource, Refused


@pytest.fixture(scope="module")
def meps(library_meps):
    return library_meps


def chain(meps, kernel, steps):
    src, spec, _ = load(meps[kernel])
    catalog = {t.name: t for t in all_transformations()}
    return apply_chain(catalog, src.text, spec, [{"name": n, "params": p} for n, p in steps])


# --- privatize_histogram vec ---------------------------------------------------------------------------

def test_privatize_reads_the_input_128_bits_at_a_time(meps):
    src, spec, launch = load(meps["label_counts"])
    assert Privatize().space(src, spec, launch) == {"vec": [4, 1]}
    rw = rewrite(meps, "label_counts", Privatize(), {"vec": 4})
    text = rw.text
    assert "__shared__ unsigned int mepgen_hist[(32)];" in text
    assert "if ((reinterpret_cast<unsigned long long>(labels) & 15) == 0) {" in text    # tested, not assumed
    assert "struct __align__(16) mepgen_vec0 { int c[4]; };" in text
    assert "const mepgen_vec0 mepgen_labels = reinterpret_cast<const mepgen_vec0*>(labels)[mepgen_q];" in text
    assert "atomicAdd(&mepgen_hist[mepgen_labels.c[mepgen_l] & 31], 1u);" in text
    # the scalar tail for n % 4, and the original loop where labels is not aligned: both count into the copy
    assert "for (int i = mepgen_n4 * 4 + (blockIdx.x * blockDim.x + threadIdx.x); i < n;" in text
    assert text.count("atomicAdd(&mepgen_hist[labels[i] & 31], 1u);") == 2
    assert "atomicAdd(&counts[" not in text.split("__syncthreads();")[1]         # no global atomic per element
    assert "atomicAdd(&counts[mepgen_b], mepgen_hist[mepgen_b])" in text
    assert "labels read 128 bits at a time where 16-byte aligned (run-time test)" in rw.explanation
    assert rw.launch is None


def test_privatize_vec_through_a_pure_helper(meps):
    """heatcg's histogram computes the bin with bin_index (and clamp_val<int> inside it): both are proven pure."""
    rw = rewrite(meps, "analysis.histogram", Privatize(), {"vec": 4})
    assert "atomicAdd(&mepgen_hist[bin_index(mepgen_data.c[mepgen_l], c_hist_range[0], c_hist_range[1], NBINS)], 1u);" \
        in rw.text
    assert "mepgen_vec0" not in Privatize().apply(*load(meps["analysis.histogram"]), {"vec": 1}).text  # vec 1: as before


def test_privatize_vec_refusals_leave_vec1(meps):
    t = Privatize()
    src, spec, launch = load(meps["analysis.histogram"])
    halved = KernelSource(src.text.replace("bin_index(data[i],", "bin_index(data[i / 2],"), spec)
    assert t.space(halved, spec, launch) == {"vec": [1]}
    with pytest.raises(Refused, match=r"`data\[i / 2\]` is not the loop's own element data\[i\]"):
        t.apply(halved, spec, launch, {"vec": 4})
    with pytest.raises(Refused, match="vec 2: 1 or 4"):
        t.apply(src, spec, launch, {"vec": 2})
    # a helper that writes through a pointer is not pure: the rewrite would reorder its side effects
    bumping = src.text.replace("__global__ void histogram(",
                               "__device__ int bump(int* c, int v) { *c += 1; return v; }\n__global__ void histogram(")
    bumping = bumping.replace("atomicAdd(&bins[bin_index(", "atomicAdd(&bins[bump(nullptr, 0) + bin_index(")
    impure = KernelSource(bumping, spec)
    assert t.space(impure, spec, launch) == {"vec": [1]}


def test_pure_function(meps):
    src, spec, _ = load(meps["analysis.histogram"])
    call = next(c for c in src.nodes("CALL_EXPR") if c.spelling == "bin_index")
    check_pure(src, call, "the bin")                 # no Refused: bin_index and clamp_val<int> are pure
    text = src.text.replace("__global__ void histogram(",
                            "__device__ float peek(float* p) { p[0] = 1.0f; return p[1]; }\n"
                            "__device__ float twice(float v) { float w = v; w *= 2.0f; return w; }\n"
                            "__global__ void histogram(")
    text = text.replace("bin_index(data[i],", "bin_index(twice(data[i]) + peek(nullptr),")
    edited = KernelSource(text, spec)
    calls = {c.spelling: c for c in edited.nodes("CALL_EXPR")}
    check_pure(edited, calls["twice"], "twice")      # assigns its own local only
    with pytest.raises(Refused, match="calls `peek`, which may have side effects"):
        check_pure(edited, calls["peek"], "peek")


@pytest.mark.nvcc
def test_privatize_vec4_ptx(meps, tmp_path):
    """label_counts' labels are read with ld.global.v4 and counted with shared atomics only."""
    src, spec, launch = load(meps["label_counts"])
    rw = Privatize().apply(src, spec, launch, {"vec": 4})
    ptx = ptx_of(meps["label_counts"], spec, rw, tmp_path)
    assert re.search(r"ld\.global(\.nc)?\.v4\.[us]32", ptx)
    assert re.search(r"atom\.shared\.add\.u32", ptx)
    assert not re.findall(r"\.local", ptx)


# --- grid_stride -------------------------------------------------------------------------------------------

def test_grid_stride_sizes_the_grid(meps):
    src, spec, launch = load(meps["analysis.histogram"])
    assert GridStride().space(src, spec, launch) == {"per_thread": [32, 64, 16, 128, 8]}
    rw = GridStride().apply(src, spec, launch, {"per_thread": 32})
    assert rw.text == src.text
    assert rw.launch == {"grid": ["((NX * NY) + (BLOCK_SIZE) * 32 - 1) / ((BLOCK_SIZE) * 32)"],
                         "block": ["BLOCK_SIZE"], "shared_mem": "0"}
    assert "32 elements per thread: 512 blocks of 256 (was 4096)" in rw.explanation
    # label_counts' literal grid of 1024 is already 64 per thread: that point is not offered, and refused
    src, spec, launch = load(meps["label_counts"])
    assert 64 not in GridStride().space(src, spec, launch)["per_thread"]
    with pytest.raises(Refused, match="already 1024 blocks"):
        GridStride().apply(src, spec, launch, {"per_thread": 64})


def test_grid_stride_after_privatize_vec_and_before_launch_config(meps):
    """The vector loop and its tail (offset + global index) are both grid-stride loops; launch_config then
    retunes the block inside the new grid expression."""
    text, launch, _ = chain(meps, "analysis.histogram", [("privatize_histogram", {"vec": 4}),
                                                          ("grid_stride", {"per_thread": 32}),
                                                          ("launch_config", {"block": 512})])
    assert launch == {"grid": ["((NX * NY) + (512) * 32 - 1) / ((512) * 32)"], "block": ["512"], "shared_mem": "0"}
    assert "mepgen_vec0" in text


def test_grid_stride_refuses(meps):
    t = GridStride()
    assert "not at the global index" in refusal(meps, "cg.dot", t)          # per-block partial sums
    assert "the launch is not 1D" in refusal(meps, "heat.diffuse_step", t)
    assert "no grid-stride loop" in refusal(meps, "conv1d", t)
    edit = ("atomicAdd(&bins[bin_index(", "atomicAdd(&bins[(blockIdx.x % 2) + bin_index(")
    assert "blockIdx.x is used outside a grid-stride loop" in refusal(meps, "analysis.histogram", t, edit)


CASES = [("analysis.histogram", [("privatize_histogram", {"vec": 4}), ("grid_stride", {"per_thread": 32})]),
         ("label_counts", [("privatize_histogram", {"vec": 4}), ("grid_stride", {"per_thread": 128})]),
         ("cg.axpy", [("vector_loads", {}), ("grid_stride", {"per_thread": 8})])]


@pytest.mark.nvcc
@pytest.mark.parametrize("kernel,steps", CASES, ids=[k for k, _ in CASES])
def test_rewritten_mep_compiles(meps, kernel, steps, tmp_path):
    text, launch, _ = chain(meps, kernel, steps)
    _, spec, _ = load(meps[kernel])
    f = tmp_path / "kernel.cu"
    f.write_text(text)
    built = NativeBackend(spec, meps[kernel], tmp_path / "build").compile(f, launch=launch_from(spec, launch))
    assert not isinstance(built, CompileFailed), built.message
    assert LaunchConfig().space(KernelSource(text, spec), spec, launch)["block"]
