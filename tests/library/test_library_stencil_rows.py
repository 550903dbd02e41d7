"""stencil_rows on the stencils where it applies (rewritten text, explanation, launch and PTX asserted) and where
it must refuse; nvcc compiles its rewrites in test_library_tiling.py's CASES."""
from __future__ import annotations

import re

import pytest

from library_fixtures import load, ptx_of, refusal, rewrite
from mepgen.optimize.library.source import KernelSource, Refused
from mepgen.optimize.library.stencil_rows import StencilRows


@pytest.fixture(scope="module")
def meps(tiling_meps):
    return tiling_meps


# --- stencil_rows -----------------------------------------------------------------------------------

def test_stencil_rows_9_point(meps):
    rw = rewrite(meps, "smooth9", StencilRows(), {"rows": 4})
    assert "void smooth9(const float* __restrict__ in, float* __restrict__ out, int nx, int ny, float w)" in rw.text
    assert "const int mepgen_y0 = (blockIdx.y * blockDim.y + threadIdx.y) * 4;" in rw.text
    # the fast path: the guard at both ends of the strip, then the unguarded body per point
    assert "if ((i >= 1 && i < nx - 1 && (mepgen_y0) >= 1 && (mepgen_y0) < ny - 1) && " \
           "(i >= 1 && i < nx - 1 && (mepgen_y0 + 3) >= 1 && (mepgen_y0 + 3) < ny - 1)) {" in rw.text
    # interior strips: 18 registers, then the 4 points as copies reading them; border strips: the unrolled loop
    assert "const float mepgen_s_m1_m1 = in[(i - 1) + (mepgen_y0 - 1) * (nx)];" in rw.text
    assert rw.text.count("const float mepgen_s_") == 18 and "const int j = mepgen_y0 + 3;" in rw.text
    assert "const float c = mepgen_s_3_0;" in rw.text and "const float edges = mepgen_s_3_m1 + mepgen_s_3_1" in rw.text
    assert rw.text.count("const int j = mepgen_y0 + mepgen_r;") == 1 and rw.text.count("#pragma unroll") == 1
    assert "if (i >= 1 && i < nx - 1 && j >= 1 && j < ny - 1) {" in rw.text          # the border strips, per point
    assert rw.launch == {"grid": ["(IMG_NX + ST_BX - 1) / ST_BX", "(((IMG_NY + ST_BY - 1) / ST_BY) + 3) / 4"],
                         "block": ["ST_BX", "ST_BY"], "shared_mem": "0"}
    assert "4 points per thread along y" in rw.explanation and "__restrict__ on in, out" in rw.explanation
    assert "18 loads for 4 points, 9 reads per point in the source" in rw.explanation


def test_stencil_rows_3d_and_helper_reads(meps):
    vol = rewrite(meps, "diffuse7", StencilRows(), {"rows": 2})
    assert "const int mepgen_z0 = (blockIdx.z * blockDim.z + threadIdx.z) * 2;" in vol.text
    assert "const int k = mepgen_z0 + mepgen_r;" in vol.text and "(mepgen_z0 + 1) < vol.nz - 1" in vol.text
    # the strip's loads, explicit: planes z0-1 .. z0+2, the 5-point cross on the two planes the points sit on
    assert "const float mepgen_s_m1_0_0 = u[(i) + (j) * (vol.nx) + (mepgen_z0 - 1) * (vol.nx * vol.ny)];" in vol.text
    assert "const float mepgen_s_1_m1_0 = u[(i - 1) + (j) * (vol.nx) + (mepgen_z0 + 1) * (vol.nx * vol.ny)];" in vol.text
    assert vol.text.count("const float mepgen_s_") == 12 and "12 loads for 2 points" in vol.explanation
    assert "const int k = mepgen_z0 + 1;" in vol.text and "(faces - 6.0f * mepgen_s_1_0_0)" in vol.text
    assert vol.launch["grid"][2] == "(((VOL_NZ + VOL_BZ - 1) / VOL_BZ) + 1) / 2" and vol.launch["grid"][:2] == \
        ["(VOL_NX + VOL_BX - 1) / VOL_BX", "(VOL_NY + VOL_BY - 1) / VOL_BY"]
    heat = rewrite(meps, "heat.diffuse_step", StencilRows(), {"rows": 8})
    assert "lap5(u, i, j, g.nx, inv_dx2, inv_dy2)" in heat.text          # the helper's call is kept per point
    assert "__restrict__ on" not in heat.explanation                   # already restricted in the source


