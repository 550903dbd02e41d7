"""`mepgen optimize --all/--top/--only` on CPU: the worker pool over a fake device list (CUDA_VISIBLE_DEVICES and
a fake nvidia-smi), a fake worker process per kernel, resume, a dying worker, the table, and --merge."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from mepgen.cli import main
from mepgen.optimize import many

from batch_apps import FAKE_WORKER, make_app, seen  # noqa: F401  (test_integrations_slurm imports them here too)


@pytest.fixture
def gpus(tmp_path, monkeypatch):
    """Four GPUs as nvidia-smi lists them; the tests choose which are visible."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text("#!/bin/sh\n" + "".join(f"echo 'GPU {i}: Fake GPU (UUID: GPU-fake-{i})'\n" for i in range(4)))
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_WORKER_LOG", str(tmp_path / "worker.log"))
    monkeypatch.setattr(many, "worker_command",
                        lambda ws, kernel, name, resume, options: [sys.executable, str(FAKE_WORKER), "optimize", kernel,
                                                                   "-C", str(ws.app_root), "--json", *options,
                                                                   *(["--resume", name] if resume else ["--run-name", name])])
    return tmp_path / "worker.log"


def run(app: Path, *args: str):
    return CliRunner().invoke(main, ["optimize", "-C", str(app), *args])


def test_one_worker_per_visible_gpu_never_two_kernels_on_one(tmp_path, gpus, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,GPU-fake-0")
    app = make_app(tmp_path, [f"k{i}" for i in range(6)])
    r = run(app, "--all", "--run-name", "night", "--budget", "5")
    assert r.exit_code == 0, r.output
    log = seen(gpus)
    assert sorted(e["kernel"] for e in log) == [f"k{i}" for i in range(6)]
    assert {e["gpu"] for e in log} == {"2", "0"}                 # both visible GPUs, by nvidia-smi's numbering
    for gpu in ("0", "2"):                                       # one kernel at a time on each
        spans = sorted((e["start"], e["end"]) for e in log if e["gpu"] == gpu)
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))
    assert all("--budget" in e["args"] and "5" in e["args"] for e in log)
    rows = many.Batch(many.Workspace(app), "night").rows()      # the rows alone show it too (a run's own record)
    for gpu in (0, 2):
        spans = sorted((r["started"], r["finished"]) for r in rows.values() if r["device"] == gpu)
        assert len(spans) >= 1 and all(a[0] < a[1] <= b[0] for a, b in zip(spans, spans[1:]))
    table = (app / ".mepgen" / "batches" / "night" / "table.md").read_text()
    assert "| kernel | original ms | MEP/app time | best ms | speedup | % of roofline | winning change | status |" in table
    assert "unroll x4 of k3" in table and "6/6 kernel(s) done" in table
    assert "| app::k5 |" in table.splitlines()[4]                # by hotspot rank (k5 ranks first)


