"""The library on a kernel the application launched with several blocks (`launch.observed`): no candidate changes
the block, a `__launch_bounds__` allows the largest block launched, block coarsening writes no bound that holds for
one grid only; each refusal says why in `--dry-run`."""
from __future__ import annotations

import json

import pytest

from observed_launches_app import APP, mepgen, with_observed


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory):
    app = tmp_path_factory.mktemp("observed")
    (app / "main.cu").write_text(APP)
    assert mepgen("extract", ".", cwd=app).returncode == 0
    assert mepgen("mep", "mirror", cwd=app).returncode == 0
    before = mepgen("optimize", "mirror", "--dry-run", cwd=app)
    mep = app / ".mepgen" / "meps" / "mirror" / "mep.yaml"
    mep.write_text(with_observed(mep.read_text()))
    after = mepgen("optimize", "mirror", "--dry-run", cwd=app)
    assert before.returncode == 0 and after.returncode == 0, before.stderr + after.stderr
    return before.stdout, after.stdout, app


def line(out: str, name: str) -> str:
    return next(ln for ln in out.splitlines() if f" {name} " in ln)


def test_no_candidate_changes_the_block(dry_run):
    before, after, _ = dry_run
    assert line(before, "launch_config").lstrip().startswith("try")
    assert line(after, "launch_config").lstrip().startswith("refuses")
    assert "launched this kernel with 3 different blocks (64, 128, 256; launch.observed)" in line(after, "launch_config")


def test_launch_bounds_allow_the_largest_block_launched(dry_run):
    before, after, _ = dry_run
    assert "__launch_bounds__(64, 2)" in line(before, "launch_bounds")
    assert "__launch_bounds__(256, 2)" in line(after, "launch_bounds")


def test_block_coarsening_writes_no_bound_of_one_grid(dry_run):
    before, after, app = dry_run
    assert line(before, "coarsen_blocks").lstrip().startswith("try")
    refusal = line(after, "coarsen_blocks")
    assert refusal.lstrip().startswith("refuses")
    assert "holds for one of the 3 different grids the application launched this kernel with" in refusal


def test_the_tuning_search_keeps_the_launch(dry_run):
    """tune_params' points with another block are refused by the proposer; the ones offered change other things."""
    before, after, app = dry_run
    assert "threads per block" in line(before, "tune_params")        # its first point: the next block
    assert line(after, "tune_params").lstrip().startswith("try")
    launches = [json.loads(p.read_text())["launch"] for p in (app / ".mepgen" / "dryrun" / "mirror").glob("*/launch.json")]
    assert all(x is None or x["block"] == ["64"] for x in launches)
    assert not any("threads per block" in ln for ln in after.splitlines() if " try " in ln)
