"""Stencils that handle their borders inside the kernel (issue 22): thread indices that start at the first
interior point, neighbour reads under a condition that keeps them on the grid (`x > 0 ? v[...] : 0`, `if`),
and a 2D grid in a 1D launch with such reads. tests/library_idioms/stencil_borders holds them, written here;
the app is extracted and cut into MEPs as a user would, and every structural rewrite compiles with the MEP's
flags. A read whose condition does not keep it on the grid (wrong_side) is refused.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from mepgen.optimize.library.source import KernelSource
from mepgen.optimize.library.stencil_match import index_origin, match_stencil
from library_fixtures import assert_structural_rewrites_compile, dry_run_plans

APP = Path(__file__).parent.parent / "library_idioms" / "stencil_borders"


@pytest.fixture(scope="module")
def plans(tmp_path_factory):
    return dry_run_plans(APP, tmp_path_factory.mktemp("borders"))


def _text(p, name):
    cand = next(c for c in p.candidates if c["name"] == name)
    return cand, (Path(cand["folder"]) / "kernel.cu").read_text()


def test_index_origin_reads_the_interior_start():
    assert index_origin("blockIdx.y * blockDim.y + threadIdx.y + 1", "y") == 1
    assert index_origin("2 + (threadIdx.x + blockIdx.x * blockDim.x)", "x") == 2
    assert index_origin("blockIdx.x * blockDim.x + threadIdx.x", "x") == 0
    assert index_origin("blockIdx.x * blockDim.x + threadIdx.x - 1", "x") is None
    assert index_origin("blockIdx.x * blockDim.x + threadIdx.x + n", "x") is None
    assert index_origin("blockIdx.y * blockDim.y + threadIdx.x + 1", "x") is None


def test_interior_start_moves_the_tile_and_the_strips(plans):
    mep, spec, p = plans["interior_update"]
    assert {"tile_stencil", "stencil_rows"} <= set(p.structural), p.refusals
    st = match_stencil(KernelSource((mep / "kernel.cu").read_text(), spec), spec)
    assert st.origin == [1, 1] and st.lo == [1, 1] and st.near == [1, 1]
    _, tiled = _text(p, "tile_stencil")
    body = " ".join(tiled[tiled.index("void interior_update"):].split())
    # tile cell e of a 34-wide tile holds column blockIdx.x * 32 + e % 34 (thread x at cell x + 1 is column x + 1)
    assert "const int mepgen_gx = (int)(blockIdx.x * 32) + mepgen_e % 34;" in body
    assert "const int mepgen_gy = (int)(blockIdx.y * 8) + mepgen_e / 34;" in body
    _, rows = _text(p, "stencil_rows")
    assert "const int mepgen_y0 = (blockIdx.y * blockDim.y + threadIdx.y) * 2 + 1;" in rows


def test_conditional_border_reads_are_tiled_inside_the_grid(plans):
    mep, spec, p = plans["masked_sum"]
    assert "tile_stencil" in p.structural, p.refusals
    st = match_stencil(KernelSource((mep / "kernel.cu").read_text(), spec), spec)
    assert st.conditional == 4 and st.near == [0, 0] and st.radius == [1, 1]
    cand, tiled = _text(p, "tile_stencil")
    # the tile loads nothing beyond the grid: the halo cells outside it are never read (their reads' conditions fail)
    assert "if (mepgen_gx >= 0 && mepgen_gx < (w) && mepgen_gy >= 0 && mepgen_gy < (h))" in tiled
    assert "5 neighbour read(s) from shared memory" in cand["change"]
    assert "run only under a condition" in p.refusals["stencil_rows"]


def test_flattened_grid_with_zero_edges_is_unflattened_then_tiled(plans):
    mep, spec, p = plans["zero_edges"]
    assert {"tile_stencil", "unflatten"} <= set(p.structural), p.refusals
    cand, tiled = _text(p, "tile_stencil")
    assert cand["change"].startswith("unflatten (the 1D launch as a 2D grid), then tile_stencil")
    assert cand["launch"]["block"] == ["32", "8"] and len(cand["launch"]["grid"]) == 2
    body = " ".join(tiled[tiled.index("void zero_edges"):].split())
    assert "%" not in body.split("mepgen_tile[")[0].split("__shared__")[0] and "t % n" not in body
    assert "(x > 0) ? mepgen_tile[mepgen_t-1] : 0.0f" in body


def test_one_thread_per_plane_is_tiled_in_deeper_blocks(plans):
    """grid.z = nz with a block depth of 1: a tile 2 or 4 planes deep rounds grid.z up to whole blocks."""
    _, _, p = plans["planes"]
    assert "tile_stencil" in p.structural, p.refusals
    cand = next(c for c in p.candidates if c["name"] == "tile_stencil")
    depth = int(cand["launch"]["block"][2])
    assert depth > 1 and cand["launch"]["grid"][2] == f"((64) + {depth - 1}) / {depth}"
    assert "halo 1/1/1" in cand["change"]


def test_a_read_its_condition_does_not_bound_is_refused(plans):
    _, _, p = plans["wrong_side"]
    assert "tile_stencil" not in p.structural
    assert "halo would start before index 0" in p.refusals["tile_stencil"]


@pytest.mark.nvcc
def test_border_rewrites_compile(plans, tmp_path):
    assert_structural_rewrites_compile(plans, tmp_path)
