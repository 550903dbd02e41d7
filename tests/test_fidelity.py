"""The fidelity guard: an MEP's time against the captured launch's time in the application."""
from __future__ import annotations

import json

import pytest

from mepgen import fidelity
from mepgen.errors import MepgenError
from mepgen.optimize.command import FIDELITY_EXIT, check_fidelity
from optimize_fakes import baseline


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
        check_fidelity(d, baseline(), (0.25, 5.0, False), run_dir, "k", None)
    assert e.value.exit_code == FIDELITY_EXIT and "ratio 2.00" in str(e.value) and "--force" in str(e.value)
    assert "refused by the fidelity guard" in (run_dir / "summary.md").read_text()
    f = check_fidelity(d, baseline(), (0.25, 5.0, True), run_dir, "k", None)
    assert f.forced and f.ok is False and f.ratio == 2.0
    f = check_fidelity(captured(tmp_path / "b", 0.9), baseline(), (0.25, 5.0, False), run_dir, "k", None)
    assert f.ok and not f.forced and f.ratio == pytest.approx(1 / 0.9, rel=1e-3)


def test_the_gpu_time_of_the_launch_is_preferred_over_its_event_pair(tmp_path):
    d = captured(tmp_path, 0.040)                          # events: submission included
    m = json.loads((d / "data/captured/manifest.json").read_text())
    m["app_gpu_ms"] = 0.0081                               # the activity record: the kernel alone
    (d / "data/captured/manifest.json").write_text(json.dumps(m))
    f = fidelity.of_mep(d, 0.0079)
    assert f.ok and f.app_ms == 0.0081 and "its GPU time" in f.why
