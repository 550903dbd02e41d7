"""bench/evaluator_rate.py without a GPU: where a run's wall time went (baseline, search, end) and its table cell."""
from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "bench" / "evaluator_rate.py"


def load():
    spec = importlib.util.spec_from_file_location("evaluator_rate", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_wall_splits_at_the_search_s_start_and_its_last_candidate(tmp_path):
    bench = load()
    (tmp_path / "run.json").write_text("{}")
    os.utime(tmp_path / "run.json", (1000.0 + 6.0, 1000.0 + 6.0))     # the search started 6 s after the command
    recs = [{"time": 1000.0 + 9.0}, {"time": 1000.0 + 14.5}]
    assert bench.split(tmp_path, recs, 1000.0, 16.0) == {"baseline": 6.0, "search": 8.5, "end": 1.5}
    assert bench.split(tmp_path / "none", recs, 1000.0, 16.0) is None        # refused before the search
    run = {"mep": "k", "app": "/a/app", "mode": "after", "exit": 0, "wall_s": 16.0, "verified": 2, "evaluations": 2,
           "verified_per_min": 7.5, "baseline_ms": 0.1, "backend": "pycuda", "speedup": 1.2,
           "split_s": bench.split(tmp_path, recs, 1000.0, 16.0), "phases": dict.fromkeys(bench.PHASES, 0.1)}
    table = bench.markdown({"runs": [run], "modes": ["after"], "gpu": "g", "date": "d", "command": "c",
                            "before": None, "after_rev": "r", "budget": 2, "time_limit": 30.0})
    assert "| app/k | 0.1 | pycuda / 16.0 (6.0 + 8.5 + 1.5) / 2 of 2 / **7.5** /" in table
    json.dumps(run)
