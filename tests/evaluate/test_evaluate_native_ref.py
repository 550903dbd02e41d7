"""The native backend with a harness that compares outputs with the references itself (--ref, --compare-rules:
templates/harness/compare.h on the GPU; the fake harness applies the same rule in numpy): the verdicts are those
of the host comparison, only the outputs that differ come back, and the harness checks its loaded inputs itself."""
from __future__ import annotations

import pytest

from evaluate_fakes import install, make_mep, variant
from mepgen.evaluate import Evaluator, Options
from mepgen.evaluate.batch import evaluate_many
from mepgen.spec import load_spec


def _evaluator(tmp_path, monkeypatch, device_compare: bool) -> Evaluator:
    install(monkeypatch)
    mep = make_mep(tmp_path / ("ref" if device_compare else "host"), device_compare=device_compare)
    e = Evaluator(load_spec(mep / "mep.yaml"), mep, Options(reps=20, rounds=3, run_timeout=5.0))
    e.prepare()
    return e


@pytest.fixture
def ev(tmp_path, monkeypatch):
    e = _evaluator(tmp_path, monkeypatch, True)
    yield e
    e.close()


def test_the_harness_is_given_the_references_and_their_rules(ev):
    be = ev.workers[0].backend
    assert be.device_compare and be.refs_of is not None
    flags = be._ref_flags(0, 1)
    assert flags[0] == "--ref" and flags[2] == "--compare-rules" and flags[4] == "--recheck-ref"
    assert flags[1].endswith("set0") and flags[5].endswith("set1")
    assert (ev.store.ref_dir(ev.ref_key, 0) / "y.npy").is_file() and str(ev.store.ref_dir(ev.ref_key, 0)) == flags[1]
    rules = be.rules_file.read_text().split()
    assert rules[0] == "y" and len(rules) == 4 and rules[3] == "0"      # y is inout: not poisoned
    # the candidate's data folder still holds inputs only
    assert sorted(p.name for p in ev.sets[0].data_dir.glob("*.npy")) == ["x.npy", "y.npy"]


def test_a_matching_run_writes_no_outputs_and_a_wrong_one_does(ev):
    w = ev.workers[0]
    good = w.backend.run(w.baseline, ev.sets[0], ev.store.work_dir / "good")
    assert good.fault is None and good.matched == ["y"] and good.outputs == {}
    assert not (ev.store.work_dir / "good" / "y.npy").exists()
    built = w.backend.compile(variant(ev.mep_dir, "loose"))
    wrong = w.backend.run(built, ev.sets[0], ev.store.work_dir / "loose")
    assert wrong.matched == [] and set(wrong.outputs) == {"y"}


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
    for device_compare in (False, True):
        e = _evaluator(tmp_path, monkeypatch, device_compare)
        try:
            results = evaluate_many(e, [(mode, variant(e.mep_dir, mode)) for mode, *_ in WRONG])
        finally:
            e.close()
        for res, (mode, status, stage, evidence) in zip(results, WRONG):
            assert (res.status, res.stage) == (status, stage), (mode, device_compare, res.feedback())
            assert evidence in res.feedback(), (mode, device_compare)
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
