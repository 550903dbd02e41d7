"""How many launches to time: chosen from a first measured launch, so that a round costs about the same
for a 3 us and a 1 s kernel (with a floor), instead of a fixed count (50 launches of a 1 s kernel per side and
round would take minutes per candidate).

Each side of a round times about ROUND_MS of kernel time (between MIN_REPS and MAX_REPS launches), after about
WARMUP_MS of warm-up (between MIN_WARMUP and MAX_WARMUP launches), sized from a first launch (event-timed on both
backends on the first verified run):
- the original alone (timed once per run and GPU, session.py): its own first launch;
- a candidate against that stored timing (the default): the candidate's own first launch, so a candidate 30x
  faster than a 1.6 ms original runs 200 launches of 53 us a round (not 125 launches sized by the original), one
  100x slower no longer than planned; the original's side is controls(): a few launches a round that detect
  drift, about CONTROL_MS of its kernel time; and the session ends at the first round from decide.MIN_ROUNDS on
  where decide.settled says the verdict cannot change, so `rounds` is a budget that close calls use up;
- a candidate interleaved with the original launch by launch (Options.baseline_once off, or drift twice in a
  session): the slower of the two first launches, both sides the same count.
"""
from __future__ import annotations

import math

from ..errors import MepgenError
from .backend import TimingPlan

ROUND_MS = 200.0
WARMUP_MS = 50.0
#: MAX_REPS bounds a short kernel's round: each timed launch also resets the outputs, flushes the L2 and changes
#: a few inputs, 0.2-0.3 ms of wall time a launch for a 20 us kernel. 200 (was 500) cut a candidate's timing
#: phase from 0.61 s to 0.39 s there, with the same best verdict (1.45x at 500, 1.48x at 200, H100,
#: bench/results/optimize_speed_2026-11-25.md); the noise rule still compares the medians of the rounds
MIN_REPS, MAX_REPS = 3, 200
MIN_WARMUP, MAX_WARMUP = 1, 20


def _clamp(v: int, lo: int, hi: int) -> int:
    return max(lo, min(hi, v))


def fmt_ms(ms: float) -> str:
    return f"{ms * 1000:.3g} us" if ms < 1 else (f"{ms:.4g} ms" if ms < 1000 else f"{ms / 1000:.3g} s")


def by_time(first_ms: float, rounds: int, flush_l2: bool, round_ms: float = ROUND_MS) -> TimingPlan:
    """The plan for a kernel whose first launch took `first_ms` (event-timed)."""
    t = max(float(first_ms), 1e-4)
    reps = _clamp(math.ceil(round_ms / t), MIN_REPS, MAX_REPS)
    warmup = _clamp(math.ceil(WARMUP_MS / t), MIN_WARMUP, MAX_WARMUP)
    how = (f"time-based: {rounds} round(s) of {reps} launches per side after {warmup} warm-up, from a first launch "
           f"of {fmt_ms(t)} (about {round_ms:g} ms of kernel time per round and side, {MIN_REPS} to {MAX_REPS} "
           f"launches)" + ("" if flush_l2 else "; the L2 not flushed between launches (warm)"))
    return TimingPlan(warmup=warmup, reps=reps, rounds=rounds, flush_l2=flush_l2, how=how)


#: the original's control launches in a candidate's session (decide.drift): about CONTROL_MS of kernel time a
#: round, MIN_CONTROL to MAX_CONTROL launches (13 a round for a 1.6 ms original, 20 for a 20 us one)
CONTROL_MS = 20.0
MIN_CONTROL, MAX_CONTROL = 3, 20


def controls(baseline_ms: float) -> int:
    """The original's launches per round in a candidate's session timed against its stored timing."""
    return _clamp(math.ceil(CONTROL_MS / max(float(baseline_ms), 1e-4)), MIN_CONTROL, MAX_CONTROL)


def by_count(warmup: int, reps: int, rounds: int, flush_l2: bool) -> TimingPlan:
    return TimingPlan(warmup=warmup, reps=reps, rounds=rounds, flush_l2=flush_l2,
                      how=f"count-based: {rounds} round(s) of {reps} launches per side after {warmup} warm-up"
                          + ("" if flush_l2 else "; the L2 not flushed between launches (warm)"))


# --- what a phase will cost (optimize --time-limit) ------------------------------------------------------


def timing_seconds(plan: TimingPlan, launch_ms: float, run_s: float, sides: int, per_process: bool,
                   control_ms: float | None = None) -> float:
    """Wall time of one timing session of `plan` (every round: an early verdict only shortens it): its launches
    at `launch_ms`, plus the re-check after it (one run, `run_s` as measured); with `per_process` (the native
    backend: one harness process per round and side, each loading the inputs and warming up again) one run's
    overhead and the warm-up per process, and the re-checks (perturbation, after timing) two more launches inside
    the last process, not a run of their own. With `plan.control` (a candidate against the original's stored timing)
    the original's side is its control launches at `control_ms`, in one process on the native backend, and the
    candidate's rounds in one process there too unless a round is as short as MIN_REPS launches (so are the
    original's when it is timed alone, `sides` 1). On the pycuda worker (not `per_process`) the session is a call
    to a worker already running: its overhead is a run's less the launch a run holds (a run of a 1.1 s kernel is
    1.2 s: counting the whole run on top of the session's launches counted that launch twice)."""
    per_call = run_s if per_process else _call_s(launch_ms, run_s)
    if plan.control is not None and sides == 2:
        # native: the controls' process, then one for every round (native.py: one for all when rounds are long)
        per_round = per_process and plan.reps <= MIN_REPS
        processes = (plan.rounds + 1 if per_round else 2) if per_process else 1
        cand = plan.rounds * plan.reps + plan.warmup * (plan.rounds if per_round else 1)
        base = plan.rounds * plan.control if not per_process else plan.control
        base += min(plan.warmup, plan.control)
        return (cand * launch_ms + base * (control_ms or launch_ms)) / 1000.0 + processes * per_call + \
            _recheck_s(launch_ms, run_s, per_process)
    processes = plan.rounds * sides if per_process else 1
    if per_process and sides == 1 and plan.reps > MIN_REPS:      # the original alone: its rounds in one process
        processes = 1
    launches = sides * plan.rounds * plan.reps + plan.warmup * (processes if per_process else sides)
    return launches * launch_ms / 1000.0 + processes * per_call + _recheck_s(launch_ms, run_s, per_process)


def _call_s(launch_ms: float, run_s: float) -> float:
    """A worker call's overhead: a measured run (`run_s`) less its one launch."""
    return max(run_s - launch_ms / 1000.0, 0.0)


def _recheck_s(launch_ms: float, run_s: float, per_process: bool) -> float:
    """The re-checks after timing: two launches in the harness's last process (native), a run of the worker
    (pycuda)."""
    return 2 * launch_ms / 1000.0 if per_process else run_s


class TooShort(MepgenError):
    """A phase of the run cannot finish inside --time-limit: not started (the message says what it needs).
    Exit code 2: the limit given is the problem."""


def need_line(label: str, need_s: float, facts: str, suggest_s: float) -> str:
    """`the baseline of matmul needs about 45 s (3 input sets of 768 MiB, 214 ms per launch); give
    --time-limit >= 60`"""
    return (f"the baseline of {label} needs about {need_s:.0f} s ({facts}); give --time-limit >= "
            f"{int(math.ceil(suggest_s / 10.0) * 10)}")
