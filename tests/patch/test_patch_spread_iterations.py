"""A spread_iterations winner of a captured MEP (its grid the recorded run's numbers, x times P) lands at the launch
site as the site's own grid times P, never as a number; the patched application builds and computes what it did."""
from __future__ import annotations

import json
import pytest

from mepgen.optimize.library.base import current_launch
from mepgen.optimize.library.source import KernelSource
from mepgen.optimize.library.spread_iterations import SpreadIterations
from mepgen.spec import load_spec
from library_fixtures import FACES
from test_patch_launch_elsewhere import captured, make_app, mepgen

KERNELS = "// kernels.cu: included by main.cu\n" + FACES
MAIN = """#include <cstdio>
#include <cstdlib>
#include <vector>
#include "kernels.cu"

int main(int argc, char** argv)
{
    int ne = 6, na = 7, nx = argc > 1 ? atoi(argv[1]) : 5, ny = 3;
    int n = na * NV * ne * nx * ny * 8;
    std::vector<float> h(n), s(na);
    for (int i = 0; i < na; i++) s[i] = 0.5f * (float)(i + 1);
    float *src, *out;
    cudaMalloc(&src, na * sizeof(float));
    cudaMalloc(&out, n * sizeof(float));
    cudaMemcpy(src, s.data(), na * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemset(out, 0, n * sizeof(float));
    dim3 grid((nx + 7) / 8, (ny + 3) / 4, 2);
    dim3 block(8, 4, 4);
    faces<<<grid, block>>>(src, out, ne, na, nx, ny);
    cudaMemcpy(h.data(), out, n * sizeof(float), cudaMemcpyDeviceToHost);
    double sum = 0;
    for (int i = 0; i < n; i++) sum += h[i] * (double)(i % 97);
    printf("checksum %.6f\\n", sum);
    return 0;
}
"""


@pytest.mark.nvcc
def test_a_spread_winner_lands_as_the_site_s_grid_times_p_and_builds(tmp_path):
    app = make_app(tmp_path, KERNELS, MAIN, "faces", sizes=("NX=5", "OUT_COUNT=2520"))
    mep = app / ".mepgen/meps/faces"
    launch = "{grid: ['1', '1', '2'], block: ['8', '4', '4'], shared_mem: '0'}"
    w = captured(mep, tmp_path, launch, spread="{grid: ['(1) * 8', '1', '2'], block: ['8', '4', '4'], shared_mem: '0'}")
    spec = load_spec(mep / "mep.yaml")
    rw = SpreadIterations().apply(KernelSource((mep / "kernel.cu").read_text(), spec), spec, current_launch(spec, None),
                                  {"parts": 8, "levels": 2})
    assert rw.launch["grid"] == ["(1) * 8", "1", "2"]
    (w["spread"] / "kernel.cu").write_text(rw.text)
    r = mepgen("patch", "faces", "--from", str(w["spread"] / "kernel.cu"), "--json", cwd=app)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["launch"] == ["main.cu:19: grid grid -> dim3((grid.x) * 8, grid.y, grid.z) (the "
                                              "winner's (1) * 8 over the captured grid 1)"]
    diff = (app / ".mepgen/patches/faces.diff").read_text()
    assert "+    faces<<<dim3((grid.x) * 8, grid.y, grid.z), block>>>(src, out, ne, na, nx, ny);" in diff
    assert "mepgen spread_iterations" in diff
    r = mepgen("patch", "faces", "--from", str(w["spread"] / "kernel.cu"), "--apply", "--json", cwd=app)
    assert r.returncode == 0, r.stderr + r.stdout
    assert json.loads(r.stdout)["valid"] is True
    assert "faces<<<dim3((grid.x) * 8, grid.y, grid.z), block>>>" in (app / "main.cu").read_text()
    assert mepgen("patch", "faces", "--revert", cwd=app).returncode == 0
    assert (app / "main.cu").read_text() == MAIN and (app / "kernels.cu").read_text() == KERNELS
