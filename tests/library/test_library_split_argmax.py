"""A thread per output scanning a loop for its best element gets slices of the scan combined in the loop's order
(split_argmax), and where the compared value is an inner product of a row of each side, a register-tiled product
with the scan as its epilogue (tile_argmax). tests/library_idioms/best_match holds the kernels, written here; the app
is extracted and cut into MEPs as a user would; every structural rewrite compiles with the MEP's flags, and the
rewrites are run on the CPU on inputs full of ties (split_argmax: the combining thread of each block last, as the
barrier orders it; tile_argmax: each block's threads at once with a real barrier), at sizes that are no multiple of
the tiles: the same scores and the same (first) indices as the original.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from library_fixtures import assert_same_on_cpu, assert_structural_rewrites_compile, dry_run_plans, load, planned

from mepgen.optimize.library.base import current_launch
from mepgen.optimize.library.source import KernelSource, Refused
from mepgen.optimize.library.tile_argmax import TileArgmax

APP = Path(__file__).parent.parent / "library_idioms" / "best_match"


@pytest.fixture(scope="module")
def plans(tmp_path_factory):
    return dry_run_plans(APP, tmp_path_factory.mktemp("argmax"))


def _cand(p):
    return planned(p, "split_argmax")


def test_max_and_min_scans_are_sliced(plans):
    for kernel, op in (("best_match", ">"), ("closest", "<")):
        _, _, p = plans[kernel]
        assert "split_argmax" in p.structural, (kernel, p.refusals)
        cand, text = _cand(p)
        assert f"the kernel's own `{op}`" in cand["change"]
        body = " ".join(text[text.index("__global__"):].split())
        assert "__syncthreads(); if (threadIdx.y == 0) {" in body
    cand, _ = _cand(plans["best_match"][2])
    # the grid keeps the original's NA threads along x: NA / 128 blocks of 128 become (NA / 128) * 16 blocks of 8
    assert cand["launch"] == {"grid": ["(NA / 128) * ((128) / 8)"], "block": ["8", "32"], "shared_mem": "0"}


def test_a_guard_or_a_last_best_rule_is_refused(plans):
    assert "every thread must reach the combining barrier" in plans["guarded_best"][2].refusals["split_argmax"]
    assert "strict" in plans["last_best"][2].refusals["split_argmax"]


@pytest.mark.nvcc
def test_argmax_rewrites_compile(plans, tmp_path):
    assert_structural_rewrites_compile(plans, tmp_path)


SIM_DEFINES = """#define NA 256
#define NB 1000
#define DIM 16
#define __shared__ static
#define __syncthreads()
"""
SIM_MAIN = """    std::vector<float> a(NA * DIM), b(NB * DIM), s0(NA), s1(NA);
    std::vector<int> w0(NA), w1(NA);
    for (auto &v : a) v = float(rand() % 3 - 1);          // small integers: many exactly equal products
    for (auto &v : b) v = float(rand() % 3 - 1);
    blockDim = {128, 1, 1};
    for (unsigned g = 0; g < NA / 128; g++)
        for (unsigned t = 0; t < 128; t++) { blockIdx = {g, 0, 0}; threadIdx = {t, 0, 0}; before::best_match(a.data(), b.data(), s0.data(), w0.data()); }
    blockDim = {8, 32, 1};
    for (unsigned g = 0; g < (NA / 128) * (128 / 8); g++)
        for (unsigned ty = 32; ty-- > 0;)                   // y == 0 (the combining thread) after the others
            for (unsigned tx = 0; tx < 8; tx++) {
                blockIdx = {g, 0, 0}; threadIdx = {tx, ty, 0}; after::best_match(a.data(), b.data(), s1.data(), w1.data());
            }
    for (int i = 0; i < NA; i++) if (w0[i] != w1[i] || s0[i] != s1[i]) { printf("differ at %d\\n", i); return 1; }
    return 0;
