"""bench/launch_floor.py without a GPU: the kernel it times has the original's signature and an empty body, and its
table's geometric mean and counts come from the recorded rows."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from library_fixtures import FACES, compiles, written

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

import launch_floor  # noqa: E402
from test_library_spread_iterations import YAML  # noqa: E402


def test_the_empty_kernel_keeps_the_signature_and_helpers_and_compiles(tmp_path):
    (tmp_path / "kernel.cu").write_text(FACES)
    src, spec, _ = written(tmp_path, YAML.format(grid="1, 1, 2", block="8, 4, 4", ne=6, na=7), FACES)
    text = launch_floor.empty_text(tmp_path, spec)
    head = FACES[:FACES.index("{", FACES.index("__global__"))]
    assert text.startswith(head) and text.rstrip().endswith("{ }")
    assert "out[" not in text and "weight(" in text          # the helper stays, the body's work is gone
    compiles(tmp_path, spec, text)


def test_the_table_gives_the_geometric_mean_of_the_bounds():
    rows = [{"mep": "/w/app-a/.mepgen/meps/k1", "kernel": "k1", "original_ms": 0.040, "empty_ms": 0.004, "bound": 10.0,
             "launch": {"grid": ["2"], "block": ["256"], "shared_mem": "0"}},
            {"mep": "/w/app-a/.mepgen/meps/k2", "kernel": "k2", "original_ms": 0.0044, "empty_ms": 0.004,
             "bound": 1.1, "launch": {"grid": ["1", "2"], "block": ["64", "4"], "shared_mem": "0"}},
            {"mep": "/w/app-b/.mepgen/meps/k3", "kernel": "k3", "error": "runtime_fault: launch failed"}]
    text = launch_floor.summary(rows, "a GPU", "bench/launch_floor.py out <3 paths>")
    assert f"geometric mean of the bounds over 2 MEPs: {launch_floor.geomean([10.0, 1.1]):.2f}x" in text
    assert launch_floor.geomean([10.0, 1.1]) == pytest.approx((10.0 * 1.1) ** 0.5)
    assert "under 1.3x: 1; under 2x: 1" in text
    assert "| app-a/k2 | 1, 2 / 64, 4 | 0.0044 | 0.0040 | 1.10x |" in text
    assert "| app-b/k3 | | runtime_fault: launch failed | | |" in text
