"""A small driver of the library alone (used by the benchmark and by tests; `mepgen optimize` has its
own search): rounds of proposals from the best verified attempt so far, until the budget is spent or
nothing new is proposed. `evaluate` is any callable turning proposals into EvalResults.
"""
from __future__ import annotations

from typing import Callable

from ..proposer import Attempt, Context
from .proposer import LibraryProposer, cost_of


def best_attempt(history: list[Attempt]) -> Attempt | None:
    scored = [(cost_of(a.result), i, a) for i, a in enumerate(history)]
    scored = [s for s in scored if s[0] is not None and getattr(s[2].result.timed, "decision", "") == "faster"]
    return min(scored)[2] if scored else None


def run_library(ctx: Context, evaluate: Callable, budget: int, per_round: int = 8,
                proposer: LibraryProposer | None = None, log=lambda m: None,
                stop: Callable[[], bool] = lambda: False) -> list[Attempt]:
    """`stop()`: checked between rounds (a wall-clock deadline)."""
    proposer = proposer or LibraryProposer()
    spent, stale = 0, 0
    while spent < budget and not stop():
        best = best_attempt(ctx.history)
        proposals = proposer.propose(ctx, best, min(per_round, budget - spent))
        if not proposals and best is not None:      # the best path is exhausted: widen from the original
            proposals = proposer.propose(ctx, None, min(per_round, budget - spent))
        if not proposals:
            break
        results = evaluate(proposals)
        for p, r in zip(proposals, results):
            ctx.history.append(Attempt(id=f"a{len(ctx.history)}", proposal=p, result=r,
                                       parent=best.id if best else None))
            log(f"{r.status:>14}  {getattr(r.timed, 'speedup', None) or 0:6.2f}x  {p.change}")
        spent += len(proposals)
        stale = stale + 1 if best_attempt(ctx.history) is best else 0
        if stale >= 3:
            break
    return ctx.history
