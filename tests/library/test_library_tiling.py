"""tile_stencil and tile_matmul on the kernels where they apply (rewritten text, explanation and launch
asserted; nvcc compiles the rewritten MEP) and on kernels where they must refuse (the reason asserted)."""
from __future__ import annotations

import pytest

from library_fixtures import assert_same_on_cpu, load, refusal, rewrite
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
from mepgen.spec import load_spec


@pytest.fixture(scope="module")
def meps(tiling_meps):
    return tiling_meps


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


MATMUL_MAIN = """    const int m = 37, n = 45, k = 29;                    // no multiple of any tile
    std::vector<float> a(m * k), b(k * n), c0(m * n, 7.f), c1(m * n, 7.f);
    for (auto &v : a) v = float(rand()) / RAND_MAX - 0.5f;  // rounding makes the order of the sum visible
    for (auto &v : b) v = float(rand()) / RAND_MAX - 0.5f;
    launch2((n + 15) / 16, (m + 15) / 16, 16, 16, [&] { before::matmul(a.data(), b.data(), c0.data(), m, n, k); });
    launch2(GRID_AFTER, [&] { after::matmul(a.data(), b.data(), c1.data(), m, n, k); });
    for (int i = 0; i < m * n; i++) if (c0[i] != c1[i]) { printf("differ at %d\\n", i); return 1; }
    return 0;
"""


@pytest.mark.parametrize("params", [{"tile": 32, "rm": 4, "rn": 4, "bk": 16, "layout": "packed"},
                                    {"tile": 32, "rm": 4, "rn": 4, "bk": 8, "layout": "strided"},
                                    {"tile": 64, "rm": 8, "rn": 4, "bk": 16, "layout": "packed"},
                                    {"tile": 32, "rm": 4, "rn": 4, "bk": 8, "layout": "packed", "prefetch": 1},
                                    {"tile": 64, "rm": 4, "rn": 4, "bk": 16, "layout": "strided", "prefetch": 1},
                                    {"tile": 64, "rm": 8, "rn": 8, "bk": 16, "layout": "quads", "prefetch": 1},
                                    {"tile": 64, "rm": 4, "rn": 8, "bk": 8, "layout": "quads", "prefetch": 0},
                                    {"tile": 32, "rm": 4, "rn": 2, "bk": 16, "layout": "quads", "prefetch": 1}])
def test_tile_matmul_register_layouts_sum_in_the_original_order(meps, tmp_path, params):
    """Both register layouts, with and without the next slice prefetched into registers, on the CPU (each block's
    threads at once, real barriers) at sizes no tile divides: every output the same float as the original's, so each
    is summed over k in the original order."""
    rw = rewrite(meps, "matmul", TileMatmul(), params)
    t = params["tile"]
    grid = f"(n + {t - 1}) / {t}, (m + {t - 1}) / {t}, {', '.join(rw.launch['block'])}"
    cut = lambda text: text[text.index("__global__ void matmul"):].split("\n}\n")[0] + "\n}\n"
    assert_same_on_cpu(tmp_path, cut(meps["matmul"].joinpath("kernel.cu").read_text()), cut(rw.text),
                       MATMUL_MAIN.replace("GRID_AFTER", grid), blocks=True)
    assert ("if (mepgen_more) {" in rw.text) == bool(params.get("prefetch"))
    if params["layout"] == "packed":
        assert "reinterpret_cast<const float4 *>(&mepgen_Bs[mepgen_kk][(int)threadIdx.x * 4 + mepgen_u])" in rw.text
        assert "__shared__ __align__(16) float mepgen_As" in rw.text
    if params["layout"] == "quads" and params["rn"] % 4 == 0:     # consecutive threads, consecutive 16-byte groups
        assert ("reinterpret_cast<const float4 *>(&mepgen_Bs[mepgen_kk][(mepgen_u) / 4 * %d + (int)threadIdx.x * 4 + "
                "(mepgen_u) %% 4])" % (params["tile"] // params["rn"] * 4)) in rw.text


def test_tile_matmul_starts_at_8x4_for_a_large_plain_product(meps):
    """A multiply-add product of 1024 x 1024 outputs starts at 8 x 4 per thread (fewer shared-memory reads per FMA);
    a generalized step (a square root per term) and a small output keep the defaults' 4 x 4."""
    src, spec, launch = load(meps["matmul"])
    t = TileMatmul()
    assert t.first_point(src, spec, launch) == {**t.defaults, "rm": 8}
    g = KernelSource(src.text.replace("acc += A[row * k + p] * B[p * n + col];",
                                      "acc += sqrtf(A[row * k + p] * B[p * n + col]);"), spec)
    assert t.first_point(g, spec, launch) == t.defaults
    small = load_spec(meps["matmul"] / "mep.yaml")
    small.sizes.update({"MAT_M": 200})
    assert t.first_point(KernelSource(src.text, small), small, launch) == t.defaults


def test_tile_matmul_refuses(meps):
    t = TileMatmul()
    assert "not a 2D output grid" in refusal(meps, "lower_solve", t)
    assert "is not a bound on j or i or the triangle" in refusal(meps, "smooth9", t)
    assert "depend on row" in refusal(meps, "matmul", t, ("p < k;", "p < row;"))
    assert "scalar_replace first" in refusal(meps, "matmul", t, (
        "float acc = 0.0f;\n        for (int p = 0; p < k; ++p) {\n            acc +=",
        "C[row * n + col] = 0.0f;\n        for (int p = 0; p < k; ++p) {\n            C[row * n + col] +="))
    # any pure g(A[row, p], B[p, col]) is an inner product tiled the same way (issue 22); not three reads, nor a
    # value of the thread's own beside the two
    assert "does not read exactly two array elements" in refusal(meps, "matmul", t, ("p] * B[", "p] * A[p] * B["))
    assert "uses row besides its two reads" in refusal(meps, "matmul", t, ("acc += A", "acc += (float)row * A"))
    assert "same output index" in refusal(meps, "matmul", t, ("B[p * n + col]", "B[p * n + row]"))
    assert "exactly one of row, col" in refusal(meps, "matmul", t, ("B[p * n + col]", "B[p * n + col + row]"))


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
         ("heat.diffuse_step", StencilRows, {"rows": 4, "vec": 1}),
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
