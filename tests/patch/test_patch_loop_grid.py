"""A launch site in a loop that shrinks its grid each round (`varies`): the library's grid-dividing rewrites are
offered there, and patch writes their grid as the function of the site's own grid (`((g) + 4 - 1) / 4` of each
round's grid), not the measured round's number; a new block there is still refused (patch/grid_function.py)."""
from __future__ import annotations

import json
import shutil
import subprocess

import pytest
import yaml

from observed_launches_app import mepgen

APP = """#include <cstdio>
__global__ void halve(float* v, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) v[i] *= 0.5f;
}

int main()
{
    const int n = 1 << 20;
    float* v;
    cudaMalloc(&v, n * sizeof(float));
    for (int left = n; left > 0; left /= 2) {
        dim3 blocks((left + 255) / 256);
        halve<<<blocks, 256>>>(v, left);
    }
    cudaDeviceSynchronize();
    printf("done\\n");
    return 0;
}
"""
DIVIDING = ("coarsen_blocks", "vector_elements", "coarsen")


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    app = tmp_path_factory.mktemp("loopgrid")
    (app / "main.cu").write_text(APP)
    assert mepgen("extract", ".", cwd=app).returncode == 0
    assert mepgen("mep", "halve", cwd=app).returncode == 0
    r = mepgen("optimize", "halve", "--dry-run", cwd=app)
    assert r.returncode == 0, r.stderr
    return app


def _winner(app, name: str, block=None):
    """The dry run's candidate `name` as a winner: its kernel.cu and a mep.yaml with its launch."""
    cand = next((app / ".mepgen" / "dryrun" / "halve").glob(f"*-{name}"))
    out = app / "winners" / name
    out.mkdir(parents=True, exist_ok=True)
    shutil.copy(cand / "kernel.cu", out / "kernel.cu")
    spec = yaml.safe_load((app / ".mepgen" / "meps" / "halve" / "mep.yaml").read_text())
    launch = json.loads((cand / "launch.json").read_text())["launch"]
    spec["launch"].update(grid=launch["grid"], block=block or launch["block"])
    (out / "mep.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    return out / "kernel.cu"


def test_the_dry_run_offers_the_grid_dividing_rewrites_at_the_loop_site(app):
    spec = yaml.safe_load((app / ".mepgen" / "meps" / "halve" / "mep.yaml").read_text())
    assert spec["launch"]["varies"] == {"grid": ["blocks"]}
    offered = {p.name.split("-", 1)[1] for p in (app / ".mepgen" / "dryrun" / "halve").iterdir()}
    assert set(DIVIDING) <= offered


@pytest.mark.parametrize("name", DIVIDING)
def test_a_divided_grid_lands_as_a_function_of_each_rounds_grid(app, name):
    r = mepgen("patch", "halve", "--from", str(_winner(app, name)), cwd=app)
    assert r.returncode == 0, r.stderr
    diff = (app / ".mepgen" / "patches" / "halve.diff").read_text()
    assert "+        halve<<<dim3(((blocks.x) + 4 - 1) / 4, blocks.y, blocks.z), 256>>>(v, left);" in diff
    assert "-        halve<<<blocks, 256>>>(v, left);" in diff
    assert "dim3 blocks((left + 255) / 256);" not in [l[1:].strip() for l in diff.splitlines() if l[:1] in "+-"]


def test_a_new_block_at_the_loop_site_is_still_refused(app):
    r = mepgen("patch", "halve", "--from", str(_winner(app, "coarsen_blocks", block=["128"])), cwd=app)
    assert r.returncode != 0
    assert "launches halve in a loop that changes blocks from one round to the next" in r.stderr


@pytest.mark.nvcc
def test_the_patched_application_compiles(app, tmp_path):
    work = tmp_path / "app"
    shutil.copytree(app, work)
    r = mepgen("patch", "halve", "--from", str(_winner(work, "coarsen_blocks")), "--apply", "--no-validate", cwd=work)
    assert r.returncode == 0, r.stderr
    done = subprocess.run(["nvcc", "-arch=sm_90", "-c", "main.cu", "-o", "main.o"], cwd=work, capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr
