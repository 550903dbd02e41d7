"""A launch site in a loop that shrinks its grid each round while the kernel's guard stays (`i > k && i < n`, an LU
elimination step): a static MEP reproduces the first round, so a grid divided for it (block coarsening, thread
coarsening) would be that round's. Its in-kernel bound reads the first round's `k` as a number, and a divided grid at
a later round reaches rows the original never touched. The library offers no such rewrite there and patch refuses
one, each saying why."""
from __future__ import annotations

import re

import pytest
import yaml

from observed_launches_app import mepgen, variant

APP = """#include <cstdio>
#define N 1024
__global__ void eliminate(int n, float* a, int k)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    int i = blockIdx.y * blockDim.y + threadIdx.y;
    if ((i > k) && (j > k) && (i < n) && (j < n))
        a[i * n + j] = a[i * n + j] - a[i * n + k] * a[k * n + j];
}

int main()
{
    float* a;
    cudaMalloc(&a, N * N * sizeof(float));
    dim3 block(32, 8);
    dim3 grid(1, 1);
    for (int k = 0; k < N; k++) {
        grid.x = (N - (k + 1) + block.x - 1) / block.x;
        grid.y = (N - (k + 1) + block.y - 1) / block.y;
        eliminate<<<grid, block>>>(N, a, k);
    }
    cudaDeviceSynchronize();
    printf("done\\n");
    return 0;
}
"""


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    app = tmp_path_factory.mktemp("loopgrid")
    (app / "main.cu").write_text(APP)
    assert mepgen("extract", ".", cwd=app).returncode == 0
    assert mepgen("mep", "eliminate", cwd=app).returncode == 0
    return app


def test_the_dry_run_divides_no_grid_at_the_loop_site(app):
    assert "varies: {grid: [grid]}" in (app / ".mepgen" / "meps" / "eliminate" / "mep.yaml").read_text()
    out = mepgen("optimize", "eliminate", "--dry-run", cwd=app).stdout
    row = next(ln for ln in out.splitlines() if re.match(r"\s+(try|refuses)\s+coarsen_blocks\b", ln))
    assert row.lstrip().startswith("refuses"), row
    assert "the loop around the launch site changes grid" in row


def test_patch_refuses_a_divided_grid_there(app):
    def divided(y: str) -> str:         # the grid along y over 4, as the grid-dividing rewrites write it
        spec = yaml.safe_load(y)
        spec["launch"]["grid"][1] = f"(({spec['launch']['grid'][1]}) + 4 - 1) / 4"
        return yaml.safe_dump(spec, sort_keys=False)

    def coarsened(t: str) -> str:       # 4 consecutive blocks along y per block, as block coarsening writes it
        out = t.replace("    int i = blockIdx.y * blockDim.y + threadIdx.y;\n",
                        "    for (unsigned c = 0; c < 4; ++c) {\n"
                        "    int i = (blockIdx.y * 4 + c) * blockDim.y + threadIdx.y;\n")
        out = out.replace("a[k * n + j];\n", "a[k * n + j];\n    }\n")
        assert out.count("blockIdx.y * 4 + c") == 1 and out != t
        return out

    v = variant(app, "coarsened", coarsened, divided, kernel="eliminate")
    r = mepgen("patch", "eliminate", "--from", str(v), cwd=app)
    assert r.returncode != 0
    assert "launches eliminate in a loop that changes grid from one round to the next" in r.stderr
