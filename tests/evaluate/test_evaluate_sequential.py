"""Sequential timing against the original's timing stored once per run: when a session may stop (decide.settled),
when the original's speed moved (decide.drift), and what a session does then (session.time_candidate), on
synthetic launch times: no process, no GPU."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from mepgen.evaluate import decide, plan, session
from mepgen.evaluate.backend import TimingOutput, TimingPlan
from mepgen.evaluate.pycuda_worker import _order


def rounds(median_ms: float, n: int = 3, reps: int = 50, noise: float = 0.005, seed: int = 0) -> list[list[float]]:
    rng = np.random.default_rng(seed)
    return [(median_ms * (1 + noise * rng.standard_normal(reps))).tolist() for _ in range(n)]


BASE = rounds(1.6, seed=1)


def test_a_candidate_30x_faster_or_3x_slower_is_settled_after_two_rounds_not_one():
    fast, slow = rounds(1.6 / 30, n=2, seed=2), rounds(4.8, n=2, seed=3)
    assert decide.settled(BASE, fast[:1]) is None           # one round: decide()'s every-round win covers too little
    assert decide.settled(BASE, fast).decision == "faster"
    assert decide.settled(BASE, slow).decision == "slower"


def test_a_candidate_near_the_threshold_gets_every_round():
    """1.2% faster with 2% scatter a launch: the ratio's interval reaches the 1% threshold, so the session goes on
    to the plan's last round (with 0.5% scatter the same gain is certain after two rounds of 50 launches)."""
    base = rounds(1.6, noise=0.02, seed=11)
    assert decide.settled(base, rounds(1.6 * 0.988, n=2, noise=0.02, seed=4)) is None
    assert decide.settled(BASE, rounds(1.6 * 0.985, n=2, seed=4)).decision == "faster"
    noisy_same = rounds(1.6, n=2, noise=0.05, seed=5)      # same speed, scatter too wide to rule out a 1% gain
    assert decide.settled(BASE, noisy_same) is None
    tight_same = rounds(1.6, n=2, reps=200, noise=0.001, seed=6)
    assert decide.settled(rounds(1.6, reps=200, noise=0.001, seed=7), tight_same).decision == "same"


def test_an_early_verdict_is_always_the_one_decide_gives_on_the_same_launches():
    rng = np.random.default_rng(8)
    seen = set()
    for i in range(60):
        ratio = float(rng.choice([0.03, 0.5, 0.9, 0.97, 0.99, 1.0, 1.01, 1.05, 2.0]))
        noise = float(rng.choice([0.001, 0.01, 0.05]))
        base = rounds(1.0, noise=noise, seed=100 + i)
        cand = rounds(ratio, n=2, noise=noise, seed=200 + i)
        s = decide.settled(base, cand)
        if s is not None:
            assert s.decision == decide.decide(base, cand).decision
            seen.add(s.decision)
            lo, hi = decide.ratio_interval(base, cand)
            assert lo <= ratio * 1.02 and hi >= ratio * 0.98          # the interval covers the true ratio
    assert seen == {"faster", "slower", "same"}


def test_drift_is_a_move_of_the_controls_beyond_the_noise_not_the_scatter_of_a_few_launches():
    same = decide.drift(BASE, rounds(1.6, reps=13, seed=9))
    assert not same.moved and same.why.startswith("39 control launch(es) of the original") and "moved" not in same.why
    hot = decide.drift(BASE, rounds(1.6 * 1.08, reps=13, seed=10))
    assert hot.moved and hot.ratio == pytest.approx(1.08, rel=0.01) and "moved" in hot.why
    few_noisy = decide.drift(BASE, [[1.6 * 1.03, 1.6 * 0.97, 1.6 * 1.05]])
    assert not few_noisy.moved
    assert not decide.drift(BASE, [[], []]).moved


def test_controls_are_spread_among_the_candidate_s_launches():
    order = _order([13, 125])
    assert len(order) == 138 and sorted(i for i, side in order if side == 0) == list(range(13))
    positions = [n for n, (_, side) in enumerate(order) if side == 0]
    gaps = np.diff(positions)
    assert gaps.min() >= 9 and positions[0] > 0 and positions[-1] < 137     # none bunched, none at the ends
    assert _order([3, 3]) == [(0, 0), (0, 1), (1, 1), (1, 0), (2, 0), (2, 1)]    # equal sides: A B B A as before


def test_controls_and_the_session_s_cost():
    assert plan.controls(1.6) == 13 and plan.controls(0.02) == plan.MAX_CONTROL and plan.controls(50) == 3
    p = TimingPlan(warmup=2, reps=100, rounds=3, control=10)
    # the candidate's 300 + 2 launches at 0.05 ms, the original's 30 + 2 at 1.6 ms, one worker call (a run less its
    # launch), one re-check run
    assert plan.timing_seconds(p, 0.05, 0.1, 2, False, 1.6) == pytest.approx((302 * 0.05 + 32 * 1.6) / 1000
                                                                           + (0.1 - 0.00005) + 0.1)
    # native: one process for the controls, one for every round of the candidate (its rounds are 100 launches)
    assert plan.timing_seconds(p, 0.05, 0.1, 2, True, 1.6) == pytest.approx((302 * 0.05 + 12 * 1.6 + 2 * 0.05) / 1000
                                                                          + 0.2)
    long = TimingPlan(warmup=1, reps=plan.MIN_REPS, rounds=3, control=3)     # a process a round: it may stop early
    assert plan.timing_seconds(long, 70, 0.1, 2, True, 1.6) == pytest.approx((12 * 70 + 4 * 1.6 + 2 * 70) / 1000 + 0.4)


class FakeBackend:
    """time(): the original alone at `base_ms[i]` (one per timing of it), a candidate at `cand_ms` with controls at
    the original's current speed; records every session's plan."""

    def __init__(self, base_ms: list[float], cand_ms: float):
        self.base_ms, self.cand_ms, self.alone, self.sessions = list(base_ms), cand_ms, 0, []

    def time(self, baseline, candidate, inputs, p, out_dir, recheck=None):
        now = self.base_ms[min(self.alone, len(self.base_ms) - 1)]
        if candidate is None:
            self.alone += 1
            return TimingOutput(baseline_rounds=rounds(now, seed=self.alone))
        self.sessions.append(p)
        cand, ctrl = [], []
        for r in range(p.rounds):
            cand += rounds(self.cand_ms, n=1, reps=p.reps, seed=50 + r + 10 * len(self.sessions))
            n = p.control if p.control is not None else p.reps
            ctrl += rounds(now, n=1, reps=n, seed=80 + r + 10 * len(self.sessions))
            if p.stop is not None and p.stop(cand):
                break
        return TimingOutput(baseline_rounds=ctrl, candidate_rounds=cand)


def fake_ev(backend: FakeBackend):
    ev = SimpleNamespace(by_time=True, plan=TimingPlan(warmup=1, reps=40, rounds=3),
                         opts=SimpleNamespace(round_ms=plan.ROUND_MS, perturb=False, min_gain=decide.MIN_GAIN),
                         sets=[SimpleNamespace(index=0)], original_text="", logged=[])
    ev.log = ev.logged.append
    ev.plan_for = lambda text, ms=None: plan.by_time(ms or 1.6, 3, True)
    worker = SimpleNamespace(backend=backend, baseline=object(), stored=None)
    return ev, worker


def test_the_original_is_timed_once_and_a_fast_candidate_stops_early(tmp_path):
    be = FakeBackend([1.6], 1.6 / 30)
    ev, worker = fake_ev(be)
    for _ in range(3):
        s = session.time_candidate(ev, worker, object(), "text", 1.6 / 30, None, tmp_path)
        assert len(s.timing.candidate_rounds) == decide.MIN_ROUNDS and s.baseline_rounds == worker.stored.rounds
    assert be.alone == 1 and worker.stored.retimed == 0
    assert all(p.control == plan.controls(1.6) for p in be.sessions)
    assert be.sessions[0].reps == plan.MAX_REPS        # sized by the candidate's own launch, not the original's
    assert decide.decide(s.baseline_rounds, s.timing.candidate_rounds).decision == "faster"


def test_a_drift_times_the_original_again_and_then_the_candidate(tmp_path):
    be = FakeBackend([1.6, 1.9], 1.6 * 0.8)          # the original runs 19% slower from its first candidate on
    be.alone = 0
    ev, worker = fake_ev(be)
    session.time_baseline(ev, worker, tmp_path)
    be.base_ms = [1.9]                                # the GPU changed after the original was stored
    s = session.time_candidate(ev, worker, object(), "text", 1.28, None, tmp_path)
    assert be.alone == 2 and worker.stored.retimed == 1 and len(be.sessions) == 2
    assert any("moved" in n for n in s.notes) and any("timed again" in n for n in s.notes)
    assert decide.summarize(s.baseline_rounds).median_ms == pytest.approx(1.9, rel=0.01)


def test_a_speed_that_keeps_moving_falls_back_to_the_interleaved_session(tmp_path):
    class Restless(FakeBackend):       # every control launch runs 15% off the last timing of the original
        def time(self, baseline, candidate, inputs, p, out_dir, recheck=None):
            if candidate is not None and p.control is not None:
                self.sessions.append(p)
                return TimingOutput(baseline_rounds=rounds(self.base_ms[0] * 1.15 ** (self.alone + 1), reps=p.control),
                                    candidate_rounds=rounds(self.cand_ms, n=2, reps=p.reps))
            return super().time(baseline, candidate, inputs, p, out_dir, recheck)

    be = Restless([1.6], 1.0)
    ev, worker = fake_ev(be)
    s = session.time_candidate(ev, worker, object(), "text", 1.0, None, tmp_path)
    assert s.plan.control is None and s.plan.stop is None               # both sides launch by launch
    assert s.baseline_rounds == s.timing.baseline_rounds and "interleaved" in s.notes[-1]
    assert be.alone == 2 and len(be.sessions) == 3        # the original timed once more, not twice; 2 + interleaved
