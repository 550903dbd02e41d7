"""Timing by time (plan.py), the backend choice (`auto`), and what a run that is cut short leaves."""
from __future__ import annotations

import pytest

from evaluate_fakes import install, make_mep, variant
from mepgen.errors import MepgenError
from mepgen.evaluate import Evaluator, Options
from mepgen.evaluate import devices, plan
from mepgen.evaluate.batch import evaluate_many
from mepgen.evaluate.summary import render
from mepgen.optimize.search import Budget, Search
from mepgen.optimize import strategies
from mepgen.optimize.trajectory import Trajectory
from mepgen.spec import load_spec
from optimize_fakes import FakeEvaluate, MarkerProposer, baseline, make_ctx


@pytest.mark.parametrize("first_ms", [0.003, 0.05, 1.0, 40.0, 270.0, 1100.0])
def test_a_round_costs_about_the_same_whatever_the_kernel_s_duration(first_ms):
    p = plan.by_time(first_ms, rounds=3, flush_l2=True)
    kernel_ms = p.reps * first_ms
    assert plan.MIN_REPS <= p.reps <= plan.MAX_REPS and plan.MIN_WARMUP <= p.warmup <= plan.MAX_WARMUP
    # about ROUND_MS of kernel time per side and round: above only where the floor of MIN_REPS launches holds,
    # below only where MAX_REPS launches (each with its reset and L2 flush) are enough
    assert kernel_ms <= max(plan.ROUND_MS * 1.05, plan.MIN_REPS * first_ms)
    assert kernel_ms >= plan.ROUND_MS * 0.95 or p.reps == plan.MAX_REPS
    assert "time-based" in p.how and plan.fmt_ms(first_ms) in p.how


def test_a_1s_kernel_gets_the_floor_and_a_3us_kernel_many_launches():
    assert (plan.by_time(1100.0, 3, True).reps, plan.by_time(1100.0, 3, True).warmup) == (3, 1)
    assert plan.by_time(0.003, 3, True).reps == plan.MAX_REPS


@pytest.fixture
def mep(tmp_path, monkeypatch):
    install(monkeypatch)
    return make_mep(tmp_path)


def test_time_based_plan_from_the_first_launches_is_stated(mep):
    """The fake harness's launches take 1 ms (good) and 40 ms (slow_probe): 200 and 5 launches per round."""
    ev = Evaluator(load_spec(mep / "mep.yaml"), mep, Options(rounds=2, run_timeout=10.0))
    try:
        ev.prepare()
        base = ev.baseline_result()
        good, slow = evaluate_many(ev, [("good", variant(mep, "good")), ("slow", variant(mep, "slow_probe"))])
    finally:
        ev.close()
    assert base.timed.launches == 2 * 200 and "from a first launch of 1 ms" in base.timed.plan
    assert good.timed.launches == 2 * 200
    assert slow.timed.launches == 2 * 5 and "40 ms" in slow.timed.plan      # planned from the slower side
    assert good.timed.plan.startswith("time-based")


def test_count_based_when_reps_are_given_and_keys_do_not_depend_on_measured_counts(mep):
    spec = load_spec(mep / "mep.yaml")
    by_count = Evaluator(spec, mep, Options(reps=7, rounds=2))
    by_time = Evaluator(spec, mep, Options(rounds=2))
    assert not by_count.by_time and by_time.by_time
    assert by_count.result_key("x") != by_time.result_key("x")
    key = by_time.result_key("x")
    by_time.first_ms = 123.0                       # measured later: the key is the same
    assert by_time.result_key("x") == key


def test_auto_takes_pycuda_when_installed_and_allowed(mep, monkeypatch):
    spec = load_spec(mep / "mep.yaml")
    monkeypatch.setattr(devices, "have_pycuda", lambda: False)
    name, why = devices.choose_backend("auto", spec)
    assert name == "native" and "pycuda is not installed" in why
    with pytest.raises(MepgenError, match="needs pycuda"):
        devices.choose_backend("pycuda", spec)
    monkeypatch.setattr(devices, "have_pycuda", lambda: True)
    assert devices.choose_backend("auto", spec) == ("pycuda", "auto: pycuda is installed and the MEP allows it")
    assert devices.choose_backend("native", spec)[0] == "native"
    spec.params[0].value = None                    # a scalar the pycuda entry cannot evaluate
    name, why = devices.choose_backend("auto", spec)
    assert name == "native" and "scalar parameter n has no value" in why


