"""The fidelity guard: an MEP's time against the captured launch's time in the application."""
from __future__ import annotations

import json

import pytest

from types import SimpleNamespace

from mepgen import fidelity
from mepgen.errors import MepgenError
from mepgen.evaluate import baseline as baseline_mod
from mepgen.optimize.command import FIDELITY_EXIT, check_fidelity
from optimize_fakes import baseline, score


def evaluator(flush=True):
    """What check_fidelity reads of the evaluator: its plan's L2 flush and its GPUs' stored timings."""
    return SimpleNamespace(plan=SimpleNamespace(flush_l2=flush), workers=[SimpleNamespace(stored="flushed timing")])


def captured(tmp_path, kernel_ms):
    d = tmp_path / "mep"
    (d / "data" / "captured").mkdir(parents=True)
    (d / "data" / "captured" / "manifest.json").write_text(json.dumps({"kernel_ms": kernel_ms, "launch_index": 0}))
    return d


def test_ratio_band_and_floor():
    ok = fidelity.judge(1.2, 1.0, tolerance=0.25, floor_us=5)
    assert ok.ok and ok.ratio == 1.2
    off = fidelity.judge(1.3, 1.0, tolerance=0.25, floor_us=5)
    assert off.ok is False and off.ratio == 1.3 and "OUTSIDE" in off.line()
    fast = fidelity.judge(0.5, 1.0)                    # an MEP much faster than the application is off too
    assert fast.ok is False
    # a 4 us kernel read as 7 us (launch overhead in one event pair) stays inside the absolute floor
    short = fidelity.judge(0.007, 0.004, tolerance=0.25, floor_us=5)  # the floor as given
    assert short.ok and short.ratio == 1.75
    assert fidelity.judge(0.007, 0.004, tolerance=0.25, floor_us=1).ok is False


def test_static_mep_has_no_ratio(tmp_path):
    f = fidelity.of_mep(tmp_path, 1.0)
    assert f.ok is None and f.ratio is None and "static MEP" in f.why
    d = captured(tmp_path, -1.0)                          # the injector could not time the launch
    f = fidelity.of_mep(d, 1.0)
    assert f.ok is None and "holds neither app_gpu_ms nor kernel_ms" in f.why


def test_optimize_refuses_an_mep_off_the_guard_unless_forced(tmp_path):
    d = captured(tmp_path, 0.5)                           # the fake baseline takes 1 ms: ratio 2
    run_dir = tmp_path / "run"
    with pytest.raises(MepgenError) as e:
        check_fidelity(evaluator(False), d, baseline(), (0.25, 5.0, False), run_dir, "k", None)
    assert e.value.exit_code == FIDELITY_EXIT and "ratio 2.00" in str(e.value) and "--force" in str(e.value)
    assert "refused by the fidelity guard" in (run_dir / "summary.md").read_text()
    f, _ = check_fidelity(evaluator(False), d, baseline(), (0.25, 5.0, True), run_dir, "k", None)
    assert f.forced and f.ok is False and f.ratio == 2.0
    f, _ = check_fidelity(evaluator(), captured(tmp_path / "b", 0.9), baseline(), (0.25, 5.0, False), run_dir, "k",
                          None)
    assert f.ok and not f.forced and f.ratio == pytest.approx(1 / 0.9, rel=1e-3)


def test_the_gpu_time_of_the_launch_is_preferred_over_its_event_pair(tmp_path):
    d = captured(tmp_path, 0.040)                          # events: submission included
    m = json.loads((d / "data/captured/manifest.json").read_text())
    m["app_gpu_ms"] = 0.0081                               # the activity record: the kernel alone
    (d / "data/captured/manifest.json").write_text(json.dumps(m))
    f = fidelity.of_mep(d, 0.0079)
    assert f.ok and f.app_ms == 0.0081 and "its GPU time" in f.why


def test_an_mep_slower_than_the_application_is_timed_from_a_warm_l2(tmp_path, monkeypatch):
    """Flushed, the MEP takes 1 ms against 0.5 ms in the application; from a warm L2 it takes 0.55 ms: the search
    compares with the warm timing, and the record says how it was timed and what the flushed timing was."""
    d = captured(tmp_path, 0.5)
    ev = evaluator()

    def warm(ev_, verified):
        ev_.plan.flush_l2 = False
        ev_.workers[0].stored = "warm timing"
        return score("original MARK:speed=1.818,roof=40", "baseline")      # 1 / 1.818 = 0.55 ms
    monkeypatch.setattr(baseline_mod, "warm", warm)
    f, base = check_fidelity(ev, d, baseline(), (0.25, 5.0, False), tmp_path / "run", "k", None)
    assert f.ok and f.l2 == "warm" and f.ratio == pytest.approx(1.1, rel=1e-2) and "(warm L2)" in f.line()
    assert "flushed before each launch the MEP took 1 ms, ratio 2.00" in f.why
    assert base.timed.median_ms == pytest.approx(0.55, rel=1e-2) and ev.plan.flush_l2 is False


def test_a_warm_l2_that_does_not_explain_the_gap_keeps_the_flushed_timing_and_the_refusal(tmp_path, monkeypatch):
    d = captured(tmp_path, 0.25)                          # 1 ms flushed, 0.8 ms warm: both far from 0.25 ms
    ev = evaluator()

    def warm(ev_, verified):
        ev_.plan = SimpleNamespace(flush_l2=False)
        ev_.workers[0].stored = "warm timing"
        return score("original MARK:speed=1.25,roof=40", "baseline")
    monkeypatch.setattr(baseline_mod, "warm", warm)
    with pytest.raises(MepgenError) as e:
        check_fidelity(ev, d, baseline(), (0.25, 5.0, False), tmp_path / "run", "k", None)
    assert "ratio 4.00" in str(e.value) and "0.8 ms from a warm L2" in str(e.value)
    assert ev.plan.flush_l2 is True and ev.workers[0].stored == "flushed timing"     # as before the attempt


def test_an_mep_faster_than_the_application_is_not_timed_again(tmp_path, monkeypatch):
    """A warm L2 only makes the MEP faster: an MEP already faster than the application is refused as it is."""
    monkeypatch.setattr(baseline_mod, "warm", lambda *a: pytest.fail("timed again"))
    with pytest.raises(MepgenError, match="ratio 0.50"):
        check_fidelity(evaluator(), captured(tmp_path, 2.0), baseline(), (0.25, 5.0, False), tmp_path / "run", "k",
                       None)


def test_the_report_says_an_mep_was_timed_from_a_warm_l2():
    from mepgen.report.page import fidelity_of
    f = fidelity.judge(0.55, 0.5)
    f.l2 = "warm"
    ratio, note = fidelity_of(f.to_dict())
    assert ratio == "1.100" and "within the guard" in note and "timed from a warm L2" in note
    assert "warm L2" not in fidelity_of(fidelity.judge(0.55, 0.5).to_dict())[1]
