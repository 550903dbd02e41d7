"""A per-kernel time budget: a stage that runs too long stops and names what it was doing."""
from __future__ import annotations

import time

import pytest

from mepgen.budget import BudgetExceeded, kernel_budget_seconds, time_budget
from mepgen.errors import MepgenError


def test_a_block_past_its_budget_is_stopped_and_named():
    t0 = time.monotonic()
    with pytest.raises(BudgetExceeded, match=r"mep: completing slow::k exceeded its budget of 0.2 s"):
        with time_budget("mep: completing slow::k", 0.2):
            while True:
                sum(range(1000))
    assert time.monotonic() - t0 < 5


def test_a_block_within_its_budget_runs_to_the_end_and_leaves_no_alarm():
    import signal
    with time_budget("quick", 5):
        x = sum(range(1000))
    assert x == 499500 and signal.getitimer(signal.ITIMER_REAL)[0] == 0


def test_budget_from_the_environment(monkeypatch):
    monkeypatch.setenv("MEPGEN_KERNEL_BUDGET", "7.5")
    assert kernel_budget_seconds() == 7.5
    monkeypatch.setenv("MEPGEN_KERNEL_BUDGET", "soon")
    with pytest.raises(MepgenError, match="MEPGEN_KERNEL_BUDGET"):
        kernel_budget_seconds()