def test_auto_runs_host_arithmetic_in_the_launch_on_the_native_harness(mep, monkeypatch):
    """`grid: [sqrtf(N / 256.f) + 1]`: the pycuda entry folds the geometry into a `__device__` variable's
    initializer, which cannot call sqrtf (nvcc: dynamic initialization is not supported); the native harness
    computes it on the host. Casts and sizeof are no calls; ceil, floorf, max are folded (fold.py)."""
    spec = load_spec(mep / "mep.yaml")
    monkeypatch.setattr(devices, "have_pycuda", lambda: True)
    spec.launch.grid = ["(unsigned)sizeof(float) * (int)(N / 256)"]
    assert devices.choose_backend("auto", spec)[0] == "pycuda"
    spec.launch.grid = ["sqrtf(N / 256.f) + 1"]
    name, why = devices.choose_backend("auto", spec)
    assert name == "native" and "sqrtf()" in why
    assert devices.runtime_calls(spec) == ["sqrtf"]
    # ceil, floorf, max...: the entry calls constexpr twins of them (fold.py), so auto stays on pycuda
    spec.launch.grid = ["(size_t)(ceil((float)N / ((float)32)))", "std::max(1, (int)floorf(N / 256.f) + 1)"]
    assert devices.runtime_calls(spec) == [] and devices.choose_backend("auto", spec)[0] == "pycuda"
    spec.launch.grid = ["N / 256"]
    scalar = next(p for p in spec.params if p.role == "scalar")
    scalar.dtype, scalar.ctype, scalar.value = None, "Payoff", "4.00"   # a functor built from 4.0 by its constructor
    name, why = devices.choose_backend("auto", spec)
    assert name == "native" and "by a constructor" in why


def test_the_default_backend_is_auto(mep):
    assert Options().backend == "auto"
    ev = Evaluator(load_spec(mep / "mep.yaml"), mep, Options())
    assert ev.backend_why.startswith("auto: ")


def test_time_limit_counts_what_ran_before_the_search_and_progress_is_reported(tmp_path):
    """--time-limit covers the baseline: a search started after the limit is spent evaluates nothing; and the
    run's state is handed out after every batch (summary.md as it goes)."""
    t = [1000.0]
    traj = Trajectory(tmp_path / "r1", {"kernel": "k", "spec_sha256": "s"}, progress=lambda line: None)
    late = Search(make_ctx(tmp_path), [MarkerProposer()], FakeEvaluate(), strategies.make("elite"),
                  Budget(candidates=10, seconds=30, width=2), traj, baseline=baseline(), clock=lambda: t[0],
                  start=t[0] - 31)
    out = late.run()
    assert out.evaluations == 0 and "time limit" in out.stop_reason
    seen = []
    traj2 = Trajectory(tmp_path / "r2", {"kernel": "k", "spec_sha256": "s"}, progress=lambda line: None)
    Search(make_ctx(tmp_path), [MarkerProposer()], FakeEvaluate(), strategies.make("elite"),
           Budget(candidates=4, width=2), traj2, baseline=baseline(), on_progress=seen.append).run()
    assert [o.evaluations for o in seen] == [2, 4] and all(o.stop_reason == "still running" for o in seen)


class _Paced(FakeEvaluate):
    """Every candidate takes `seconds` of the fake clock `t`."""

    def __init__(self, t, seconds):
        super().__init__()
        self.t, self.seconds = t, seconds

    def __call__(self, proposals, workdir):
        out = super().__call__(proposals, workdir)
        for r in out:
            r.seconds = self.seconds
            self.t[0] += self.seconds
        return out


def test_no_candidate_is_started_that_cannot_finish_in_the_time_limit(tmp_path):
    """Before the first candidate the pace is the estimate from the baseline (pace_s); after it, what the
    candidates took. A candidate of 8 s is not started with 5 s left; the run ends inside its limit."""
    t = [0.0]
    traj = Trajectory(tmp_path / "r1", {"kernel": "k", "spec_sha256": "s"}, progress=lambda line: None)
    out = Search(make_ctx(tmp_path), [MarkerProposer()], _Paced(t, 8.0), strategies.make("elite"),
                 Budget(candidates=50, seconds=30, width=2), traj, baseline=baseline(), clock=lambda: t[0],
                 start=0.0, pace_s=40.0).run()
    assert out.evaluations == 0 and "one candidate takes about 40 s" in out.stop_reason
    t[0] = 0.0
    traj2 = Trajectory(tmp_path / "r2", {"kernel": "k", "spec_sha256": "s"}, progress=lambda line: None)
    out = Search(make_ctx(tmp_path), [MarkerProposer()], _Paced(t, 8.0), strategies.make("elite"),
                 Budget(candidates=50, seconds=30, width=2), traj2, baseline=baseline(), clock=lambda: t[0],
                 start=0.0, pace_s=8.0).run()
    assert out.evaluations == 3 and t[0] <= 30 and "one candidate takes about 8 s" in out.stop_reason


