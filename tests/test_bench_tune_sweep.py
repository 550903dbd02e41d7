"""bench/tune_sweep.py --backends-only without a GPU: the capture's outcomes become the table's kernels, and only
the complete captured MEPs go to `mepgen run` on both backends."""
from __future__ import annotations

import importlib.util
import json
import sys
import types
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench"


def load():
    sys.path.insert(0, str(BENCH))
    try:
        spec = importlib.util.spec_from_file_location("tune_sweep", BENCH / "tune_sweep.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod
    finally:
        sys.path.remove(str(BENCH))


def test_backends_only_runs_the_complete_captured_meps_on_both_backends(tmp_path, monkeypatch):
    bench = load()
    outcomes = [{"kernel": "a", "outcome": "captured", "mep": str(tmp_path / ".mepgen/meps/a"), "complete": True},
                {"kernel": "b", "outcome": "captured", "mep": str(tmp_path / ".mepgen/meps/b"), "complete": False},
                {"kernel": "c", "outcome": "not_launched"}]
    calls = []
    monkeypatch.setattr(bench, "sh", lambda cmd, cwd, timeout, env=None: (calls.append(cmd) or
                                                                          (0, "log\n" + json.dumps(outcomes), "", 1.0)))
    ran = {}
    monkeypatch.setattr(bench, "backends", lambda app, ids, env: ran.setdefault("ids", ids) and {
        i: {b: {"exit": 0, "status": "ok", "backend": b, "seconds": 1.0, "why": None} for b in ("native", "pycuda")}
        for i in ids})
    a = types.SimpleNamespace(max_bytes="16G", app_timeout=60, keep=True)
    row = bench._backends_only({"app": "x"}, tmp_path, "./main", ["2"], a, {})
    assert calls[0][3:6] == ["capture", "--all", "--use"] and calls[0][-4:] == ["16G", "--", "./main", "2"]
    assert ran["ids"] == ["a"]
    summary = bench.summarize([row])
    assert (summary["captured"], summary["complete"], summary["verify_both"]) == (2, 1, 1)
    assert "| x | 2/1 | 1/1 |" in bench.table([row], {"summary": summary, "date": "d", "gpu": "g", "command": "c"})


def test_a_capture_that_says_nothing_is_an_error_row(tmp_path, monkeypatch):
    bench = load()
    monkeypatch.setattr(bench, "sh", lambda cmd, cwd, timeout, env=None: (2, "", "mepgen: no kernel launched", 1.0))
    a = types.SimpleNamespace(max_bytes=None, app_timeout=60, keep=True)
    row = bench._backends_only({"app": "x"}, tmp_path, "./main", [], a, {})
    assert row["error"] == "capture exit 2: mepgen: no kernel launched" and "backends" not in row
