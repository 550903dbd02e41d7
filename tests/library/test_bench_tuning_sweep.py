"""bench/tuning_sweep.py without a GPU: which axis it sweeps, and its table and verdict from recorded rows."""
from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

import tuning_sweep  # noqa: E402


def test_the_sweep_axis_is_the_block_else_a_tunable_size():
    assert tuning_sweep.sweep_axis({"block": [64, 128], "regs": [0, 32]}) == "block"
    assert tuning_sweep.sweep_axis({"size:TILE": [8, 16], "bounds": [0, 1]}) == "size:TILE"
    assert tuning_sweep.sweep_axis({"regs": [0, 32]}) is None


def test_the_table_counts_the_mep_within_5_percent():
    rows = [
        {"mep": "/w/apps/app1/.mepgen/meps/k1", "kernel": "k1", "axis": "block", "sweep": [{}] * 5, "search": [{}] * 12,
         "sweep_best": 0.80, "search_best": 0.83, "sweep_best_point": {"block": 128},
         "search_best_point": {"block": 128, "regs": 64}, "within_5pct": 0.83 <= 0.80 * tuning_sweep.NEAR},
        {"mep": "/w/apps/app1/.mepgen/meps/k2", "kernel": "k2", "axis": "block", "sweep": [{}] * 5, "search": [{}] * 12,
         "sweep_best": 0.70, "search_best": 0.90, "sweep_best_point": {"block": 64},
         "search_best_point": {"block": 512}, "within_5pct": False},
        {"mep": "/w/apps/app2/.mepgen/meps/k3", "kernel": "k3", "skipped": "2 open todo item(s)"},
    ]
    text = tuning_sweep.summary(rows, "a GPU", "python3 bench/tuning_sweep.py out m")
    assert "**search within 5 % of the sweep's best: 1 of 2 MEPs**" in text
    assert "| app1/k1 | block | 0.800 (128) | 0.830 ({'block': 128, 'regs': 64}) | 5 / 12 | yes |" in text
    assert "| app1/k2 | block | 0.700 (64) | 0.900 ({'block': 512}) | 5 / 12 | NO |" in text
    assert "| app2/k3 | - | 2 open todo item(s) | | | |" in text


def test_one_mep_sweep_and_search_with_a_fake_evaluator(tmp_path, monkeypatch):
    """The whole per-MEP path (space, sweep, ask/tell search, verdict) on a hand-written MEP, the evaluator replaced
    by costs that depend on the block and the register cap: the search must find the sweep's best block."""
    import argparse
    import mepgen.evaluate as evaluate
    from mepgen.evaluate.results import EvalResult, Timed
    from mepgen.optimize import candidates
    from test_library_tunables import PLAIN, YAML

    mep = tmp_path / "mep"
    mep.mkdir()
    (mep / "mep.yaml").write_text(YAML.format(name="twice", sizes="N: 65536, BS: 256", grid="(N + BS - 1) / BS",
                                              block="BS", count="N"))
    (mep / "kernel.cu").write_text(PLAIN)

    class FakeEvaluator:
        def __init__(self, *a, **k):
            pass

        def prepare(self):
            pass

        def close(self):
            pass

    def fake_evaluate(ev, mep_dir, spec, proposals, workdir, journal=None, on_result=None):
        out = []
        for p in proposals:
            block = int(p.launch["block"][0]) if p.launch else 256
            cost = {64: 1.3, 128: 0.9, 256: 1.0, 512: 0.8, 1024: 1.1}[block]
            cost *= 0.97 if "-maxrregcount=64" in p.nvcc_flags else 1.0
            out.append(EvalResult(name="c", key="k", backend="fake", timed=Timed(
                median_ms=cost, spread=0.01, min_ms=cost, max_ms=cost, launches=10, rounds=2, speedup=1.0 / cost)))
        return out

    monkeypatch.setattr(evaluate, "Evaluator", FakeEvaluator)
    monkeypatch.setattr(candidates, "evaluate", fake_evaluate)
    args = argparse.Namespace(budget=12, batch=4, rounds=2, backend="native")
    row = tuning_sweep.one(mep, args, tmp_path / "work")
    assert row["axis"] == "block" and len(row["sweep"]) == 5
    assert abs(row["sweep_best"] - 0.8) < 1e-9 and row["sweep_best_point"]["block"] == 512
    assert len(row["search"]) == 12 and row["within_5pct"]
    assert row["search_best"] <= row["sweep_best"]          # the register cap on top of the best block