def test_with_one_gpu_one_worker(tmp_path, gpus, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    app = make_app(tmp_path, ["a", "b", "c"])
    r = run(app, "--top", "2", "--run-name", "n1")
    assert r.exit_code == 0, r.output
    log = seen(gpus)
    assert {e["gpu"] for e in log} == {"3"} and sorted(e["kernel"] for e in log) == ["b", "c"]
    assert "on 1 GPU(s) (3)" in r.output


def test_a_dying_worker_loses_only_its_kernel_and_resume_finishes_what_is_left(tmp_path, gpus, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    app = make_app(tmp_path, ["k1", "crash_k", "broken_k", "k2", "todo_k"])
    r = run(app, "--all", "--run-name", "b")
    assert r.exit_code == 1, r.output
    rows = many.Batch(many.Workspace(app), "b").rows()
    assert rows["crash_k"]["status"] == "failed" and "signal 9" in rows["crash_k"]["error"]
    assert rows["broken_k"]["status"] == "mep_error"
    assert rows["k1"]["status"] == rows["k2"]["status"] == "done"
    assert "todo_k" not in rows and "skipping todo_k" in r.output
    first = len(seen(gpus))
    r = run(app, "--resume", "b")
    assert r.exit_code == 1, r.output                            # broken_k stays broken
    again = seen(gpus)[first:]
    assert [e["kernel"] for e in again] == ["crash_k"]           # only what was left
    rows = many.Batch(many.Workspace(app), "b").rows()
    assert rows["crash_k"]["status"] == "done"
    assert "3/4 kernel(s) done" in (app / ".mepgen" / "batches" / "b" / "table.md").read_text()


def test_only_names_kernels_and_bad_names_are_one_line(tmp_path, gpus, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    app = make_app(tmp_path, ["a", "b", "c"])
    r = run(app, "--only", "c,app::a", "--list")
    assert r.exit_code == 0 and r.output.split() == ["c", "a"]
    r = run(app, "--only", "nope")
    assert r.exit_code == 2 and "no MEP named 'nope'" in r.output
    r = run(app, "a", "--all")
    assert r.exit_code == 2


def test_no_visible_gpu_is_a_clear_error(tmp_path, gpus, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "7")
    app = make_app(tmp_path, ["a"])
    r = run(app, "--all")
    assert r.exit_code == 4 and "names none of the 4 GPU(s)" in r.output


def test_forwarded_options_are_the_single_kernel_command_s():
    assert many.forward_options(proposer_kind="llm", budget=9, time_limit=None, no_inherit=True, profile=False,
                                warmup=0) == ["--proposer", "llm", "--budget", "9", "--no-inherit", "--warmup", "0"]


def test_a_winners_row_shows_the_original_timing_its_speedup_was_judged_against():
    """The run's first timing of the original (baseline_ms) and the one a winner was judged against can differ, on a
    microsecond kernel by more than the win: the row shows the latter beside the winner's time."""
    doc = {"baseline_ms": 0.004256, "run": "r", "evaluations": 25, "stop_reason": "budget",
           "best": {"median_ms": 0.00432, "baseline_median_ms": 0.00445, "speedup": 1.03, "change": "restrict",
                    "chain": ["restrict_ldg"]}}
    row = many.row_from("k", "k", 0, 0, json.dumps(doc), 1.0, "")
    assert row["status"] == "done" and row["original_ms"] == 0.00445 and row["best_ms"] == 0.00432
    assert row["original_ms"] / row["best_ms"] > 1 and row["speedup"] == 1.03
    kept = many.row_from("k", "k", 0, 0, json.dumps({**doc, "best": None}), 1.0, "")
    assert kept["original_ms"] == 0.004256 and kept["best_ms"] == 0.004256 and kept["speedup"] is None


def test_a_failed_rows_error_keeps_the_time_limit_its_baseline_needs():
    """A baseline that cannot finish in --time-limit names the limit it needs at the end of a long line: the row
    keeps the whole line and that limit (tune gives such a hotspot a longer search; cut at 200 characters, the
    limit was lost and a 10 ms kernel on 1 GiB of input, the application's hotspot, was never optimized)."""
    line = ("mepgen: the baseline of transpose_shfl needs about 18 s (1 input set(s) of 1024 MiB, 1.7 s per checked "
            "run, 10.08 ms per launch, 65 timed launches; so far sandbox 1.2 s, build 0.9 s, inputs 4.9 s, worker "
            "start 0.8 s); give --time-limit >= 70")
    assert len(line) > 200
    row = many.row_from("k", "k", 0, 2, "", 3.0, "progress\n" + line + "\n")
    assert row["status"] == "failed" and row["error"] == line and row["needs_time_limit_s"] == 70.0
    other = many.row_from("k", "k", 0, 2, "", 3.0, "mepgen: something else\n")
    assert "needs_time_limit_s" not in other and other["error"] == "mepgen: something else"