def test_timing_seconds_counts_launches_processes_and_the_recheck():
    p = plan.by_time(214.0, rounds=3, flush_l2=True)           # 3 launches per side and round, 1 warm-up
    # one session (pycuda): 2 sides x 3 rounds x 3 launches + 1 warm-up per side, the worker call's overhead (a run
    # less the launch it holds, counted among the session's), then one re-check run
    assert plan.timing_seconds(p, 214.0, 2.0, 2, per_process=False) == pytest.approx(20 * 0.214 + 1.786 + 2.0)
    # corr_kernel (PolyBench), 1.1 s a launch, 1.2 s a run, timed alone: 3 x 3 launches after 1 warm-up and the
    # re-check run; the whole run on top of the launches made it 13.4 s where the worker spends about 12.2 s
    slow = plan.by_time(1100.0, rounds=3, flush_l2=True)
    assert plan.timing_seconds(slow, 1100.0, 1.2, 1, per_process=False) == pytest.approx(10 * 1.1 + 0.1 + 1.2)
    # native: a process per round and side, each warming up and paying one run's overhead; the re-checks are two
    # launches inside the last process
    assert plan.timing_seconds(p, 214.0, 2.0, 2, per_process=True) == pytest.approx(24 * 0.214 + 6 * 2.0 + 2 * 0.214)
    # the original timed alone on the native backend: its rounds in one process when a round is more than
    # MIN_REPS launches (bonds, 13.78 ms: 3 x 15 launches after 4 warm-up; the three processes of old, and a run
    # for the re-check, made it about 4.8 s at 1 s per checked run)
    alone = plan.by_time(13.78, rounds=3, flush_l2=True)
    assert (alone.reps, alone.warmup) == (15, 4)
    assert plan.timing_seconds(alone, 13.78, 1.0, 1, per_process=True) == pytest.approx(49 * 0.01378 + 1.0 + 2 * 0.01378)


def test_the_baseline_estimate_and_a_candidate_session_that_cannot_fit(mep):
    """From what was measured (one run, one launch), check_time refuses the next phase with the one line;
    a candidate whose timing would outlast the limit is not timed (a timeout fault saying so)."""
    import time
    ev = Evaluator(load_spec(mep / "mep.yaml"), mep, Options(rounds=3, run_timeout=10.0))
    try:
        ev.prepare()
        ev.set_time_limit(time.monotonic(), 3600)
        base = ev.baseline_result()
        assert base.ok and ev.run_s is not None and ev.candidate_s() > 3 * ev.run_s
        # the search's pace before a candidate was measured: the original's build and runs, not its timing
        from mepgen.evaluate.estimate import first_candidate_s
        assert first_candidate_s(ev) == pytest.approx(3 * ev.run_s + (ev.workers[0].baseline.info.seconds or 0.0))
        assert first_candidate_s(ev) < ev.candidate_s()
        ev.first_ms, ev.todo = 214.0, {"gen": 0, "ref": 0, "verify": 3, "time": 1}
        ev.set_time_limit(time.monotonic(), 2)
        with pytest.raises(plan.TooShort, match=r"the baseline of cg::axpy needs about \d+ s \(3 input set\(s\) of "
                                                r".*214 ms per launch, 10 timed launches; so far sandbox [\d.]+ s, build [\d.]+ s, "
                                                r"inputs [\d.]+ s, references [\d.]+ s, verification [\d.]+ s, timing "
                                                r"[\d.]+ s\); give --time-limit >= \d+"):
            ev.check_time()
        ev.first_ms = None
        ev.set_time_limit(time.monotonic(), 1.5)
        (res,) = evaluate_many(ev, [("slow", variant(mep, "slow_probe"))])
        # verified, not timed: no fault of the candidate's, nothing to repair, and not kept in the result cache
        assert res.status == "not_timed" and res.fault.kind == "time_limit" and "not timed" in res.fault.message
        assert "VERIFIED, NOT TIMED" in render(res)
        ev.set_time_limit(time.monotonic(), 3600)
        (again,) = evaluate_many(ev, [("slow", variant(mep, "slow_probe"))])
        assert again.status == "ok" and again.timed is not None
    finally:
        ev.close()


def test_input_set_size_and_presence_for_the_time_estimates(mep):
    from mepgen.evaluate.store import Store
    spec = load_spec(mep / "mep.yaml")
    store = Store(mep, spec)
    n = {p.name: spec.count(p) * 4 for p in spec.params if p.is_buffer}       # the axpy MEP: float32 buffers
    assert store.set_bytes() == sum(n.values())
    assert not store.has_input_set(1)
    store.input_set(1)
    assert store.has_input_set(1) and not store.has_input_set(0)