"""


def test_sliced_scan_keeps_the_first_best_on_ties(plans, tmp_path):
    mep, _, p = plans["best_match"]
    _, text = _cand(p)
    kernel = lambda t: t[t.index("__global__ void best_match"):].split("\n}\n")[0] + "\n}\n"
    assert_same_on_cpu(tmp_path, kernel((mep / "kernel.cu").read_text()), kernel(text), SIM_MAIN, SIM_DEFINES)


def test_inner_product_scans_are_tiled(plans):
    for kernel, op in (("best_match", ">"), ("closest", "<"), ("guarded_best", ">"), ("nearest_centroid", "<")):
        _, _, p = plans[kernel]
        assert "tile_argmax" in p.structural, (kernel, p.refusals)
        cand, text = planned(p, "tile_argmax")
        assert f"with the kernel's own `{op}`" in cand["change"]
        assert cand["launch"]["block"] == ["16", "16"]
    # first: 128 rows per block of 16x16 threads, 8x8 scores each: NA / 128 blocks of 128 stay NA / 128 blocks
    cand, text = planned(plans["best_match"][2], "tile_argmax")
    assert cand["launch"]["grid"] == ["(NA / 128) * ((128) / 128)"] and "8x8 per thread" in cand["change"]
    assert "__shared__ __align__(16) float mepgen_As[16][132];" in text
    # the guard keeps its rows: staged as zeros, no epilogue for them
    _, text = planned(plans["guarded_best"][2], "tile_argmax")
    assert "if (!((i < na))) continue;" in text
    assert "strict" in plans["last_best"][2].refusals["tile_argmax"]
    # 100 centroids: tiles of at most 2 x 100 candidates; the points' transposed reads staged along the points
    cand, text = planned(plans["nearest_centroid"][2], "tile_argmax")
    assert "(mepgen_gk < NF && (mepgen_gr < npts)) ? pts[mepgen_gk * npts + mepgen_gr] : float(0)" in text
    assert "mepgen_acc[mepgen_q][mepgen_w] += (mepgen_a[mepgen_q] - mepgen_b[mepgen_w]) * " \
           "(mepgen_a[mepgen_q] - mepgen_b[mepgen_w]);" in text
    mep, spec, _ = plans["nearest_centroid"]
    few = KernelSource((mep / "kernel.cu").read_text().replace("c < NC", "c < 8"), spec)
    with pytest.raises(Refused, match="8 candidates over c: a tile of 32 or more would mostly compute nothing"):
        TileArgmax().space(few, spec, current_launch(spec, None))
    # 128 rows with 32-deep slices and 32 partial bests per row: over the 48 KB a block may declare
    with pytest.raises(Refused, match="bytes of shared memory, over the 49152"):
        TileArgmax().apply(*load(plans["best_match"][0]), {"tile": 128, "rm": 8, "rn": 4, "bk": 32})


TILE_DEFINES = """#define NA 256
#define NB 1000
#define DIM 20
#define NC 100
#define NF 20
"""
TILE_MAIN = """    std::vector<float> a(NA * DIM), b(NB * DIM), s0(NA, 7.f), s1(NA, 7.f);
    std::vector<int> w0(NA, 7), w1(NA, 7);
    for (auto &v : a) v = float(rand() % 3 - 1);          // small integers: many exactly equal scores
    for (auto &v : b) v = float(rand() % 3 - 1);
    float *A = a.data(), *B = b.data();
    launch(GRID_BEFORE, [&] { before::CALL_BEFORE; });
    launch(GRID_AFTER, [&] { after::CALL_AFTER; });
    for (int i = 0; i < NA; i++) if (w0[i] != w1[i] || s0[i] != s1[i]) { printf("differ at %d\\n", i); return 1; }
    return 0;
"""


@pytest.mark.parametrize("params", [{}, {"layout": "strided", "prefetch": 0, "rm": 8, "rn": 2, "bk": 8},
                                    {"tile": 32, "rm": 2, "rn": 4, "bk": 32, "prefetch": 0},
                                    {"tile": 64, "rm": 8, "rn": 8, "bk": 8, "layout": "strided"},
                                    {"tile": 128, "rm": 8, "rn": 8, "bk": 16, "layout": "quads"},
                                    {"tile": 64, "rm": 4, "rn": 8, "bk": 8, "layout": "quads", "prefetch": 0}])
@pytest.mark.parametrize("kernel,before,call", [
    ("best_match", "NA / 128, 128, 1", "best_match(A, B, {s}.data(), {w}.data())"),
    ("closest", "NA / 256, 256, 1", "closest(A, B, {w}.data())"),
    ("guarded_best", "(NA + 127) / 128, 128, 1", "guarded_best(A, B, {w}.data(), NA - 37)"),
    ("nearest_centroid", "(NA + 255) / 256, 256, 1", "nearest_centroid(A, B, {w}.data(), NA - 37)"),
])
def test_tiled_scan_keeps_the_first_best_on_ties(plans, tmp_path, kernel, before, call, params):
    mep, _, p = plans[kernel]
    rw = TileArgmax().apply(*load(mep), {**TileArgmax().defaults, **params})
    after = ", ".join([rw.launch["grid"][0], *rw.launch["block"]])
    cut = lambda t: t[t.index(f"__global__ void {kernel}"):].split("\n}\n")[0] + "\n}\n"
    main = TILE_MAIN.replace("GRID_BEFORE", before).replace("GRID_AFTER", after) \
        .replace("CALL_BEFORE", call.format(s="s0", w="w0")).replace("CALL_AFTER", call.format(s="s1", w="w1"))
    assert_same_on_cpu(tmp_path, cut((mep / "kernel.cu").read_text()), cut(rw.text), main, TILE_DEFINES, blocks=True)
