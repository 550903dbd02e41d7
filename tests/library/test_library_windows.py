"""tile_window (shared, registers and vector reuse) on the 1-D windows where it applies (rewritten text,
explanation, launch and PTX asserted) and where it must refuse; nvcc compiles its rewrites in
test_library_tiling.py's CASES."""
from __future__ import annotations

import re

import pytest

from library_fixtures import load, ptx_of, refusal, rewrite
from mepgen.optimize.library.source import KernelSource, Refused
from mepgen.optimize.library.tile_window import TileWindow


@pytest.fixture(scope="module")
def meps(tiling_meps):
    return tiling_meps


# --- tile_window --------------------------------------------------------------------------------------

def test_tile_window_conv1d_taps(meps):
    rw = rewrite(meps, "conv1d_taps", TileWindow(), {"block": 128, "per_thread": 8})
    assert "__shared__ float mepgen_win[1024 + ((FILT_W) - 1)];" in rw.text
    # staged only where the original could read: below the output bound plus the window's span
    assert "if (mepgen_base + mepgen_e < (long long)(n - FILT_W + 1) + ((FILT_W) - 1)) {" in rw.text
    assert "mepgen_win[mepgen_e] = x[mepgen_base + mepgen_e];" in rw.text
    assert "__syncthreads();" in rw.text
    assert "const int i = (int)(mepgen_base + mepgen_r * 128 + threadIdx.x);" in rw.text
    assert "s += c_taps[t] * mepgen_win[(i + t) - mepgen_base];" in rw.text and "x[i + t]" not in rw.text
    assert rw.launch == {"grid": ["((SIG_N - FILT_W + 1) + 1024 - 1) / 1024"], "block": ["128"], "shared_mem": "0"}
    assert rw.explanation.startswith("tile_window: every read of x[i + offset]") and "span 14" in rw.explanation
    src, spec, launch = load(meps["conv1d_taps"])
    space = TileWindow().space(src, spec, launch)
    assert space == {"block": [256, 128, 512], "per_thread": [4, 2, 8, 1],
                     "reuse": ["vector", "registers", "shared"]}


def test_tile_window_registers_conv1d_taps(meps):
    rw = rewrite(meps, "conv1d_taps", TileWindow(), {"block": 256, "per_thread": 8, "reuse": "registers"})
    t = rw.text
    assert "__global__ void conv1d_taps(const float* __restrict__ x, float* __restrict__ y, int n)" in t
    assert "__shared__ __align__(16) float mepgen_win[(2048 + ((FILT_W) - 1) + 3) / 4 * 4];" in t
    # the thread's 8 + 14 elements, rounded up to whole 128-bit reads, copied once from the tile
    assert "float mepgen_reg[(8 + ((FILT_W) - 1) + 3) / 4 * 4];" in t
    assert "reinterpret_cast<const float4*>(mepgen_win)[threadIdx.x * 2 + mepgen_q]" in t
    # every tap reads a register at a constant index once the loops are unrolled
    assert "s += c_taps[t] * mepgen_reg[mepgen_r + ((i + t) - (i))];" in t and "x[i + t]" not in t
    assert t.count("#pragma unroll\n") >= 5
    # a fast path where all 8 outputs are inside the guard, the original guard per output elsewhere
    assert "if (mepgen_i0 + 7 < (long long)(n - FILT_W + 1)) {" in t and "if (i < n - FILT_W + 1) {" in t
    # y[i] through a shared tile, written back by consecutive threads only below the bound
    assert "mepgen_o[mepgen_r] = s;" in t and "y[i] = s;" not in t
    assert "if (mepgen_base + mepgen_e < (long long)(n - FILT_W + 1)) {" in t
    assert "y[mepgen_base + mepgen_e] = mepgen_otile[mepgen_e];" in t
    assert rw.launch == {"grid": ["((SIG_N - FILT_W + 1) + 2048 - 1) / 2048"], "block": ["256"], "shared_mem": "0"}
    assert "8 consecutive outputs" in rw.explanation and "y[i] written back through shared memory" in rw.explanation
    # registers need whole 128-bit reads: 4 or 8 outputs per thread
    src, spec, launch = load(meps["conv1d_taps"])
    with pytest.raises(Refused, match="2 outputs per thread with registers reuse is not legal"):
        TileWindow().apply(src, spec, launch, {"block": 256, "per_thread": 2, "reuse": "registers"})
    # a recorded chain without `reuse` replays as it was measured (the shared window)
    assert "mepgen_reg" not in TileWindow().apply(src, spec, launch, {"block": 256, "per_thread": 4}).text


@pytest.mark.nvcc
def test_tile_window_registers_stay_in_registers(meps, tmp_path):
    """The point of reuse=registers, checked in the PTX: conv1d_taps at 8 outputs per thread reads the tile with
    6 128-bit shared loads (8 + 14 elements rounded up to 24), every tap index is constant after unrolling, so no
    local memory; x is read from global memory only by the staging loop."""
    src, spec, launch = load(meps["conv1d_taps"])
    rw = TileWindow().apply(src, spec, launch, {"block": 256, "per_thread": 8, "reuse": "registers"})
    text = ptx_of(meps["conv1d_taps"], spec, rw, tmp_path)
    assert len(re.findall(r"ld\.shared\.v4", text)) == 6
    assert not re.findall(r"(ld|st)\.local", text)
    # global loads only in the staging loop (nvcc unrolls it: a handful of copies), never one per tap (15 per output)
    assert len(re.findall(r"ld\.global", text)) <= 8 and len(re.findall(r"st\.global", text)) <= 8