def test_stencil_rows_vec4_9_point(meps):
    """4 rows x 4 consecutive x per thread: each row's x0..x0+3 one 128-bit load, x0-1 and x0+4 scalars."""
    src, spec, launch = load(meps["smooth9"])
    assert StencilRows().space(src, spec, launch) == {"rows": [2, 4, 8], "vec": [4, 1]}
    rw = StencilRows().apply(src, spec, launch, {"rows": 4, "vec": 4})
    t = rw.text
    assert "const int mepgen_x0 = (blockIdx.x * blockDim.x + threadIdx.x) * 4;" in t
    # the fast path: y's bounds at the strip's two ends, one of the 4 columns inside x's bounds, the first row's
    # address aligned and the row pitch whole; x's bounds then per column
    assert "if (((mepgen_y0) >= 1 && (mepgen_y0) < (ny - 1)) && ((mepgen_y0 + 3) >= 1 && (mepgen_y0 + 3) < (ny - 1)) " \
           "&& ((mepgen_x0 + 3) >= 1 && (mepgen_x0) < (nx - 1)) && " in t
    assert "((reinterpret_cast<unsigned long long>(&in[(mepgen_x0) + (mepgen_y0) * (nx)]) & 15) == 0) && " \
           "((nx) % 4 == 0) && " in t
    assert "const bool mepgen_in_x3 = (mepgen_x0 + 3) >= 1 && (mepgen_x0 + 3) < (nx - 1);" in t
    assert "const float4 mepgen_v_m1 = *reinterpret_cast<const float4*>(&in[(mepgen_x0) + (mepgen_y0 - 1) * (nx)]);" in t
    assert t.count("const float4 mepgen_v_") == 6 and "const float mepgen_s_m1_1 = mepgen_v_m1.y;" in t
    # x0-1 is read by column 0 only, x0+4 by column 3 only: loaded only when that column is inside
    assert "const float mepgen_s_2_m1 = (mepgen_in_x0) ? in[(mepgen_x0 - 1) + (mepgen_y0 + 2) * (nx)] : (float)0;" in t
    assert "const float mepgen_s_2_4 = (mepgen_in_x3) ? in[(mepgen_x0 + 4) + (mepgen_y0 + 2) * (nx)] : (float)0;" in t
    # point (row 0, column 1), run only if its column is inside: its centre is lane y of row 0, its left neighbour lane x
    assert "if (mepgen_in_x1) {\n            const int j = mepgen_y0 + 0;\n            const int i = mepgen_x0 + 1;" in t
    assert "const float edges = mepgen_s_0_0 + mepgen_s_0_2" in t
    # strips across y's borders or unaligned: the original guard per point in two unrolled loops
    assert "const int i = mepgen_x0 + mepgen_c;" in t and "if (i >= 1 && i < nx - 1 && j >= 1 && j < ny - 1) {" in t
    assert rw.launch["grid"] == ["(((IMG_NX + ST_BX - 1) / ST_BX) + 3) / 4", "(((IMG_NY + ST_BY - 1) / ST_BY) + 3) / 4"]
    # out[j * nx + i] proven at offset 0 with the reads' stride: a row's 4 values stored 16 bytes at a time, at an
    # address the fast path tests for alignment
    assert "if (mepgen_in_x0 && mepgen_in_x1 && mepgen_in_x2 && mepgen_in_x3) {\n" \
           "            *reinterpret_cast<float4*>(&out[(mepgen_x0) + (mepgen_y0 + 3) * (nx)]) = " \
           "make_float4(mepgen_o_3_0, mepgen_o_3_1, mepgen_o_3_2, mepgen_o_3_3);\n        } else {" in t
    assert "if (mepgen_in_x2) out[(mepgen_x0 + 2) + (mepgen_y0 + 3) * (nx)] = mepgen_o_3_2;" in t
    assert "mepgen_o_1_2 = c + w * (4.0f * edges" in t
    assert "((reinterpret_cast<unsigned long long>(&out[(mepgen_x0) + (mepgen_y0) * (nx)]) & 15) == 0)" in t
    assert "stored 16 bytes at a time" in rw.explanation
    twice = KernelSource(src.text.replace("* (1.0f / 6.0f);", "* (1.0f / 6.0f);\n        out[0] = out[0];"), spec)
    kept = StencilRows().apply(twice, spec, launch, {"rows": 4, "vec": 4})
    assert "mepgen_o_" not in kept.text and "reinterpret_cast<float4*>" not in kept.text
    assert "4 x 4 points per thread (4 consecutive along x)" in rw.explanation
    assert "18 loads for 16 points" in rw.explanation and "grid.x by 4" in rw.explanation
    # a chain recorded before vec replays as it was measured
    assert "mepgen_x0" not in StencilRows().apply(src, spec, launch, {"rows": 4}).text


