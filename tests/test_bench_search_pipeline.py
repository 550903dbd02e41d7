"""bench/search_pipeline.py without a GPU: the real search and library proposer on a small MEP, nvcc and the GPU
stood in by short sleeps; every mode runs the budget and reports where the time went."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from evaluate_fakes import make_mep

SCRIPT = Path(__file__).resolve().parents[1] / "bench" / "search_pipeline.py"


@pytest.mark.parametrize("mode", ["stream", "batch"])
def test_the_bench_runs_a_search_and_splits_its_time(tmp_path, mode):
    mep = make_mep(tmp_path)
    out = tmp_path / "row.json"
    done = subprocess.run([sys.executable, str(SCRIPT), str(mep), "--budget", "3", "--width", "2", "--jobs", "2",
                           "--compile-s", "0.01", "--gpu-s", "0.01", "--mode", mode, "--json", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    row = json.loads(out.read_text())
    assert row["mode"] == mode and 1 <= row["evaluations"] <= 3 and row["wall_s"] > 0
    assert row["propose_s"] > 0 and row["compile_s"] > 0 and row["gpu_s"] > 0
