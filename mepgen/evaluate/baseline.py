"""The original kernel as a candidate of its own (Evaluator.baseline_result): run on every input set and verified
against its own references (run to run), then timed alone; the timing is kept, and candidates are timed against
it (session.py). Its phases go to `Evaluator.spent` (verification, timing)."""
from __future__ import annotations

import dataclasses
import time

from .. import fidelity
from . import output_digest, references, session
from . import plan as plan_mod
from .results import EvalResult
from .store import digest


def result(ev) -> EvalResult:
    """The original kernel as a candidate of its own: re-verified (run to run), timed alone, peaks checked."""
    res = EvalResult(name="baseline", key=ev.result_key(ev.original_text), backend=ev.backend_name,
                     kernel_sha256=digest("kernel", ev.original_text), input_sets=ev.k, sandbox=ev.sandbox)
    worker = ev.workers[0]
    res.compile = worker.baseline.info
    start = time.monotonic()
    work = ev.store.work_dir / "baseline"
    mark = time.monotonic()
    for s in ev.sets:
        ev.check_time()
        if (ev.run_s or 0.0) > 3:
            ev.log(f"verifying the original on input set {s.index} (about {ev.run_s:.0f} s)")
        res.stage = "run"
        t0 = time.monotonic()
        out = worker.backend.run(worker.baseline, s, work / f"set{s.index}")
        if out.fault is not None:
            res.status, res.fault = "runtime_fault", out.fault
            return ev._done(res, start)
        ev._saw_baseline(out)
        res.stage = "verify"
        wrong = ev._wrong(out.outputs, s.index, "run", out.inputs_after, out.inputs_changed, out.matched)
        if not wrong and out.outputs:      # references cached without digests: the original's run gives them
            references.use_digests(ev, s.index, output_digest.of_run(ev.spec.outputs, out, ev.refs[s.index]))
        ev._saw_run(time.monotonic() - t0)
        ev.todo["verify"] -= 1
        if wrong:
            res.status, res.wrong = "wrong_result", wrong
            res.notes.append("the original kernel does not reproduce its own outputs: a race, or a tolerance "
                             "in mep.yaml that is too tight")
            return ev._done(res, start)
    ev._spend("verification", mark)
    return _timed(ev, res, worker, work, start)


def warm(ev, verified: EvalResult) -> EvalResult:
    """The verified original timed again from a warm L2 (no flush before its launches), and every candidate after it:
    for an MEP whose flushed time is far above the application's, where the launch read data that the steps before
    it had left in the L2 (optimize's fidelity check). Its verification stands (the flush changes no output)."""
    ev.plan = dataclasses.replace(ev.plan, flush_l2=False)
    for w in ev.workers:
        w.stored = None            # timed with the flush: candidates compare with the warm timing only
    res = EvalResult(name="baseline", key=ev.result_key(ev.original_text), backend=ev.backend_name,
                     kernel_sha256=verified.kernel_sha256, input_sets=ev.k, sandbox=ev.sandbox)
    res.compile = verified.compile
    res.notes.append("timed from a warm L2 (no flush between launches), as the application ran it")
    worker = ev.workers[0]
    return _timed(ev, res, worker, ev.store.work_dir / "baseline-warm", time.monotonic())


def against_application(ev, mep_dir, base: EvalResult, tolerance: float, floor_us: float,
                        log=lambda line: None) -> tuple[fidelity.Fidelity, EvalResult, float | None]:
    """The original's time against the application's (mepgen/fidelity.py), and the baseline candidates compare with.
    An MEP slower than the application with the L2 flushed between launches is timed once more from a warm L2
    (`warm`): where that time is the application's, its launch read what the steps before it left in the L2, and
    every candidate is timed that way (the record says so: `l2: warm`, with the flushed time in `why`). Else the
    flushed timing stands; the third value is then the warm time measured (None where none was)."""
    fid = fidelity.of_mep(mep_dir, base.timed.median_ms if base.timed else None, tolerance, floor_us)
    if not (fid.ok is False and fid.ratio is not None and fid.ratio > 1 and ev.plan.flush_l2):
        return fid, base, None
    log(f"{fid.line()}; timing the original from a warm L2, as the application may have run it")
    kept = flushed_state(ev)
    hot = warm(ev, base)
    again = fidelity.of_mep(mep_dir, hot.timed.median_ms, tolerance, floor_us) if hot.ok and hot.timed else None
    if again is not None and again.ok:
        again.why = (f"timed from a warm L2, as the application ran it (with the L2 flushed before each launch the MEP "
                     f"took {fid.mep_ms:.4g} ms, ratio {fid.ratio:.2f}); {again.why}")
        again.l2 = "warm"
        return again, hot, None
    restore(ev, kept)                   # the flushed timing stands, and the guard's verdict on it
    return fid, base, again.mep_ms if again is not None else None


def flushed_state(ev) -> tuple:
    """What `warm` changes (the plan, each GPU's stored timing), for `restore`."""
    return ev.plan, [w.stored for w in ev.workers]


def restore(ev, state: tuple) -> None:
    ev.plan, stored = state
    for w, s in zip(ev.workers, stored):
        w.stored = s


def _timed(ev, res: EvalResult, worker, work, start: float) -> EvalResult:
    res.stage = "time"
    ev.check_time()
    mark = time.monotonic()
    plan = session.baseline_plan(ev)      # alone: no perturbation re-check (nothing to compare it with)
    est = plan_mod.timing_seconds(plan, ev.first_ms or 0.0, ev.run_s or 0.0, 1, ev.backend_name == "native")
    ev.log(f"timing the original for about {est:.0f} s: {plan.how}")
    stored, t = session.time_baseline(ev, worker, work / "time")     # kept: candidates are timed against it
    ev.todo["time"] = 0
    ev._spend("timing", mark)
    if ev._failed_timing(res, t):
        return ev._done(res, start)
    res.device = t.device
    if ev.judge_times(res, t.baseline_rounds, None, t, plan, worker):
        res.notes.append("the baseline beats the measured peak: check work.bytes / work.flops in mep.yaml")
    else:
        res.stage, res.status = "done", "ok"
    res.notes += worker.notes
    if ev.opts.profile:
        res.profile = ev.profile(ev.original, worker)
    return ev._done(res, start)