def test_the_first_run_which_starts_the_worker_does_not_set_the_pace(mep):
    ev = Evaluator(load_spec(mep / "mep.yaml"), mep, Options())
    ev._saw_run(9.0)                 # process start, CUDA context, first upload
    assert ev.run_s is None
    ev._saw_run(0.2)
    ev._saw_run(0.3)
    assert ev.run_s == 0.3


def backend_class(monkeypatch, cls) -> None:
    """Every Evaluator made from now on gets backends of `cls` (a FakeNative with a part of its own)."""
    import mepgen.evaluate.evaluator as ev_mod
    monkeypatch.setattr(ev_mod, "make_backend", lambda name, spec, mep_dir, build_dir, device, rt, ct:
                        cls(spec, mep_dir, build_dir, device=device, run_timeout=rt, compile_timeout=ct))


def test_the_workers_start_while_the_original_builds(tmp_path, monkeypatch):
    """Evaluator.prepare asks each backend that can (the pycuda worker: a Python, pycuda and a CUDA context, about
    a second) to start before its first run, beside the original's build and the input sets."""
    from evaluate_fakes import FakeNative
    install(monkeypatch)
    events = []

    class Warmed(FakeNative):
        def warm(self):
            events.append("warm")

        def run(self, *a, **k):
            events.append("run")
            return super().run(*a, **k)
    backend_class(monkeypatch, Warmed)
    mep = make_mep(tmp_path)
    ev = Evaluator(load_spec(mep / "mep.yaml"), mep, Options())
    try:
        ev.prepare()
    finally:
        ev.close()
    assert events[0] == "warm" and events.count("warm") == 1 and "run" in events


def test_a_worker_started_ahead_is_started_once_and_waited_for(tmp_path, monkeypatch):
    """warm_ahead (optimize calls it before it sets up its pipeline) starts each worker on a thread of its own;
    prepare starts none again and makes no run before that start has ended; close waits for it too."""
    import threading
    import time
    from evaluate_fakes import FakeNative
    install(monkeypatch)
    events, lock = [], threading.Lock()

    class Slow(FakeNative):
        def warm(self):
            with lock:
                events.append(("warm", threading.current_thread().name))
            time.sleep(0.3)
            with lock:
                events.append(("warmed", None))

        def run(self, *a, **k):
            with lock:
                events.append(("run", None))
            return super().run(*a, **k)
    backend_class(monkeypatch, Slow)
    mep = make_mep(tmp_path)
    ev = Evaluator(load_spec(mep / "mep.yaml"), mep, Options())
    try:
        ev.warm_ahead()
        ev.warm_ahead()                      # once only
        assert events and events[0][0] == "warm" and events[0][1].startswith("mepgen-warm")
        ev.prepare()
    finally:
        ev.close()
    kinds = [k for k, _ in events]
    assert kinds.count("warm") == 1 and kinds.index("warmed") < kinds.index("run")


def test_close_waits_for_a_start_begun_ahead(tmp_path, monkeypatch):
    """A run that stops before prepare (a refused MEP, ^C) closes its workers only after their start has ended."""
    import time
    from evaluate_fakes import FakeNative
    install(monkeypatch)
    order = []

    class Slow(FakeNative):
        def warm(self):
            time.sleep(0.2)
            order.append("warmed")

        def close(self):
            order.append("closed")
    backend_class(monkeypatch, Slow)
    mep = make_mep(tmp_path)
    ev = Evaluator(load_spec(mep / "mep.yaml"), mep, Options())
    ev.warm_ahead()
    ev.close()
    assert order == ["warmed", "closed"]


def test_the_workers_start_after_the_build_and_the_inputs_is_its_own_phase(mep, monkeypatch):
    """The pycuda worker starts while the original builds and the inputs are made; what its start adds after both
    is the baseline's `worker` phase (run.json's baseline_phases_s), not hidden in another."""
    import time
    from evaluate_fakes import FakeNative
    monkeypatch.setattr(FakeNative, "warm", lambda self: time.sleep(1.0), raising=False)
    ev = Evaluator(load_spec(mep / "mep.yaml"), mep, Options(run_timeout=10.0))
    try:
        ev.prepare()
    finally:
        ev.close()
    ahead = max(ev.spent["build"], ev.spent["inputs"])         # what ran beside the start (both from t = 0)
    assert 1.0 - ahead - 0.25 <= ev.spent["worker"] <= 1.1 and "references" in ev.spent
