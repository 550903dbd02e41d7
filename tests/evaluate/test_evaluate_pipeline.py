"""The evaluator end to end with real processes: a fake harness (no GPU) that misbehaves on request."""
from __future__ import annotations

import json

import pytest

from evaluate_fakes import install, make_mep, variant
from mepgen.errors import MepgenError
from mepgen.evaluate import Evaluator, Options
from mepgen.evaluate.batch import evaluate_many
from mepgen.evaluate.journal import Journal
from mepgen.spec import load_spec


@pytest.fixture
def ev(tmp_path, monkeypatch):
    install(monkeypatch)
    mep = make_mep(tmp_path)
    e = Evaluator(load_spec(mep / "mep.yaml"), mep, Options(reps=20, rounds=3, run_timeout=5.0))
    e.prepare()
    yield e
    e.close()


def test_references_are_computed_once_and_cached(ev):
    ref_dirs = sorted(ev.store.root.glob("ref/*/set*"))
    assert len(ref_dirs) == 3
    stamp = [(d / "y.npy").stat().st_mtime_ns for d in ref_dirs]
    again = Evaluator(ev.spec, ev.mep_dir, ev.opts)
    again.prepare()
    assert [(d / "y.npy").stat().st_mtime_ns for d in ref_dirs] == stamp
    assert all((d / "meta.json").is_file() for d in ref_dirs)
    # the candidate's data folder holds inputs only, never the references
    assert sorted(p.name for p in ev.sets[0].data_dir.glob("*.npy")) == ["x.npy", "y.npy"]


def test_baseline_is_verified_and_timed(ev):
    base = ev.baseline_result()
    assert base.status == "ok" and base.stage == "done"
    assert base.timed.launches == 60 and base.timed.rounds == 3
    assert base.timed.median_ms == pytest.approx(1.0, rel=0.02)
    assert base.timed.gbps == pytest.approx(3 * 1048576 * 4 / 1e-3 / 1e9, rel=0.02)


def test_a_work_estimate_the_original_beats_is_no_floor(tmp_path, monkeypatch):
    """work.bytes counts every buffer once; a kernel that writes only the rows an index buffer names moves far
    less, and the original itself then 'beats the peak'. That is the estimate's fault, not a cheat: the original
    is timed and ok, the peak check is off with a note, and a candidate is not rejected by it either."""
    install(monkeypatch)
    mep = make_mep(tmp_path)
    spec = load_spec(mep / "mep.yaml")
    spec.work.bytes = str(1 << 40)                 # a terabyte in a millisecond: beyond any GPU
    e = Evaluator(spec, mep, Options(reps=20, rounds=3, run_timeout=5.0))
    e.prepare()
    try:
        base = e.baseline_result()
        assert base.status == "ok", base.feedback()
        assert any("no lower bound" in n for n in base.notes)
        res = evaluate_many(e, [("faster", variant(e.mep_dir, "faster"))])[0]
        assert res.status != "impossible" and res.faster
    finally:
        e.close()


@pytest.mark.parametrize("mode, status, stage, evidence", [
    ("skip", "wrong_result", "verify", "NaN"),     # y is inout: never poisoned, so what is left is data (NaN here)
    ("nan", "wrong_result", "verify", "1 NaN"),
    ("loose", "wrong_result", "verify", "max rel err"),
    ("const", "wrong_result", "verify", "elements wrong"),
    ("racy", "wrong_result", "time", "after timing"),
    ("changes_inputs", "wrong_result", "verify", "x: the kernel modified this input buffer"),
    ("segv", "runtime_fault", "run", "SIGSEGV"),
    ("illegal", "runtime_fault", "run", "illegal_address"),
    ("hang", "runtime_fault", "run", "timeout"),
    ("silent", "runtime_fault", "run", "without a result line"),
    ("impossible", "impossible", "time", "must cross DRAM"),
    ("escape", "impossible", "time", "escaped the timed stream"),
    ("cached", "wrong_result", "time", "input set 1, after timing"),
])
def test_bad_candidates_are_rejected_with_evidence(ev, mode, status, stage, evidence):
    res = evaluate_many(ev, [(mode, variant(ev.mep_dir, mode))])[0]
    assert (res.status, res.stage) == (status, stage)
    assert evidence in res.feedback()
    assert not res.faster


def test_decisions_for_timed_candidates(ev):
    modes = ["faster", "slightly_faster", "slower", "good"]
    results = evaluate_many(ev, [(m, variant(ev.mep_dir, m)) for m in modes])
    got = {r.name: r.timed.decision for r in results}
    assert got == {"faster": "faster", "slightly_faster": "same", "slower": "slower", "good": "same"}
    fast = results[0]
    assert fast.faster and fast.timed.speedup == pytest.approx(1 / 0.7, rel=0.02)
    assert len(fast.timed.baseline_round_medians_ms) == 3


def test_rules_reject_before_compiling(ev):
    v = variant(ev.mep_dir, "faster", "#define cudaEventElapsedTime(ms, a, b) (*(ms) = 0.001f, cudaSuccess)\n")
    res = evaluate_many(ev, [("cheat", v)])[0]
    assert res.status == "rejected_by_rules" and res.compile is None
    assert "redefines a CUDA" in res.feedback()


