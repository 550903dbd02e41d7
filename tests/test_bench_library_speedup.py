"""bench/library_speedup.py without a GPU: its arguments, the groups, skips and the tables, with a fake optimize."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "bench" / "library_speedup.py"


@pytest.fixture
def bench(monkeypatch):
    spec = importlib.util.spec_from_file_location("library_speedup", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    monkeypatch.setattr(mod, "gpu_name", lambda: "fake GPU")
    return mod


def test_groups_geomeans_skips_and_deadline(bench, monkeypatch, tmp_path):
    own = tmp_path / "own_app"
    own.mkdir()
    corpus = tmp_path / "corpus"
    (corpus / "hecbench" / "src" / "hellinger-cuda").mkdir(parents=True)     # the only corpus app present
    speed = {"k1": 4.0, "k2": 1.0, "hellinger": 9.0}
    prepared = []

    def prepare(path, work, sizes, name=None, ids=None):
        prepared.append((path.name, name, tuple(sizes)))
        if ids is not None:
            assert ids == ["hellinger"]              # a corpus app: only its listed kernels are cut
        if path.name == "own_app":
            return [(path, "k1"), (path, "k2"), (path, "k3"), (path, "k4")]
        return [(path, "hellinger"), (path, "other")]

    monkeypatch.setattr(bench, "prepare", prepare)
    monkeypatch.setattr(bench, "open_todo", lambda app, mid: 2 if mid == "k3" else 0)
    dropped = []
    monkeypatch.setattr(bench, "drop_data", lambda mep: dropped.append(mep.name))
    monkeypatch.setattr(bench, "work_bytes", lambda app, mid: 3_000_000 if mid == "k1" else None)
    calls = []

    def run(app, mid, budget, seconds):
        calls.append((mid, budget, seconds))
        if mid == "k4":
            return {"status": "failed", "error": ["mepgen: build failed"]}
        return {"status": "ok", "speedup": speed[mid], "baseline_ms": 1.5, "evaluations": 3,
                "change": "tile | things" if mid == "k1" else "", "seconds": 9.6 if mid == "k1" else None,
                "stop_reason": "time limit reached (10 s): 2 s left, one candidate takes about 4 s" if mid == "k1"
                else "candidate budget reached (5)"}

    monkeypatch.setattr(bench, "run_optimize", run)
    out = tmp_path / "out"
    assert bench.main([str(out), str(own), "--corpus", str(corpus), "--budget", "5", "--seconds", "7",
                       "--size", "N=64", "--hbm-gbs", "2000", "--seconds-per-gb", "1000"]) == 0
    # every kernel of an own app; only the listed kernels of a corpus app; the todo one skipped, not run
    assert [c[0] for c in calls] == ["k1", "k2", "k4", "hellinger"]
    assert calls[0][1:] == (5, 10.0) and calls[1][1:] == (5, 7.0)     # k1's 3 MB add 3 s at 1000 s per GB
    assert dropped == ["k1", "k2", "k3", "k4", "hellinger"]            # each MEP's data freed once it is done
    assert ("own_app", f"own.{tmp_path.name}.own_app", ("N=64",)) in prepared
    data = json.loads((out / "library_speedup.json").read_text())
    assert data["geomean_per_group"]["own"] == pytest.approx(2.0)          # sqrt(4 * 1); k4 failed, k3 skipped
    assert data["geomean_per_group"]["corpus"] == pytest.approx(9.0)
    assert data["geomean_per_group"]["corpus LA"] == pytest.approx(9.0)      # hellinger's class
    assert data["geomean"] == pytest.approx((4 * 1 * 9) ** (1 / 3))
    md = (out / "library_speedup.md").read_text()
    assert "- own: geometric-mean speedup over 2 kernel(s): **2.00x**; 2 not timed" in md
    assert "- corpus LA: geometric-mean speedup over 1 kernel(s): **9.00x**" in md
    assert "| own |  | own_app/k3 | skipped mep.yaml has 2 open todo item(s) | |  | | | |  | | |" in md
    # 3 MB at 2000 GB/s: 1.5 us; the original's 1.5 ms is 1000x that, the best (4x faster) 250x
    # the seconds a run took against its limit, and why it stopped (a kernel that evaluated few candidates says why)
    assert "| own |  | own_app/k1 | 4.00x | 1.5 | 0.0015 | 1000.00 | 250.00 | 3 | 10 (10) | time limit reached (10 s) | " \
           "tile / things |" in md
    assert "| own |  | own_app/k2 | 1.00x | 1.5 |  |  |  | 3 |  | candidate budget reached (5) | none faster |" in md
    # corpus apps missing from ROOT are listed, not silently dropped
    assert "| corpus |  | minkowski-cuda | no MEP not a folder | |  | | | |  | | |" in md

    calls.clear()
    assert bench.main([str(tmp_path / "late"), str(own), "--deadline", "-1"]) == 0
    assert calls == []
    assert "not run past the -1 s deadline" in (tmp_path / "late" / "library_speedup.md").read_text()


def test_bad_arguments_are_one_line_errors(bench, tmp_path, capsys):
    for argv in ([str(tmp_path / "o"), str(tmp_path / "missing")], [str(tmp_path / "o")],
                 [str(tmp_path / "o"), "--corpus", str(tmp_path)], [str(tmp_path / "o"), str(tmp_path), "--size", "N"]):
        with pytest.raises(SystemExit) as e:
            bench.main(argv)
        assert e.value.code == 2
    err = capsys.readouterr().err
    assert "not a folder" in err and "nothing to run" in err and "holds neither" in err and "not SYM=N" in err


def test_each_row_keeps_the_search_path_of_its_run(bench, tmp_path):
    """The run folder stays on the machine that ran the benchmark: the row keeps, from its trajectory.jsonl, each
    attempt's parent, chain with parameters, flags, status and speedup (events and broken lines are skipped)."""
    run = tmp_path / "run"
    run.mkdir()
    lines = [{"kind": "attempt", "id": "c0001", "parent": None, "transformations": [{"name": "tile_matmul",
              "params": {"tile": 64}}], "nvcc_flags": [], "status": "ok", "speedup": 0.9, "decision": "slower"},
             {"kind": "event", "event": "stopped", "message": "time limit"},
             {"kind": "attempt", "id": "c0002", "parent": "c0001", "transformations": [
                 {"name": "nvcc_flags", "params": {"flags": "-use_fast_math"}}], "nvcc_flags": ["-use_fast_math"],
              "status": "wrong_result", "speedup": None, "decision": None}]
    (run / "trajectory.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n{not json\n")
    got = bench.attempts(str(run))
    assert got == [{"id": "c0001", "parent": None, "chain": [["tile_matmul", {"tile": 64}]], "nvcc_flags": [],
                    "status": "ok", "speedup": 0.9, "decision": "slower"},
                   {"id": "c0002", "parent": "c0001", "chain": [["nvcc_flags", {"flags": "-use_fast_math"}]],
                    "nvcc_flags": ["-use_fast_math"], "status": "wrong_result", "speedup": None, "decision": None}]
    assert bench.attempts(None) == [] and bench.attempts(str(tmp_path / "missing")) == []
