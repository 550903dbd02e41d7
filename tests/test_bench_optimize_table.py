"""bench/optimize_table.py: the criterion-1 table counts every launched kernel, a failure or a kept original as
1.0x (the user gets nothing from it), apart from the mean over the kernels optimize finished."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench" / "optimize_table.py"


def test_failures_count_as_nothing_gained(tmp_path):
    (tmp_path / "a.json").write_text(json.dumps([
        {"kernel": "k1", "status": "done", "original_ms": 2.0, "speedup": 4.0, "chain": ["coarsen", "unroll"]},
        {"kernel": "k2", "status": "done", "original_ms": 1.0, "speedup": None, "chain": None},
        {"kernel": "k3", "status": "mep_error", "error": "12 errors detected | in entry.cu"},
    ]))
    (tmp_path / "b.json").write_text(json.dumps({"rows": [
        {"kernel": "k4", "status": "done", "original_ms": 0.5, "speedup": 2.0, "chain": ["unroll"]},
        {"kernel": "k5", "status": "fidelity", "error": "ratio 1.6"}]}))
    (tmp_path / "c.json").write_text("")          # optimize printed nothing: no ready MEP
    out = tmp_path / "t.md"
    done = subprocess.run([sys.executable, str(BENCH), str(out), f"a={tmp_path / 'a.json'}",
                           f"b={tmp_path / 'b.json'}", f"c={tmp_path / 'c.json'}", "--none", "c=1:no complete MEP from capture"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    text = out.read_text()
    # (4 * 1 * 1 * 2 * 1 * 1) ** (1/6) = 8 ** (1/6); over the three finished: (4 * 1 * 2) ** (1/3) = 2
    assert "**6 kernels launched: geometric mean 1.414x**" in text
    assert "over the 3 that optimize finished: 2.000x" in text
    assert "| mep_error | 1 |" in text and "| fidelity | 1 |" in text and "| no complete MEP from capture | 1 |" in text
    assert "| coarsen | 1 | 66.7% |" in text and "| unroll | 1 | 33.3% |" in text
    assert "12 errors detected / in entry.cu" in text            # a `|` in a reason does not break the table
    assert "| a | k2 | done | 1.0000 | 1.00x | (original kept) |" in text


def test_a_kernel_left_out_of_a_second_mean_is_named_with_its_reason(tmp_path):
    (tmp_path / "a.json").write_text(json.dumps([
        {"kernel": "k1", "status": "done", "original_ms": 2.0, "speedup": 1000.0, "chain": ["unroll"]},
        {"kernel": "k2", "status": "done", "original_ms": 1.0, "speedup": 4.0, "chain": ["coarsen"]},
        {"kernel": "k3", "status": "mep_error", "error": "no output"}]))
    out = tmp_path / "t.md"
    run = lambda *extra: subprocess.run([sys.executable, str(BENCH), str(out), f"a={tmp_path / 'a.json'}", *extra],
                                        capture_output=True, text=True)
    done = run("--without", "a:k1:no output to compare")
    assert done.returncode == 0, done.stderr
    text = out.read_text()
    assert "**3 kernels launched: geometric mean 15.874x**" in text            # (1000 * 4 * 1) ** (1/3)
    assert "**Without a k1 (no output to compare): 2 kernels, geometric mean 2.000x**; over the 1 finished: " \
           "4.000x." in text
    bad = run("--without", "a:k9:typo")
    assert bad.returncode != 0 and "--without names no row: a:k9" in bad.stderr