def test_tile_window_registers_keeps_stores_it_cannot_stage(meps):
    """y written twice: no single `y[i] = ...` to stage, so each output is stored where it is computed."""
    src, spec, launch = load(meps["conv1d_taps"])
    src = KernelSource(src.text.replace("y[i] = s;", "y[i] = s; y[i] += 1.0f;"), spec)
    rw = TileWindow().apply(src, spec, launch, {"block": 128, "per_thread": 4, "reuse": "registers"})
    assert "y[i] = s; y[i] += 1.0f;" in rw.text and "mepgen_otile" not in rw.text
    assert "written back" not in rw.explanation


def test_tile_window_vector_conv1d_taps(meps):
    rw = rewrite(meps, "conv1d_taps", TileWindow(), {"block": 128, "per_thread": 4, "reuse": "vector"})
    t = rw.text
    assert "__shared__" not in t and "__syncthreads" not in t
    assert "const long long mepgen_i0 = ((long long)blockIdx.x * 128 + threadIdx.x) * 4;" in t
    # the fast path: all 4 outputs inside the guard, the rounded-up 20 elements inside what the original reads
    # (the bound plus the span), both addresses 16-byte aligned (checked at run time, never assumed)
    assert ("if (mepgen_i0 + 3 < (long long)(n - FILT_W + 1) && mepgen_i0 + ((4 + ((FILT_W) - 1) + 3) / 4 * 4) "
            "<= (long long)(n - FILT_W + 1) + ((FILT_W) - 1) && (reinterpret_cast<unsigned long long>(x + mepgen_i0) "
            "& 15) == 0 && (reinterpret_cast<unsigned long long>(y + mepgen_i0) & 15) == 0) {") in t
    assert "const float4 mepgen_v = reinterpret_cast<const float4*>(x + mepgen_i0)[mepgen_q];" in t
    assert "s += c_taps[t] * mepgen_reg[mepgen_r + ((i + t) - (i))];" in t
    assert "reinterpret_cast<float4*>(y + mepgen_i0)[mepgen_q] = make_float4(" in t
    # elsewhere the original, per output, reading x directly
    assert "s += c_taps[t] * x[i + t];" in t and "y[i] = s;" in t
    assert rw.launch == {"grid": ["((SIG_N - FILT_W + 1) + 512 - 1) / 512"], "block": ["128"], "shared_mem": "0"}
    assert "4 consecutive outputs" in rw.explanation and "128-bit reads from global memory" in rw.explanation
    assert "y[i] stored 16 bytes at a time" in rw.explanation
    src, spec, launch = load(meps["conv1d_taps"])
    with pytest.raises(Refused, match="2 outputs per thread with vector reuse is not legal"):
        TileWindow().apply(src, spec, launch, {"block": 128, "per_thread": 2, "reuse": "vector"})
    assert TileWindow().defaults == {"block": 128, "per_thread": 4, "reuse": "vector"}


def test_tile_window_vector_keeps_stores_it_cannot_vectorize(meps):
    src, spec, launch = load(meps["conv1d_taps"])
    src = KernelSource(src.text.replace("y[i] = s;", "y[i] = s; y[i] += 1.0f;"), spec)
    rw = TileWindow().apply(src, spec, launch, {"block": 256, "per_thread": 8, "reuse": "vector"})
    assert "y[i] = s; y[i] += 1.0f;" in rw.text and "mepgen_o" not in rw.text and "y + mepgen_i0" not in rw.text
    assert "stored 16 bytes" not in rw.explanation


@pytest.mark.nvcc
def test_tile_window_vector_loads_128_bits(meps, tmp_path):
    """reuse=vector in the PTX: the fast path reads x with 5 128-bit loads (4 + 14 elements rounded up to 20) and
    stores y with one; no shared memory, no barrier, no local memory."""
    src, spec, launch = load(meps["conv1d_taps"])
    rw = TileWindow().apply(src, spec, launch, {"block": 128, "per_thread": 4, "reuse": "vector"})
    text = ptx_of(meps["conv1d_taps"], spec, rw, tmp_path)
    assert len(re.findall(r"ld\.global\.nc\.v4\.f32", text)) == 5
    assert len(re.findall(r"st\.global\.v4\.f32", text)) == 1
    assert not re.findall(r"(ld|st)\.(local|shared)|bar\.sync", text)


def test_tile_window_refuses(meps):
    t = TileWindow()
    assert "the term i*nrhs is not a counter of a loop with constant bounds" in refusal(meps, "lower_solve", t)
    assert "not `i = global index; if (i < bound) {...}`" in refusal(meps, "smooth9", t)
    # a window reaching backwards, a tap loop with a run-time bound, the array written, the block baked in
    assert "reads before i (offset -1)" in refusal(meps, "conv1d_taps", t, ("x[i + t]", "x[i + t - 1]"))
    assert "not a counter of a loop with constant bounds" in refusal(
        meps, "conv1d_taps", t, ("t < FILT_W", "t < n % 7"))
    assert "used other than as x[i + offset]" in refusal(
        meps, "conv1d_taps", t, ("y[i] = s;", "y[i] = s + *x;"))
    assert "uses shared memory or barriers" in refusal(
        meps, "conv1d_taps", t, ("y[i] = s;", "__syncthreads(); y[i] = s;"))
