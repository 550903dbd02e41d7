"""The native backend with a harness that digests its outputs (output_digest.py, templates/harness/digest.h): an output
bit for bit the reference is not written back, the parent takes it as matched only on both digest lanes (lane B
never reaches the harness), the verdicts are those of the host comparison, and the harness checks its loaded
inputs itself. The fake harness computes the digests in numpy."""
from __future__ import annotations

import json

import pytest

from evaluate_fakes import install, make_mep, variant
from mepgen.evaluate import Evaluator, Options
from mepgen.evaluate import output_digest as digest
from mepgen.evaluate.batch import evaluate_many
from mepgen.spec import load_spec


def _evaluator(tmp_path, monkeypatch, digests: bool, prepare: bool = True) -> Evaluator:
    install(monkeypatch)
    mep = tmp_path / ("digests" if digests else "host") / "cg.axpy"
    if not mep.is_dir():
        mep = make_mep(mep.parent, digests=digests)
    e = Evaluator(load_spec(mep / "mep.yaml"), mep, Options(reps=20, rounds=3, run_timeout=5.0))
    if prepare:
        e.prepare()
    return e


@pytest.fixture
def ev(tmp_path, monkeypatch):
    e = _evaluator(tmp_path, monkeypatch, True)
    yield e
    e.close()


def test_the_references_digests_come_from_the_original_and_only_lane_a_goes_out(ev):
    be = ev.workers[0].backend
    assert be.digested
    for k in range(ev.k):
        assert be.ref_digests[k] == {"y": list(digest.of_bytes(ev.refs[k]["y"]))}
    a0, b0 = be.ref_digests[0]["y"]
    a1, b1 = be.ref_digests[1]["y"]
    assert be._skip_flags(0, 1) == ["--skip", f"y:{a0}", "--skip-after", f"y:{a1}"]
    assert b0 not in " ".join(be._skip_flags(0, 0)) and a0 != b0
    meta = json.loads((ev.store.ref_dir(ev.ref_key, 0) / "meta.json").read_text())
    assert meta["digests"] == {"y": [a0, b0]}


def test_a_matching_run_writes_no_outputs_and_a_wrong_one_does(ev):
    w = ev.workers[0]
    good = w.backend.run(w.baseline, ev.sets[0], ev.store.work_dir / "good")
    assert good.fault is None and good.matched == ["y"] and good.outputs == {}
    assert not (ev.store.work_dir / "good" / "y.npy").exists()
    built = w.backend.compile(variant(ev.mep_dir, "loose"))
    wrong = w.backend.run(built, ev.sets[0], ev.store.work_dir / "loose")
    assert wrong.matched == [] and set(wrong.outputs) == {"y"}


def test_the_original_alone_is_timed_in_one_process(ev):
    base = ev.baseline_result()
    assert base.ok and base.timed.rounds == 3 and base.timed.launches == 60
    assert [p.name for p in (ev.store.work_dir / "baseline" / "time").iterdir()] == ["round0-baseline"]


def test_an_output_skipped_without_the_reference_s_digest_is_a_fault(ev):
    """A process that leaves an output unwritten and claims lane A (it is on its command line) cannot claim lane
    B: no output, no match, the candidate is rejected."""
    res = evaluate_many(ev, [("blind", variant(ev.mep_dir, "skip_blind"))])[0]
    assert res.status == "runtime_fault" and "wrote no y" in res.feedback()


def test_references_cached_without_digests_get_them_from_the_original_s_run(tmp_path, monkeypatch):
    first = _evaluator(tmp_path, monkeypatch, True)
    first.close()
    for k in range(first.k):                     # as an older mepgen stored them
        meta_file = first.store.ref_dir(first.ref_key, k) / "meta.json"
        meta = json.loads(meta_file.read_text())
        del meta["digests"]
        meta_file.write_text(json.dumps(meta))
    e = _evaluator(tmp_path, monkeypatch, True)
    try:
        assert e.workers[0].backend.ref_digests == {}
        assert e.baseline_result().status == "ok"
        assert e.workers[0].backend.ref_digests == {k: {"y": list(digest.of_bytes(e.refs[k]["y"]))}
                                                    for k in range(e.k)}
    finally:
        e.close()


WRONG = [
    ("skip", "wrong_result", "verify", "NaN"),
    ("nan", "wrong_result", "verify", "1 NaN"),
    ("loose", "wrong_result", "verify", "max rel err"),
    ("const", "wrong_result", "verify", "elements wrong"),
    ("racy", "wrong_result", "time", "after timing"),
    ("changes_inputs", "wrong_result", "verify", "x: the kernel modified this input buffer"),
    ("cached", "wrong_result", "time", "input set 1, after timing"),
    ("reuse", "wrong_result", "time", "inputs changed in place"),
]


def test_wrong_candidates_get_the_host_comparison_s_verdict(tmp_path, monkeypatch):
    verdicts = []
    for digests in (False, True):
        e = _evaluator(tmp_path, monkeypatch, digests)
        try:
            results = evaluate_many(e, [(mode, variant(e.mep_dir, mode)) for mode, *_ in WRONG])
        finally:
            e.close()
        for res, (mode, status, stage, evidence) in zip(results, WRONG):
            assert (res.status, res.stage) == (status, stage), (mode, digests, res.feedback())
            assert evidence in res.feedback(), (mode, digests)
        verdicts.append([(r.status, r.stage, [(m.output, m.input_set, m.phase, m.bad, m.first_bad_index)
                                              for m in r.wrong.mismatches], r.wrong.inputs_changed)
                         for r in results])
    assert verdicts[0] == verdicts[1]


def test_honest_candidates_are_timed_as_before(ev):
    modes = ["faster", "slightly_faster", "slower", "good"]
    results = evaluate_many(ev, [(m, variant(ev.mep_dir, m)) for m in modes])
    assert {r.name: r.timed.decision for r in results} == {"faster": "faster", "slightly_faster": "same",
                                                           "slower": "slower", "good": "same"}
    assert all(r.status == "ok" for r in results)
