"""A candidate's timing session against the original's timing, stored once per run and per GPU.

The original is timed alone once (Evaluator.baseline_result, or here on a GPU that has no stored timing yet);
each candidate is then timed in the plan's rounds, sized by the candidate's own first launch, with a few control
launches of the original among its launches (plan.controls). After each round decide.settled says whether the
verdict can still change; once it cannot, the session ends (sequential timing). After the session
decide.drift compares the controls with the stored timing: when the original's speed moved (clocks, temperature,
another process on the GPU), the original is timed again and the candidate once more; when it moved again, the
candidate is timed in the session of old, interleaved launch by launch with the original (A B B A), which drift
hits on both sides alike. The verdict is decide()'s on the rounds it was timed against, as before.
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path

from . import decide as decide_mod
from . import plan as plan_mod
from .backend import TimingOutput, TimingPlan
from .results import RuntimeFault


@dataclass
class Stored:
    """The original's launch times on one GPU, round by round, and how they were planned."""
    rounds: list[list[float]]
    how: str
    at: float                       # time.monotonic() when measured
    retimed: int = 0                # times drift made it be measured again

    @property
    def median_ms(self) -> float:
        return decide_mod.summarize(self.rounds).median_ms


@dataclass
class Session:
    timing: TimingOutput
    baseline_rounds: list[list[float]]      # what the verdict compares with
    plan: TimingPlan
    notes: list[str]


def baseline_plan(ev) -> TimingPlan:
    """The original's plan when it is timed alone: its first launch sizes it; the perturbation seed of its own
    text, so that its launches see changing inputs as a candidate session's do."""
    return ev.plan_for(ev.original_text)


def time_baseline(ev, worker, out_dir: Path) -> tuple[Stored | None, TimingOutput]:
    """Time the original alone on `worker`'s GPU and store it there; (None, the output) when that failed."""
    plan = baseline_plan(ev)
    t = worker.backend.time(worker.baseline, None, ev.sets[0], plan, out_dir)
    if t.fault is not None or not any(len(r) for r in t.baseline_rounds):
        return None, t
    worker.stored = Stored(t.baseline_rounds, plan.how, time.monotonic(),
                           worker.stored.retimed if worker.stored is not None else 0)
    return worker.stored, t


def candidate_plan(ev, text: str, first_ms: float | None, stored: Stored) -> TimingPlan:
    """The candidate's rounds, sized by its own first launch (the stored median when none was timed), with the
    original's control launches and the sequential stop."""
    p = ev.plan
    if ev.by_time:
        p = plan_mod.by_time(first_ms or stored.median_ms, p.rounds, p.flush_l2, ev.opts.round_ms)
    control = plan_mod.controls(stored.median_ms)
    seed = ev.plan_for(text).perturb_seed if ev.opts.perturb else None
    rounds, gain = stored.rounds, ev.opts.min_gain
    how = (f"{p.how}; against the original's timing of this run ({plan_mod.fmt_ms(stored.median_ms)}), with "
           f"{control} control launch(es) of it a round; ends at the first round from {decide_mod.MIN_ROUNDS} on "
           f"where the verdict is settled")
    return dataclasses.replace(p, perturb_seed=seed, control=control, how=how,
                               stop=lambda cand: decide_mod.settled(rounds, cand, gain) is not None)


def time_candidate(ev, worker, built, text: str, first_ms: float | None, recheck, out_dir: Path) -> Session:
    """Time a verified candidate (see the module's doc); a fault of the original's timing is the session's."""
    notes: list[str] = []
    stored = worker.stored
    if stored is None:
        stored, t = time_baseline(ev, worker, out_dir / "baseline")
        if stored is None:
            return Session(_baseline_fault(t), [], baseline_plan(ev), notes)
    for attempt in range(2):
        plan = candidate_plan(ev, text, first_ms, stored)
        t = worker.backend.time(worker.baseline, built, ev.sets[0], plan, out_dir, recheck=recheck)
        if t.fault is not None:
            return Session(t, stored.rounds, plan, notes)
        d = decide_mod.drift(stored.rounds, t.baseline_rounds, ev.opts.min_gain)
        rounds = len(t.candidate_rounds)
        notes.append(f"timed in {rounds} of {plan.rounds} round(s) ({sum(map(len, t.candidate_rounds))} launches)"
                     + (": the verdict was settled" if rounds < plan.rounds else "") + f"; {d.why}")
        if not d.moved:
            return Session(t, stored.rounds, plan, notes)
        if attempt:              # moved again right after the original was timed again: no third timing of it
            break
        ev.log(f"{d.why}: timing the original again")
        stored, tb = time_baseline(ev, worker, out_dir / f"baseline{attempt + 1}")
        if stored is None:
            return Session(_baseline_fault(tb), [], plan, notes)
        stored.retimed += 1
        notes.append(f"the original was timed again: {plan_mod.fmt_ms(stored.median_ms)}")
    # moved twice: the session of old, both sides interleaved launch by launch, drift hitting both alike
    plan = ev.plan_for(text, first_ms)
    t = worker.backend.time(worker.baseline, built, ev.sets[0], plan, out_dir, recheck=recheck)
    notes.append("the original's speed moved again: timed interleaved with it launch by launch instead")
    return Session(t, t.baseline_rounds, plan, notes)


def _baseline_fault(t: TimingOutput) -> TimingOutput:
    fault = t.fault or RuntimeFault("harness_error", "no launch time of the original came back")
    if not fault.message.startswith("baseline failed"):
        fault.message = f"baseline failed while timing: {fault.message}"
    return TimingOutput(fault=fault)
