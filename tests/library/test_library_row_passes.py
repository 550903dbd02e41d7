"""Row-wise kernels that pass over their row several times get a warp per row (warp_row_passes), and a C89 column
sum with a clamped block gets split_columns (issue 22's spellings). tests/library_idioms/row_passes holds them,
written here; the app is extracted and cut into MEPs as a user would; every structural rewrite compiles with the
MEP's flags.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from mepgen.optimize.library.source import KernelSource
from library_fixtures import assert_structural_rewrites_compile, dry_run_plans

APP = Path(__file__).parent.parent / "library_idioms" / "row_passes"


@pytest.fixture(scope="module")
def plans(tmp_path_factory):
    return dry_run_plans(APP, tmp_path_factory.mktemp("rows"))


def _body(p, name):
    cand = next(c for c in p.candidates if c["name"] == name)
    text = (Path(cand["folder"]) / "kernel.cu").read_text()
    return cand, " ".join(text[text.index("__global__"):].split())


def test_softmax_passes_share_a_warp_per_row(plans):
    _, _, p = plans["row_softmax"]
    assert "warp_row_passes" in p.structural, p.refusals
    cand, body = _body(p, "warp_row_passes")
    assert "(extreme, sum, map)" in cand["change"]
    assert "const int mepgen_lane = threadIdx.x % 32; int r = (blockIdx.x * blockDim.x + threadIdx.x) / 32;" in body
    # the maximum goes on from the shared start value, then the lanes' maxima are combined
    assert "for (int c = (1) + mepgen_lane; c < cols; c += 32)" in body
    assert "{ top = fmaxf(top, in[r * cols + c]); }" in body
    assert "top = fmaxf(top, __shfl_xor_sync(0xffffffffu, top, mepgen_off));" in body
    # the sum starts from zero per lane and is added to the kernel's own accumulator once
    assert "mepgen_p1 += __shfl_xor_sync(0xffffffffu, mepgen_p1, mepgen_off); total += mepgen_p1;" in body
    assert cand["launch"]["grid"] == ["((long long)(ROWS) * 32 + 256 - 1) / 256"]     # rows: the size ROWS


def test_two_sums_and_a_map(plans):
    _, _, p = plans["row_standardize"]
    assert "warp_row_passes" in p.structural, p.refusals
    cand, body = _body(p, "warp_row_passes")
    assert "(sum, sum, map)" in cand["change"]
    assert "mean += mepgen_p0;" in body and "spread += mepgen_p1;" in body
    assert "mean = mean / cols;" in body            # statements between the passes run in every lane, unchanged


def test_columns_and_side_effects_are_refused(plans):
    assert "unit stride" in plans["col_passes"][2].refusals["warp_row_passes"]
    assert "printf" in plans["row_report"][2].refusals["warp_row_passes"]


def test_c89_column_sum_with_a_clamped_block_is_split(plans):
    mep, spec, p = plans["col_rank"]
    assert "split_columns" in p.structural, p.refusals
    text = KernelSource((mep / "kernel.cu").read_text(), spec).text
    body = " ".join(text[text.index("__global__"):].split())
    # the accumulator declared where it is first set, right before its loop; the previous value read after it
    assert "if (j < n) { float total = 0.0f; for (int i = 0; i < n; i++)" in body
    assert "float before = rank[j]; change[j] = fabsf(total - before);" in body
    cand = next(c for c in p.candidates if c["name"] == "split_columns")
    # the first shape gives the launch enough threads: 4096 columns in 32x32 blocks (32 slices: 131072 threads)
    assert cand["params"]["shape"] == "32x32" and cand["launch"]["grid"][0] == "(N + (32) - 1) / (32)"
    # launch_config reads the clamped block the same way: the grid keeps dividing by the block it launches
    from mepgen.optimize.library.base import current_launch
    from mepgen.optimize.library.launch_config import LaunchConfig
    src = KernelSource((mep / "kernel.cu").read_text(), spec)
    assert 128 in LaunchConfig().space(src, spec, current_launch(spec, None))["block"]
    rw = LaunchConfig().apply(src, spec, current_launch(spec, None), {"block": 128})
    assert rw.launch["grid"] == ["(N + (128) - 1) / (128)"] and rw.launch["block"] == ["128"]


def test_split_columns_starts_with_more_slices_where_there_are_fewer_columns(plans):
    """The first shape is the widest whose slices give at least 131072 threads: few columns need many slices
    (2048 columns: 8x64), many columns few (a million: 32x4)."""
    from mepgen.optimize.library.base import current_launch
    from mepgen.optimize.library.split_columns import SplitColumns
    from mepgen.spec import load_spec
    mep = plans["col_rank"][0]
    spec = load_spec(mep / "mep.yaml")              # its own copy: the sizes change below
    src = KernelSource((mep / "kernel.cu").read_text(), spec)
    shapes = {}
    for n in (2048, 4096, 1 << 20):
        spec.sizes["N"] = n
        shapes[n] = SplitColumns().first_point(src, spec, current_launch(spec, None))["shape"]
    assert shapes == {2048: "8x64", 4096: "32x32", 1 << 20: "32x4"}


@pytest.mark.nvcc
def test_row_rewrites_compile(plans, tmp_path):
    assert_structural_rewrites_compile(plans, tmp_path)
