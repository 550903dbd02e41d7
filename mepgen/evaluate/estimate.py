"""What the baseline's phases not yet run and one candidate will take (optimize --time-limit), from what the
evaluator measured: one run of the original, its first launch, the phases so far (Evaluator.spent)."""
from __future__ import annotations

import dataclasses
import time

from . import plan as plan_mod


def baseline_left_s(ev) -> tuple[float, str]:
    """Seconds the baseline's phases not yet run will take, from what was measured, and the facts used (with
    where the seconds so far went: build, inputs, references, verification, timing)."""
    t = ev.todo
    mib = ev.store.set_bytes() / 2**20
    facts = [f"{ev.k} input set(s) of {mib:.0f} MiB"]
    left = t["gen"] * (ev.gen_s or 0.0)
    if ev.gen_s is not None and t["gen"]:
        facts.append(f"{ev.gen_s:.1f} s to make one")
    if ev.run_s is not None:
        left += (t["ref"] + t["verify"]) * ev.run_s
        facts.append(f"{ev.run_s:.1f} s per checked run")
    if ev.first_ms is not None:
        facts.append(f"{plan_mod.fmt_ms(ev.first_ms)} per launch")
        if t["time"]:
            plan = ev._baseline_plan()
            left += plan_mod.timing_seconds(plan, ev.first_ms, ev.run_s or 0.0, 1, ev.backend_name == "native")
            facts.append(f"{plan.rounds * plan.reps + plan.warmup} timed launches")
    spent = "; so far " + ", ".join(f"{name} {s:.1f} s" for name, s in ev.spent.items()) if ev.spent else ""
    return left, ", ".join(facts) + spent


def candidate_s(ev) -> float | None:
    """What one candidate will take (runs on every input set, timing against the original, re-checks),
    from the original's measured run and launch; None before anything was measured."""
    if ev.run_s is None or ev.first_ms is None:
        return None
    plan = ev._baseline_plan()
    native = ev.backend_name == "native"
    if ev.opts.baseline_once:        # against the stored timing: the original's side is its control launches
        plan = dataclasses.replace(plan, control=plan_mod.controls(ev.first_ms))
    timing = plan_mod.timing_seconds(plan, ev.first_ms, ev.run_s, 2, native, ev.first_ms)
    rechecks = 0 if native or not ev.opts.perturb else 2
    build = ev.workers[0].baseline.info.seconds if ev.workers[0].baseline is not None else 0.0
    return ev.k * ev.run_s + timing + rechecks * ev.run_s + (build or 0.0)


def first_candidate_s(ev) -> float | None:
    """What the search assumes a candidate takes until one was measured (optimize --time-limit): its build and its
    runs on every input set, as long as the original's. Not its timing: that session is planned from the
    candidate's own first launch and not started when it cannot finish in the time left (Evaluator.check: status
    not_timed), so a candidate 30x faster than a slow original is not kept from starting by the original's timing
    (corr_kernel, 1.1 s a launch: 19 s with the original's timing, 4 s without)."""
    if ev.run_s is None:
        return None
    build = ev.workers[0].baseline.info.seconds if ev.workers[0].baseline is not None else 0.0
    return ev.k * ev.run_s + (build or 0.0)


def check_time(ev) -> None:
    """Raise plan.TooShort, before the next phase starts, when the baseline cannot finish in the limit."""
    if ev.deadline is None:
        return
    start, seconds = ev.deadline
    elapsed = time.monotonic() - start
    left, facts = ev.baseline_left_s()
    if elapsed + left > seconds:
        need = elapsed + left
        raise plan_mod.TooShort(plan_mod.need_line(ev.spec.kernel.name, need, facts,
                                                   need + 5 * (ev.candidate_s() or left / 2)))
