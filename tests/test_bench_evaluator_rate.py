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


def test_the_host_is_probed_and_said_beside_the_rates(tmp_path):
    """Two calls of one tree differ by the host's speed (120 and 77 per minute, gpu_2026-11-28f): the record says
    the load and a tiny compile's time at the start and the end. An nvcc stand-in that takes 0.05 s is measured."""
    bench = load()
    fake = tmp_path / "nvcc"
    fake.write_text("#!/bin/sh\nsleep 0.05\nwhile [ $# -gt 1 ]; do shift; done\n: > \"$1\"\n")
    fake.chmod(0o755)
    h = bench.host_probe(str(fake), repeat=3)
    assert h["cores"] == os.cpu_count() and len(h["loadavg"]) == 2 and 0.05 <= h["nvcc_s"] < 1.0
    failing = tmp_path / "nvcc-broken"
    failing.write_text("#!/bin/sh\nexit 1\n")
    failing.chmod(0o755)
    assert bench.host_probe(str(failing))["nvcc_s"] is None           # no time where the compile failed
    res = {"runs": [], "modes": ["after"], "gpu": "g", "date": "d", "command": "c", "before": None, "after_rev": "r",
           "budget": 2, "time_limit": 30.0, "host_start": {**h, "loadavg": [3.5, 1.25]}, "host_end": h}
    line = next(ln for ln in bench.markdown(res).splitlines() if ln.startswith("- host:"))
    assert "at the start load average 3.5 (1 min), 1.25 (5 min), a tiny nvcc -cubin" in line and "at the end" in line
    assert not any(ln.startswith("- host:") for ln in bench.markdown({**res, "host_start": None}).splitlines())


def test_the_parts_of_the_wall_the_long_ends_and_the_lookahead_are_said():
    """Per mode, the three parts' medians (all MEPs and those < 200 us), the runs whose end exceeds END_LONG_S (a late
    winner's memcheck harness built after the search), and the lookahead's totals from the runs' trajectory lines."""
    bench = load()

    def run(ms, base, search, end, said=None):
        return {"mode": "after", "exit": 0, "baseline_ms": ms, "lookahead": said,
                "split_s": {"baseline": base, "search": search, "end": end}}
    runs = [run(0.1, 3.0, 5.0, 0.5, "lookahead: 12 proposal(s) of a next round compiled ...; 9 of them were proposed"),
            run(0.1, 3.2, 6.0, 4.0, "lookahead: 3 proposal(s) of a next round compiled ...; 3 of them were proposed"),
            run(0.15, 3.4, 7.0, 3.0),
            run(1.5, 4.0, 12.0, 1.0),
            {**run(0.1, 9.0, 9.0, 9.0), "exit": 1}]                  # a failed run is not counted
    lines = bench.parts_lines(runs, "after")
    assert lines[0].startswith("- after, all: median s (quartiles): baseline 3.3 (")
    assert "search 6.5 (" in lines[0] and "end 2.0 (" in lines[0] and "the end over 2.5 s in 2 of 4" in lines[0]
    assert lines[1].startswith("- after, < 200 us: median s (quartiles): baseline 3.2 (")
    assert "search 6.0 (" in lines[1] and "end 3.0 (" in lines[1] and "in 2 of 3" in lines[1]
    assert lines[2] == ("- after: lookahead over 2 runs: 15 proposals compiled ahead, 12 of them proposed by a next "
                        "round")
    assert bench.parts_lines(runs, "before") == []
