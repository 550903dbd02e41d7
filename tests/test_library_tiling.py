"""tile_stencil and tile_matmul on the kernels where they apply (rewritten text, explanation and launch
asserted; nvcc compiles the rewritten MEP) and on kernels where they must refuse (the reason asserted)."""
from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from library_fixtures import REPO, load
from mepgen.evaluate.launchcfg import launch_from
from mepgen.evaluate.native import NativeBackend
from mepgen.evaluate.results import CompileFailed
from mepgen.optimize.library.catalog import all_transformations
from mepgen.optimize.library.proposer import LibraryProposer
from mepgen.optimize.library.source import KernelSource, Refused
from mepgen.optimize.library.tile_matmul import TileMatmul
from mepgen.optimize.library.stencil_rows import StencilRows
from mepgen.optimize.library.tile_stencil import TileStencil
from mepgen.optimize.library.tile_window import TileWindow
from mepgen.optimize.library.launch_config import LaunchConfig
from mepgen.optimize.proposer import Context


@pytest.fixture(scope="module")
def meps(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiling")
    out = {}
    for app, args in (("dense", ["--all"]), ("heatcg", ["heat::diffuse_step"])):
        folder = root / app
        shutil.copytree(REPO / "examples" / app, folder, ignore=shutil.ignore_patterns("build", ".mepgen"))
        subprocess.run(["mepgen", "extract", "."], cwd=folder, check=True, capture_output=True)
        subprocess.run(["mepgen", "mep", *args], cwd=folder, check=True, capture_output=True)
        out.update({d.name: d for d in (folder / ".mepgen" / "meps").iterdir()})
    return out


def rewrite(meps, kernel, t, params):
    src, spec, launch = load(meps[kernel])
    assert set(params) <= set(t.space(src, spec, launch))
    return t.apply(src, spec, launch, params)


def refusal(meps, kernel, t, edit=None) -> str:
    """Why `t` refuses the kernel, optionally after a textual edit (old, new) of its kernel.cu."""
    src, spec, launch = load(meps[kernel])
    if edit is not None:
        assert edit[0] in src.text
        src = KernelSource(src.text.replace(edit[0], edit[1]), spec)
    with pytest.raises(Refused) as e:
        t.space(src, spec, launch)
    return str(e.value)


# --- tile_stencil -----------------------------------------------------------------------------------

def test_tile_stencil_heat_diffuse_step_through_the_lap5_helper(meps):
    rw = rewrite(meps, "heat.diffuse_step", TileStencil(), {"block": "32x8"})
    assert "__shared__ float mepgen_tile[340];" in rw.text and "__syncthreads();" in rw.text
    assert "lap5(mepgen_tile, ((int)threadIdx.x + 1), ((int)threadIdx.y + 1), 34, inv_dx2, inv_dy2)" in rw.text
    assert "c_stencil[4] * mepgen_tile[mepgen_t+34]" in rw.text and "u[idx" not in rw.text
    assert "mepgen_tile[mepgen_e] = u[mepgen_gy * (g.nx) + mepgen_gx];" in rw.text
    assert "void diffuse_step(const float* __restrict__ u, float* __restrict__ u_new, Grid g, float alpha, float dt)" \
        in rw.text
    assert rw.text.index("__syncthreads();") < rw.text.index("if (i > 0 && i < g.nx-1")
    assert rw.launch == {"grid": ["(NX + 32 - 1) / 32", "(NY + 8 - 1) / 8"], "block": ["32", "8"], "shared_mem": "0"}
    assert "34x10 shared-memory tile" in rw.explanation and "1 helper call" in rw.explanation


def test_tile_stencil_9_point_and_3d_7_point(meps):
    rw = rewrite(meps, "smooth9", TileStencil(), {"block": "16x16"})
    assert "__shared__ float mepgen_tile[324];" in rw.text
    for delta in ("-19", "-17", "+17", "+19", "-1", "+1", "-18", "+18"):
        assert f"mepgen_tile[mepgen_t{delta}]" in rw.text
    assert "9 neighbour read(s)" in rw.explanation and rw.launch["block"] == ["16", "16"]
    vol = rewrite(meps, "diffuse7", TileStencil(), {"block": "32x4x4"})
    assert "__shared__ float mepgen_tile[1224];" in vol.text        # 34 x 6 x 6
    assert "u[mepgen_gz * (vol.nx * vol.ny) + mepgen_gy * (vol.nx) + mepgen_gx]" in vol.text
    assert "mepgen_tile[mepgen_t-204]" in vol.text and "mepgen_tile[mepgen_t+204]" in vol.text
    assert vol.launch["grid"] == ["(VOL_NX + 32 - 1) / 32", "(VOL_NY + 4 - 1) / 4", "(VOL_NZ + 4 - 1) / 4"]


def test_tile_stencil_refuses(meps):
    t = TileStencil()
    assert "data-dependent index" in refusal(meps, "smooth9", t, ("in[j * nx + (i - 1)]", "in[j * nx + (int)in[i]]"))
    assert "non-affine index" in refusal(meps, "smooth9", t, ("in[j * nx + (i + 1)]", "in[(j * nx + i) / 2]"))
    assert "radius is not provable" in refusal(meps, "smooth9", t, ("in[j * nx + (i + 1)]", "in[j * nx + (i + ny)]"))
    assert "halo would start before index 0" in refusal(meps, "smooth9", t, ("i >= 1 &&", "i >= 0 &&"))
    assert "cannot prove the halo stays inside a row" in refusal(meps, "smooth9", t, ("i < nx - 1", "i < nx"))
    why = refusal(meps, "heat.diffuse_step", t, ("lap5(u, i, j, g.nx,", "lap5(u, i, j, g.nx / 2,"))
    assert "`lap5` indexes u with `nx`, not bound to an affine argument" in why
    assert "not a 2D/3D stencil" in refusal(meps, "conv1d_taps", t)
    assert "reads A" not in refusal(meps, "matmul", t)       # refused, whatever the reason, never tiled


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
    assert StencilRows().space(src, spec, launch) == {"rows": [4, 2, 8], "vec": [4, 1]}
    rw = StencilRows().apply(src, spec, launch, {"rows": 4, "vec": 4})
    t = rw.text
    assert "const int mepgen_x0 = (blockIdx.x * blockDim.x + threadIdx.x) * 4;" in t
    # the fast path: the guard at the box's four corners, the first row's address aligned and the row pitch whole
    for x, y in (("", ""), (" + 3", ""), ("", " + 3"), (" + 3", " + 3")):
        assert f"((mepgen_x0{x}) >= 1 && (mepgen_x0{x}) < nx - 1 && (mepgen_y0{y}) >= 1 && (mepgen_y0{y}) < ny - 1)" in t
    assert "((reinterpret_cast<unsigned long long>(&in[(mepgen_x0) + (mepgen_y0) * (nx)]) & 15) == 0) && " \
           "((nx) % 4 == 0) && " in t
    assert "const float4 mepgen_v_m1 = *reinterpret_cast<const float4*>(&in[(mepgen_x0) + (mepgen_y0 - 1) * (nx)]);" in t
    assert t.count("const float4 mepgen_v_") == 6 and "const float mepgen_s_m1_1 = mepgen_v_m1.y;" in t
    assert "const float mepgen_s_2_m1 = in[(mepgen_x0 - 1) + (mepgen_y0 + 2) * (nx)];" in t
    assert "const float mepgen_s_2_4 = in[(mepgen_x0 + 4) + (mepgen_y0 + 2) * (nx)];" in t
    # point (row 0, column 1): its centre is lane y of row 0, its left neighbour lane x
    assert "const int i = mepgen_x0 + 1;" in t and "const float edges = mepgen_s_0_0 + mepgen_s_0_2" in t
    # border strips: the original guard per point in two unrolled loops
    assert "const int i = mepgen_x0 + mepgen_c;" in t and "if (i >= 1 && i < nx - 1 && j >= 1 && j < ny - 1) {" in t
    assert rw.launch["grid"] == ["(((IMG_NX + ST_BX - 1) / ST_BX) + 3) / 4", "(((IMG_NY + ST_BY - 1) / ST_BY) + 3) / 4"]
    # out[j * nx + i] proven at offset 0 with the reads' stride: a row's 4 values stored 16 bytes at a time, at an
    # address the fast path tests for alignment
    assert "*reinterpret_cast<float4*>(&out[(mepgen_x0) + (mepgen_y0 + 3) * (nx)]) = " \
           "make_float4(mepgen_o_3_0, mepgen_o_3_1, mepgen_o_3_2, mepgen_o_3_3);" in t
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
    assert t.space(moved, spec, launch) == {"rows": [4, 2, 8], "vec": [1]}
    with pytest.raises(Refused, match="uses blockDim.x beyond i's declaration"):
        t.apply(moved, spec, launch, {"rows": 4, "vec": 4})
    with pytest.raises(Refused, match="vec 2: a thread takes 1 or 4"):
        t.apply(src, spec, launch, {"rows": 4, "vec": 2})
    # heat::diffuse_step reads u through lap5 and directly: the direct reads go 128 bits at a time
    src, spec, launch = load(meps["heat.diffuse_step"])
    assert t.space(src, spec, launch)["vec"] == [4, 1]


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
    assert "returns early" in refusal(meps, "smooth9", t, ("out[j * nx + i] =", "if (w < 0) return;\n        out[j * nx + i] ="))
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


def ptx_of(mep, spec, rw, tmp_path) -> str:
    """The PTX nvcc makes of a rewrite's kernel.cu, built with the MEP's flags."""
    from mepgen import mepbuild
    f, ptx = tmp_path / "kernel.cu", tmp_path / "k.ptx"
    f.write_text(rw.text)
    done = subprocess.run([mepbuild.nvcc_executable(), *mepbuild.build_flags(spec), f"-I{mep}", "-ptx",
                           "-x", "cu", str(f), "-o", str(ptx)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return ptx.read_text()


# --- tile_matmul ------------------------------------------------------------------------------------

def test_tile_matmul_plain_product(meps):
    rw = rewrite(meps, "matmul", TileMatmul(), {"tile": 32, "rm": 4, "bk": 16})
    assert "__shared__ float mepgen_As[16][33];" in rw.text
    assert "(mepgen_gr < m && mepgen_gk < k) ? A[mepgen_gr * k + mepgen_gk] : float(0)" in rw.text
    assert "(mepgen_gc < n && mepgen_gk < k) ? B[mepgen_gk * n + mepgen_gc] : float(0)" in rw.text
    assert "C[row * n + col] = mepgen_acc[mepgen_q];" in rw.text and "if (row < m && col < n)" in rw.text
    assert "void matmul(const float* A, const float* B, float* C, int m, int n, int k)" in rw.text
    assert rw.launch == {"grid": ["(MAT_N + 32 - 1) / 32", "(MAT_M + 32 - 1) / 32"], "block": ["32", "8"],
                         "shared_mem": "0"}
    assert "4 outputs per thread" in rw.explanation and "transposed" not in rw.explanation


def test_tile_matmul_transposed_and_triangular(meps):
    tn = rewrite(meps, "gemm_tn", TileMatmul(), {"tile": 16, "rm": 1, "bk": 8})
    assert "At[mepgen_gk * m + mepgen_gr]" in tn.text and "const int mepgen_m = mepgen_e % 16;" in tn.text
    assert "transposed At" in tn.explanation and tn.launch["block"] == ["16", "16"]
    syrk = rewrite(meps, "syrk_lower", TileMatmul(), {"tile": 64, "rm": 8, "bk": 32})
    assert "if (blockIdx.x > blockIdx.y) return;" in syrk.text
    assert "A[mepgen_gc * k + mepgen_gk]" in syrk.text and "if (row < n && col <= row)" in syrk.text
    assert "C[row * n + col] += alpha * mepgen_acc[mepgen_q];" in syrk.text
    assert "lower triangle" in syrk.explanation and syrk.launch["grid"] == ["(SYRK_N + 64 - 1) / 64"] * 2


def test_tile_matmul_register_tile(meps):
    """rn > 1: each thread holds an rm x rn block of outputs; the epilogue runs the original guard and store
    once per output, row and column strided by the thread counts."""
    rw = rewrite(meps, "matmul", TileMatmul(), {"tile": 64, "rm": 4, "rn": 4, "bk": 16})
    assert "float mepgen_acc[4][4];" in rw.text and "float mepgen_a[4], mepgen_b[4];" in rw.text
    assert "mepgen_acc[mepgen_q][mepgen_w] += mepgen_a[mepgen_q] * mepgen_b[mepgen_w];" in rw.text
    assert "const int col = mepgen_c0 + (int)threadIdx.x + mepgen_w * 16;" in rw.text
    assert "const int row = mepgen_r0 + (int)threadIdx.y + mepgen_q * 16;" in rw.text
    assert "C[row * n + col] = mepgen_acc[mepgen_q][mepgen_w];" in rw.text
    assert "blockIdx.x * blockDim.x" not in rw.text          # the original column index assumed one per thread
    assert rw.launch == {"grid": ["(MAT_N + 64 - 1) / 64", "(MAT_M + 64 - 1) / 64"], "block": ["16", "16"],
                         "shared_mem": "0"}
    assert "4x4 outputs per thread" in rw.explanation
    with pytest.raises(Refused):
        TileMatmul().apply(*load(meps["matmul"]), {"tile": 128, "rm": 16, "rn": 8, "bk": 8})   # 128 accumulators


def test_tile_matmul_refuses(meps):
    t = TileMatmul()
    assert "not a 2D output grid" in refusal(meps, "lower_solve", t)
    assert "is not a bound on j or i or the triangle" in refusal(meps, "smooth9", t)
    assert "depend on row" in refusal(meps, "matmul", t, ("p < k;", "p < row;"))
    assert "scalar_replace first" in refusal(meps, "matmul", t, (
        "float acc = 0.0f;\n        for (int p = 0; p < k; ++p) {\n            acc +=",
        "C[row * n + col] = 0.0f;\n        for (int p = 0; p < k; ++p) {\n            C[row * n + col] +="))
    assert "not a product of two array reads" in refusal(meps, "matmul", t, ("p] * B[", "p] + B["))
    assert "is not an array read" in refusal(meps, "matmul", t, ("acc += A", "acc += 2.0f * A"))
    assert "same output index" in refusal(meps, "matmul", t, ("B[p * n + col]", "B[p * n + row]"))
    assert "exactly one of row, col" in refusal(meps, "matmul", t, ("B[p * n + col]", "B[p * n + col + row]"))


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


def test_launch_config_tunes_a_3d_block_after_stencil_rows(meps):
    """diffuse7 walks z in the thread after stencil_rows: its 3D block is reshaped, the grid follows."""
    from mepgen.optimize.library.launch_config import LaunchConfig
    src, spec, launch = load(meps["diffuse7"])
    rows = StencilRows().apply(src, spec, launch, {"rows": 8})
    after = KernelSource(rows.text, spec)
    space = LaunchConfig().space(after, spec, rows.launch)["block"]
    assert "32x8x1" in space and "32x4x2" in space
    rw = LaunchConfig().apply(after, spec, rows.launch, {"block": "32x8x1"})
    assert rw.launch["block"] == ["32", "8", "1"]
    assert rw.launch["grid"][0] == "(VOL_NX + 32 - 1) / 32" and rw.launch["grid"][2].startswith("(((VOL_NZ + 1 - 1) / 1)")
    with pytest.raises(Refused, match="already 32x4x2"):
        LaunchConfig().apply(after, spec, rows.launch, {"block": "32x4x2"})


def test_both_are_registered_and_proposed_first(meps):
    names = [t.name for t in all_transformations()]
    assert names.index("tile_matmul") < names.index("warp_per_row")
    assert names.index("tile_stencil") < names.index("launch_config")
    for kernel, name in (("heat.diffuse_step", "tile_stencil"), ("syrk_lower", "tile_matmul")):
        src, spec, _ = load(meps[kernel])
        ctx = Context(spec=spec, mep_dir=meps[kernel], original=src.text, gpu={})
        first = LibraryProposer().propose(ctx, None, 4)[0]
        assert first.transformations[0]["name"] == name and first.launch is not None
        assert first.change.startswith(name + ":")


CASES = [("heat.diffuse_step", TileStencil, {"block": "32x8"}), ("smooth9", TileStencil, {"block": "64x4"}),
         ("diffuse7", TileStencil, {"block": "32x4x2"}), ("matmul", TileMatmul, {"tile": 32, "rm": 4, "bk": 16}),
         ("gemm_tn", TileMatmul, {"tile": 16, "rm": 2, "bk": 32}), ("syrk_lower", TileMatmul, {"tile": 64, "rm": 8, "bk": 8}),
         ("matmul", TileMatmul, {"tile": 64, "rm": 4, "rn": 4, "bk": 16}),
         ("gemm_tn", TileMatmul, {"tile": 128, "rm": 8, "rn": 8, "bk": 8}),
         ("syrk_lower", TileMatmul, {"tile": 64, "rm": 8, "rn": 4, "bk": 16}),
         ("smooth9", StencilRows, {"rows": 4}), ("diffuse7", StencilRows, {"rows": 8}),
         ("heat.diffuse_step", StencilRows, {"rows": 2}),
         ("smooth9", StencilRows, {"rows": 4, "vec": 4}), ("diffuse7", StencilRows, {"rows": 8, "vec": 4}),
         ("heat.diffuse_step", StencilRows, {"rows": 4, "vec": 4}),
         ("conv1d_taps", TileWindow, {"block": 256, "per_thread": 4}),
         ("conv1d_taps", TileWindow, {"block": 512, "per_thread": 1}),
         ("conv1d_taps", TileWindow, {"block": 256, "per_thread": 8, "reuse": "registers"}),
         ("conv1d_taps", TileWindow, {"block": 512, "per_thread": 4, "reuse": "registers"}),
         ("conv1d_taps", TileWindow, {"block": 128, "per_thread": 4, "reuse": "vector"}),
         ("conv1d_taps", TileWindow, {"block": 256, "per_thread": 8, "reuse": "vector"}),
         ("diffuse7", LaunchConfig, {"block": "64x4x1"})]


@pytest.mark.nvcc
@pytest.mark.parametrize("kernel,cls,params", CASES, ids=[f"{k}-{c.__name__}-{'-'.join(map(str, p.values()))}" for k, c, p in CASES])
def test_tiled_mep_compiles(meps, kernel, cls, params, tmp_path):
    src, spec, launch = load(meps[kernel])
    rw = cls().apply(src, spec, launch, params)
    f = tmp_path / "kernel.cu"
    f.write_text(rw.text)
    built = NativeBackend(spec, meps[kernel], tmp_path / "build").compile(f, launch=launch_from(spec, rw.launch))
    assert not isinstance(built, CompileFailed), built.message