def test_stencil_rows_vec4_refusals_leave_vec1(meps):
    t = StencilRows()
    src, spec, launch = load(meps["smooth9"])
    moved = KernelSource(src.text.replace("* (1.0f / 6.0f)", "* (1.0f / 6.0f) + 0 * blockDim.x"), spec)
    assert t.space(moved, spec, launch) == {"rows": [2, 4, 8], "vec": [1]}
    with pytest.raises(Refused, match="uses blockDim.x beyond i's declaration"):
        t.apply(moved, spec, launch, {"rows": 4, "vec": 4})
    with pytest.raises(Refused, match="vec 2: a thread takes 1 or 4"):
        t.apply(src, spec, launch, {"rows": 4, "vec": 2})
    # heat::diffuse_step reads u through lap5 as well as directly: lap5's loads would stay scalar beside the
    # 128-bit rows (measured slower on the H200), so vec 4 is not offered and apply names the helper
    src, spec, launch = load(meps["heat.diffuse_step"])
    assert t.space(src, spec, launch)["vec"] == [1]
    with pytest.raises(Refused, match=r"u is also read inside lap5\(\): those loads cannot share"):
        t.apply(src, spec, launch, {"rows": 2, "vec": 4})
    # without the helper's reads of u (its value passed in instead) vec 4 is offered again
    direct = KernelSource(src.text.replace("lap5(u, i, j, g.nx, inv_dx2, inv_dy2)", "(u[idx - 1] - uc)"), spec)
    assert t.space(direct, spec, launch)["vec"] == [4, 1]


@pytest.mark.nvcc
def test_stencil_rows_vec4_loads_128_bits(meps, tmp_path):
    """diffuse7 at 8 rows x 4: 26 128-bit loads on the fast path (10 planes of the centre column, 8 x 2 y
    neighbours) and 16 scalars (x0-1, x0+4 per row), 8 128-bit stores, no local memory."""
    src, spec, launch = load(meps["diffuse7"])
    rw = StencilRows().apply(src, spec, launch, {"rows": 8, "vec": 4})
    text = ptx_of(meps["diffuse7"], spec, rw, tmp_path)
    assert len(re.findall(r"ld\.global\.nc\.v4\.f32", text)) == 26
    assert len(re.findall(r"st\.global\.v4\.f32", text)) == 8          # one per row of 4 points
    assert not re.findall(r"(ld|st)\.local", text)
    assert "42 loads for 32 points" in rw.explanation


def test_stencil_rows_refuses(meps):
    t = StencilRows()
    assert "returns early" in refusal(meps, "smooth9", t, ("out[j * nx + i] =", "{ if (w < 0) return; }\n        out[j * nx + i] ="))
    assert "uses blockDim.y beyond" in refusal(meps, "smooth9", t, ("* (1.0f / 6.0f)", "* (1.0f / 6.0f) + 0 * blockDim.y"))
    assert "not a 2D/3D stencil" in refusal(meps, "conv1d_taps", t)
    assert "is not unit-stride in col" in refusal(meps, "matmul", t)      # a loop over k: not a stencil


@pytest.mark.nvcc
def test_stencil_rows_shares_loads_in_the_fast_path(meps, tmp_path):
    """The point of the rewrite, checked in the PTX: smooth9 at 4 rows has 9 x 4 loads on its border path and
    18 on the interior path (each of the 6 rows' 3 columns loaded once); nvcc adds none back."""
    src, spec, launch = load(meps["smooth9"])
    rw = StencilRows().apply(src, spec, launch, {"rows": 4})
    loads = len(re.findall(r"ld\.global", ptx_of(meps["smooth9"], spec, rw, tmp_path)))
    assert loads == 36 + 18
