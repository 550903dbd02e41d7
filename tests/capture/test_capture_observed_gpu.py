"""A capture records every configuration the application launched a kernel with (CUPTI's activity records), and the
captured MEP carries them as `launch.observed`: one site in a loop over blocks of 64, 128 and 256 threads."""
from __future__ import annotations

import subprocess

import pytest

from mepgen.capture.convert import load_manifest
from mepgen.spec import load_spec
from observed_launches_app import APP, mepgen

pytestmark = [pytest.mark.gpu, pytest.mark.nvcc]


def test_the_loops_three_launches_are_observed(tmp_path):
    (tmp_path / "main.cu").write_text(APP)
    r = subprocess.run(["nvcc", "-O2", "-o", "app", "main.cu"], cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert mepgen("extract", ".", cwd=tmp_path).returncode == 0
    r = mepgen("capture", "mirror", "--use", "--", "./app", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    mep = tmp_path / ".mepgen" / "meps" / "mirror"
    configs = load_manifest(mep / "data" / "captured")["app_gpu"]["configs"]
    assert sorted((c["block"][0], c["grid"][0], c["launches"]) for c in configs) == \
        [(64, 16384, 1), (128, 8192, 1), (256, 4096, 1)]
    spec = load_spec(mep / "mep.yaml")
    assert spec.launch.observed_blocks() == [(64, 1, 1), (128, 1, 1), (256, 1, 1)]
    r = mepgen("optimize", "mirror", "--dry-run", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "__launch_bounds__(256, 2)" in r.stdout
    assert "launched this kernel with 3 different blocks" in r.stdout
