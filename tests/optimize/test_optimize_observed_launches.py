"""The library on a kernel the application launches with several blocks: from a capture (`launch.observed`), no
candidate changes the block, a `__launch_bounds__` allows the largest block launched, block coarsening writes no
bound that holds for one grid only; from a static MEP of a loop over block sizes (`launch.varies`), no new block,
no `__launch_bounds__` and no one-round bound at all. Each refusal says why in `--dry-run`."""
from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from observed_launches_app import APP, mepgen, with_observed, without_varies


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory):
    """`cut`: the static MEP as `mep` writes it; `before`: its launch as if nothing said it changes; `after`: with
    the three configurations a capture records."""
    app = tmp_path_factory.mktemp("observed")
    (app / "main.cu").write_text(APP)
    assert mepgen("extract", ".", cwd=app).returncode == 0
    assert mepgen("mep", "mirror", cwd=app).returncode == 0
    mep = app / ".mepgen" / "meps" / "mirror" / "mep.yaml"
    text = mep.read_text()
    runs = {}
    for name, yaml_text in (("cut", text), ("before", without_varies(text)), ("after", with_observed(text))):
        mep.write_text(yaml_text)
        r = mepgen("optimize", "mirror", "--dry-run", cwd=app)
        assert r.returncode == 0, r.stderr
        runs[name] = r.stdout
    return SimpleNamespace(app=app, **runs)


def line(out: str, name: str) -> str:
    return next(ln for ln in out.splitlines() if f" {name} " in ln)


def test_no_candidate_changes_the_block(dry_run):
    assert line(dry_run.before, "launch_config").lstrip().startswith("try")
    assert line(dry_run.after, "launch_config").lstrip().startswith("refuses")
    assert "launched this kernel with 3 different blocks (64, 128, 256; launch.observed)" in \
        line(dry_run.after, "launch_config")


def test_launch_bounds_allow_the_largest_block_launched(dry_run):
    assert "__launch_bounds__(64, 2)" in line(dry_run.before, "launch_bounds")
    assert "__launch_bounds__(256, 2)" in line(dry_run.after, "launch_bounds")


def test_block_coarsening_writes_no_bound_of_one_grid(dry_run):
    assert line(dry_run.before, "coarsen_blocks").lstrip().startswith("try")
    refusal = line(dry_run.after, "coarsen_blocks")
    assert refusal.lstrip().startswith("refuses")
    assert "holds for one of the 3 different grids the application launched this kernel with" in refusal


def test_the_tuning_search_keeps_the_launch(dry_run):
    """tune_params' points with another block are refused by the proposer; the ones offered change other things."""
    assert "threads per block" in line(dry_run.before, "tune_params")        # its first point: the next block
    assert line(dry_run.after, "tune_params").lstrip().startswith("try")
    launches = [json.loads(p.read_text())["launch"]
                for p in (dry_run.app / ".mepgen" / "dryrun" / "mirror").glob("*/launch.json")]
    assert all(x is None or x["block"] == ["64"] for x in launches)
    assert not any("threads per block" in ln for ln in dry_run.after.splitlines() if " try " in ln)


def test_a_static_mep_of_the_loop_knows_its_block_changes(dry_run):
    """Without a capture the rounds' blocks are unknown: no new block, no `__launch_bounds__`, no bound that holds
    for one round's grid, each refusal saying why (launch.varies, from extract's `varies` of the site)."""
    for name in ("launch_config", "launch_bounds"):
        assert line(dry_run.cut, name).lstrip().startswith("refuses")
        assert "the launch site's block (threads) changes in the loop around it" in line(dry_run.cut, name)
    assert "is one round's: the loop around the launch site changes threads" in line(dry_run.cut, "coarsen_blocks")
    assert "threads per block" not in line(dry_run.cut, "tune_params")


def test_a_loop_over_sizes_keeps_the_launch_and_offers_bounds(tmp_path):
    """The loop changes the grid alone (`n`): no candidate changes the launch (patch would write one round's grid at
    the site), while `__launch_bounds__` of the fixed block is still offered."""
    (tmp_path / "main.cu").write_text("""
__global__ void twice(float* x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= 2.0f; }
int main() {
    float* x; cudaMalloc(&x, 4096 * sizeof(float));
    for (int n = 1024; n <= 4096; n *= 2) twice<<<(n + 255) / 256, 256>>>(x, n);
    return 0;
}
""")
    assert mepgen("extract", ".", cwd=tmp_path).returncode == 0
    assert mepgen("mep", "twice", cwd=tmp_path).returncode == 0
    assert "varies: {grid: [n]}" in (tmp_path / ".mepgen" / "meps" / "twice" / "mep.yaml").read_text()
    out = mepgen("optimize", "twice", "--dry-run", cwd=tmp_path).stdout
    for name in ("vector_elements", "coarsen", "launch_config"):
        assert "the loop around the launch site changes n each round" in line(out, name)
    assert line(out, "launch_bounds").lstrip().startswith("try")
    assert not list((tmp_path / ".mepgen" / "dryrun" / "twice").glob("*/launch.json")) or all(
        json.loads(p.read_text())["launch"] is None
        for p in (tmp_path / ".mepgen" / "dryrun" / "twice").glob("*/launch.json"))
