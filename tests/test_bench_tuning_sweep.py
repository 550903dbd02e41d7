"""bench/tuning_sweep.py without a GPU: which axis it sweeps, and its table and verdict from recorded rows."""
from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
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
