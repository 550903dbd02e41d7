"""A time budget per kernel and stage: a kernel whose analysis runs too long is stopped and named, so that
one pathological kernel (an expression of thousands of terms, a huge unrolled body) cannot hold up the
others or the whole command.

The budget is wall-clock seconds, `MEPGEN_KERNEL_BUDGET` in the environment (default 120; 0 turns it
off). It is enforced with SIGALRM, so only in the main thread of a process on a platform that has it
(extraction workers are processes, each with its own main thread); elsewhere the work runs unbounded.
"""
from __future__ import annotations

import os
import signal
import threading
from contextlib import contextmanager

from .errors import MepgenError

DEFAULT_SECONDS = 120.0


class BudgetExceeded(MepgenError):
    """A stage ran past its per-kernel budget; the message names the stage and the kernel."""


def kernel_budget_seconds() -> float:
    raw = os.environ.get("MEPGEN_KERNEL_BUDGET", "")
    try:
        value = float(raw) if raw.strip() else DEFAULT_SECONDS
    except ValueError:
        raise MepgenError(f"MEPGEN_KERNEL_BUDGET='{raw}' is not a number of seconds") from None
    return max(0.0, value)


@contextmanager
def time_budget(what: str, seconds: float | None = None):
    """Run the block within `seconds` (default: the per-kernel budget); past it, raise BudgetExceeded
    naming `what` (e.g. "mep: analysing heat::step"). Nested budgets: the inner one is not armed (the
    outer one stays in force)."""
    seconds = kernel_budget_seconds() if seconds is None else seconds
    usable = seconds > 0 and hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
    if not usable or signal.getitimer(signal.ITIMER_REAL)[0] > 0:
        yield
        return

    def expired(signum, frame):
        raise BudgetExceeded(f"{what} exceeded its budget of {seconds:g} s (MEPGEN_KERNEL_BUDGET)")

    previous = signal.signal(signal.SIGALRM, expired)
    # repeating: an exception raised inside a libclang callback is swallowed there, so the alarm fires
    # again until one reaches this block
    signal.setitimer(signal.ITIMER_REAL, seconds, 0.2)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
