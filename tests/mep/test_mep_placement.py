"""`placement` in mep.yaml: a buffer starts where the application's did, modulo 2 MiB (written by
`mepgen capture --use`, checked strictly, honoured by the harness)."""
from __future__ import annotations

import subprocess

import pytest
import yaml

from mepgen.spec import PLACEMENT_SPAN, load_spec
from mep_apps import make_app, run

SOLVE = """
    #include <cuda_runtime.h>
    #define N 256
    #define NRHS 4096
    __global__ void lower_solve(const float* L, const float* B, float* X, int n, int nrhs)
    {
        const int r = blockIdx.x * blockDim.x + threadIdx.x;
        if (r < nrhs) {
            for (int i = 0; i < n; ++i) {
                float s = B[i * nrhs + r];
                for (int j = 0; j < i; ++j) s -= L[i * n + j] * X[j * nrhs + r];
                X[i * nrhs + r] = s;
            }
        }
    }
    void solve(const float* L, const float* B, float* X) { lower_solve<<<(NRHS + 255) / 256, 256>>>(L, B, X, N, NRHS); }
"""


def _place(yaml_file, **where):
    d = yaml.safe_load(yaml_file.read_text())
    for p in d["params"]:
        if p["name"] in where:
            p["placement"] = where[p["name"]]
    yaml_file.write_text(yaml.safe_dump(d, sort_keys=False))


@pytest.fixture
def solve_mep(tmp_path):
    app = make_app(tmp_path, SOLVE)
    r = run("lower_solve", "-C", app)
    assert r.exit_code == 0, r.output
    return app, app / ".mepgen" / "meps" / "lower_solve"


def test_without_placement_the_harness_leaves_it_to_the_size(solve_mep):
    """No placement in mep.yaml: the harness puts a buffer of 2 MiB or more on a 2 MiB boundary (as cudaMalloc
    places an application's large buffers) and a smaller one where cudaMalloc does (mep_alloc's offset -1)."""
    _, mep = solve_mep
    assert all(p.placement is None for p in load_spec(mep / "mep.yaml").params)
    harness = (mep / "harness.cu").read_text()
    for name in ("L", "B", "X"):
        assert f"raw_{name} = mep_alloc(std::max<size_t>(n_{name}, 1) * sizeof(float), -1," in harness
        assert f"cudaFree(raw_{name})" in harness
    assert "const bool placed = !(offset < 0 && bytes < span);" in harness      # guards.h's mep_guarded_alloc
    assert f"mep_guarded_alloc(bytes, offset, {PLACEMENT_SPAN}, where, name)" in harness


@pytest.mark.nvcc
def test_placed_buffers_are_padded_and_offset_in_the_harness(solve_mep):
    app, mep = solve_mep
    _place(mep / "mep.yaml", B=0, X=4096)
    r = run("lower_solve", "-C", app, "--refresh")
    assert r.exit_code == 0, r.output
    spec = load_spec(mep / "mep.yaml")
    assert (spec.param("B").placement, spec.param("X").placement, spec.param("L").placement) == (0, 4096, None)
    harness = (mep / "harness.cu").read_text()
    assert "raw_X = mep_alloc(std::max<size_t>(n_X, 1) * sizeof(float), 4096," in harness
    assert "raw_B = mep_alloc(std::max<size_t>(n_B, 1) * sizeof(float), 0," in harness
    assert "raw_L = mep_alloc(std::max<size_t>(n_L, 1) * sizeof(float), -1," in harness
    built = subprocess.run(["make", "-s", "-C", str(mep)], capture_output=True, text=True)
    assert built.returncode == 0, built.stderr


@pytest.mark.parametrize("value, why", [
    (PLACEMENT_SPAN, "placement must be a byte offset"),
    (-4, "placement must be a byte offset"),
    (True, "placement"),
    ("4k", "placement"),
    (6, "does not keep 'X' aligned to its 4-byte elements"),
])
def test_a_bad_placement_names_the_key(solve_mep, value, why):
    _, mep = solve_mep
    _place(mep / "mep.yaml", X=value)
    with pytest.raises(Exception, match=why) as e:
        load_spec(mep / "mep.yaml")
    assert "placement" in str(e.value)