def test_rules_on_a_worker_process_reject_the_same(ev):
    """optimize on a machine of many cores lints on worker processes (lint_workers.py): the same verdicts."""
    from mepgen.evaluate.batch import Pipeline
    cheat = variant(ev.mep_dir, "faster", "__device__ float mepgen_kept[64];\n")
    with Pipeline(ev, lint_workers=1) as pipe:
        assert pipe.lints is not None and pipe.lints.alive == 1
        res, good = [f.result() for f in (pipe.submit("cheat", cheat),
                                          pipe.submit("good", variant(ev.mep_dir, "good")))]
    assert res.status == "rejected_by_rules" and res.stage == "lint" and res.compile is None
    assert "device-global state" in res.feedback() and "lint" in res.phases
    assert good.status == "ok"


def test_compile_failure_is_a_result(ev):
    res = evaluate_many(ev, [("broken", variant(ev.mep_dir, "good", "#error nope\n"))])[0]
    assert res.status == "compile_failed" and "#error" in res.feedback()


def test_results_are_cached_and_journal_resumes(ev, tmp_path):
    path = tmp_path / "results.jsonl"
    v = variant(ev.mep_dir, "faster")
    first = evaluate_many(ev, [("a", v)], Journal(path, "cg.axpy", "h"))[0]
    lines = path.read_text().splitlines()
    assert json.loads(lines[0])["schema"] == "mepgen.evaluate.results" and len(lines) == 2
    resumed = Journal(path, "cg.axpy", "h")
    again = evaluate_many(ev, [("a", v)], resumed)[0]
    assert again.seconds == first.seconds and again.timed.median_ms == first.timed.median_ms
    assert len(path.read_text().splitlines()) == 2     # nothing re-run, nothing appended
    with pytest.raises(MepgenError, match="results.jsonl: results for spec_sha256"):
        Journal(path, "cg.axpy", "other")


def test_reference_with_poison_bits_in_an_inout_buffer_is_data(tmp_path, monkeypatch):
    """Half of y still holds the float poison's bits; y is inout, which the harness resets from its inputs and never
    poisons, so those bits are data, not unwritten elements: here NaN, an MEP problem of its own (that `out`
    buffers' poison is counted as unwritten: test_evaluate_verify)."""
    install(monkeypatch)
    mep = make_mep(tmp_path)
    (mep / "kernel.cu").write_text((mep / "kernel.cu").read_text() + "\n// MODE: skip\n")
    e = Evaluator(load_spec(mep / "mep.yaml"), mep, Options(run_timeout=5.0))
    with pytest.raises(MepgenError, match="writes 524288 NaN/Inf values into 'y'"):
        e.prepare()


def test_no_gpu_is_one_clear_error_after_compiling(tmp_path, monkeypatch):
    install(monkeypatch)
    import mepgen.evaluate.evaluator as ev_mod
    monkeypatch.setattr(ev_mod, "list_gpus", lambda: ([], "nvidia-smi is not on PATH"))
    mep = make_mep(tmp_path)
    e = Evaluator(load_spec(mep / "mep.yaml"), mep, Options())
    built = e.compile_baseline()
    assert built.artifact.is_file()
    with pytest.raises(MepgenError, match="no CUDA device: nvidia-smi is not on PATH") as err:
        e.prepare()
    assert err.value.exit_code == 4


def test_candidates_are_timed_against_the_original_timed_once_and_say_where_their_time_went(ev):
    """The original is timed once (baseline_result); a candidate's session runs one process of its control launches
    and stops at the second round when the verdict is settled (with rounds of MIN_REPS launches, a process each);
    each result records its phases."""
    from mepgen.evaluate import plan
    ev.plan.reps = plan.MIN_REPS
    base = ev.baseline_result()
    stored = ev.workers[0].stored
    assert stored is not None and stored.rounds == [list(r) for r in stored.rounds] and len(stored.rounds) == 3
    res = evaluate_many(ev, [("faster", variant(ev.mep_dir, "faster"))])[0]
    assert res.timed.decision == "faster" and ev.workers[0].stored is stored           # not timed again
    assert res.timed.baseline_median_ms == pytest.approx(base.timed.median_ms)
    assert len(res.timed.round_medians_ms) == 2 and any("timed in 2 of 3 round(s)" in n for n in res.notes)
    assert any("control launch(es) of the original" in n for n in res.notes)
    folders = sorted(p.name for p in (ev.store.work_dir / "w0" / "time").iterdir())
    assert folders == ["round0-baseline", "round0-candidate", "round1-candidate"]
    assert {"lint", "compile", "verify", "time", "checks"} <= set(res.phases)
    # lint and compile ran before check() (on a compile thread); the rest is the GPU's side, res.seconds
    assert sum(v for k, v in res.phases.items() if k not in ("lint", "compile")) == pytest.approx(res.seconds, abs=0.01)


def test_a_short_candidate_runs_every_round_in_one_process_on_the_native_harness(ev):
    """Rounds of many launches (a short kernel): the control process and one candidate process whose launches are
    cut into the plan's rounds, instead of a process a round."""
    ev.baseline_result()
    res = evaluate_many(ev, [("slower", variant(ev.mep_dir, "slower"))])[0]
    assert res.timed.decision == "slower" and len(res.timed.round_medians_ms) == 3 and res.timed.launches == 3 * 20
    folders = sorted(p.name for p in (ev.store.work_dir / "w0" / "time").iterdir())
    assert folders == ["round0-baseline", "round0-candidate"]
