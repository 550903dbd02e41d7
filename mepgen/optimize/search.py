"""The search: rounds of proposals from the best so far and diverse elites, judged only by the evaluator.

Each round the strategy names parents; the available proposers turn them into Proposals; duplicates (by
content hash of kernel.cu and launch) are dropped; the rest are evaluated by `evaluate(proposals, workdir)`
(in production `candidates.Stream`, in tests a stand-in: the search never looks inside it). When `evaluate` also
has `submit(proposal, workdir) -> Future`, each proposal is submitted the moment a proposer returns it, so its
compile runs while the proposers write the rest of the round and the GPUs judge the first ones; the round's
results are still taken in its order, the same as one call would give (`on_faster` alone hears a faster result
the moment it arrives: optimize starts the winner's memcheck build then). A candidate
that fails to compile, faults or computes wrong results goes back to its proposer with the evidence, up to
`repairs` rounds per candidate. A candidate is accepted only when the evaluator's noise-aware rule calls it
faster than the ORIGINAL kernel (`EvalResult.faster`); the best is the accepted one with the lowest median.

The search stops at the candidate budget, the wall-time budget, the roofline (the best reaches
`roofline_pct` of the GPU's measured peak bandwidth or FLOP rate), when no proposer has anything new, or
when every proposer became unavailable; whatever was evaluated is kept. A restarted run replays its
trajectory: evaluated candidates are not evaluated again.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..evaluate.results import EvalResult
from .candidates import WORK
from .lookahead import Lookahead
from .proposer import Attempt, Context, Proposal
from .strategies import MCTS, State, Strategy
from .trajectory import Trajectory, content_hash, pct_roofline

REPAIRABLE = ("rejected_by_rules", "compile_failed", "runtime_fault", "wrong_result")

Evaluate = Callable[[list[Proposal], Path], list]


class ProposerUnavailable(Exception):
    """A proposer cannot go on (endpoint unreachable, key refused, rate limited or timing out after its
    retries): the search continues with the others, or stops cleanly when none is left."""


#: a measured share of the peak above this means the work estimate overstates the bytes or FLOPs moved
ROOFLINE_TRUSTED_PCT = 105.0


def auto_width(cores: int | None = None) -> int:
    """Proposals per round when not given: half the CPU cores, 4 to 8. A round ends at a barrier (the strategy
    picks the next parents from its verdicts), where the GPU waits for the next round's first compile; wider
    rounds on a machine whose cores compile them side by side cross fewer barriers (8 per round on 16 cores: 3
    rounds for the default budget of 25, 8, 8 and 9 (Search._room), instead of 7 of 4)."""
    cores = cores if cores is not None else (os.cpu_count() or 1)
    return max(4, min(8, cores // 2))


@dataclass
class Budget:
    candidates: int = 25
    seconds: float | None = None
    repairs: int = 2
    width: int = 4                # proposals per round
    roofline_pct: float = 90.0


@dataclass
class Outcome:
    best: Attempt | None
    attempts: list[Attempt]
    evaluations: int
    stop_reason: str
    unavailable: dict[str, str] = field(default_factory=dict)


class Search:
    def __init__(self, ctx: Context, proposers: list, evaluate: Evaluate, strategy: Strategy, budget: Budget,
                 trajectory: Trajectory, baseline=None, on_win: Callable[[Attempt], None] | None = None,
                 clock: Callable[[], float] = time.monotonic, start: float | None = None,
                 on_progress: Callable[["Outcome"], None] | None = None, pace_s: float | None = None,
                 on_faster: Callable[[Proposal, EvalResult], None] | None = None):
        self.ctx, self.proposers, self.evaluate = ctx, list(proposers), evaluate
        self.strategy, self.budget, self.traj = strategy, budget, trajectory
        self.baseline, self.on_win, self.clock = baseline, on_win, clock
        self.state = State()
        self.owner: dict[str, object] = {}           # attempt id -> the proposer that made it
        self.repairs_of: dict[str, int] = {}         # root candidate id -> repair rounds spent
        self.seen: set[str] = {content_hash(ctx.original, None)}
        self.evaluations = 0
        self.counter = 0
        self.unavailable: dict[str, str] = {}
        self.start = clock() if start is None else start    # the time limit covers what ran before (the baseline)
        self.on_progress = on_progress                        # after every batch: a provisional Outcome
        self.first_pace = pace_s      # what one candidate should take (estimated from the baseline) until measured
        self.submit = getattr(evaluate, "submit", None)       # streaming: a proposal starts as soon as it exists
        self.started: dict[int, object] = {}                  # id(proposal) -> the future of its result
        # streaming: a faster result, told the moment its future completes (before its round is recorded; on_win
        # follows then, in the round's order): on the thread that completed it
        self.on_faster = on_faster
        self.faster_errors: list[str] = []        # what on_faster raised (told in the trajectory after the round)
        self.lookahead = Lookahead(self)          # the next round compiled ahead while this one's tail is judged

    # --- bookkeeping --------------------------------------------------------------------------------

    @property
    def available(self) -> list:
        return [p for p in self.proposers if p.name not in self.unavailable]

    def best(self) -> Attempt | None:
        wins = [a for a in self.state.attempts.values() if getattr(a.result, "faster", False)]
        return min(wins, key=lambda a: a.result.timed.median_ms) if wins else None

    def _next_id(self) -> str:
        self.counter += 1
        return f"c{self.counter:04d}"

    def _drop(self, proposer, e: ProposerUnavailable) -> None:
        self.unavailable[proposer.name] = str(e)
        rest = [p.name for p in self.available]
        self.traj.event("proposer_unavailable",
                        f"the {proposer.name} proposer stopped: {e}"
                        + (f"; continuing with {', '.join(rest)}" if rest else "; no proposer left"))

    def _record(self, attempt: Attempt, proposer) -> None:
        self.state.attempts[attempt.id] = attempt
        self.owner[attempt.id] = proposer
        self.ctx.history.append(attempt)
        sp = attempt.result.timed.speedup if attempt.ok and attempt.result.timed and attempt.result.timed.speedup else 0.0
        self.strategy.observe(attempt, sp if attempt.ok else 0.0)
        if getattr(attempt.result, "faster", False) and self.on_win is not None:
            self.on_win(attempt)

    def _drain_rejections(self, proposer, parent: Attempt | None) -> None:
        take = getattr(proposer, "take_rejections", None)
        for r in (take() if take else []):
            self.traj.reject(self._next_id(), r.get("parent") or (parent.id if parent else None), proposer.name,
                             r.get("change", "reply"), r["message"])

    # --- resume -------------------------------------------------------------------------------------

    def resume(self) -> int:
        """Replay the trajectory's attempts; returns how many were restored."""
        n = 0
        for rec in self.traj.attempts():
            num = rec["id"][1:]
            self.counter = max(self.counter, int(num) if num.isdigit() else 0)
            if rec.get("result") is None:
                continue
            if rec.get("hash"):
                self.seen.add(rec["hash"])
            try:
                text = self.traj.candidate_text(rec["id"])
            except OSError:
                continue
            res = EvalResult.from_dict(rec["result"])
            prop = Proposal(text=text, change=rec["change"], source=rec["source"],
                            transformations=rec.get("transformations") or [], launch=rec.get("launch"),
                            strategy=rec.get("strategy", ""), nvcc_flags=rec.get("nvcc_flags") or [])
            a = Attempt(rec["id"], prop, res, parent=rec.get("parent"), repair_of=rec.get("repair_of"))
            owner = next((p for p in self.proposers if p.name == rec.get("proposer")), None)
            self.state.attempts[a.id] = a
            self.owner[a.id] = owner
            self.ctx.history.append(a)
            sp = res.timed.speedup if getattr(res, "ok", False) and res.timed and res.timed.speedup else 0.0
            self.strategy.observe(a, sp)
            self.evaluations += 1
            n += 1
        return n

    # --- the loop -----------------------------------------------------------------------------------

    def _stop_reason(self) -> str | None:
        b = self.budget
        if self.evaluations >= b.candidates:
            return f"candidate budget reached ({b.candidates})"
        if b.seconds is not None:
            left = b.seconds - (self.clock() - self.start)
            if left <= 0:
                return f"time limit reached ({b.seconds:g} s)"
            pace = self._pace()
            if pace is not None and pace > left:      # a candidate that cannot finish is not started
                return (f"time limit reached ({b.seconds:g} s): {left:.0f} s left, one candidate takes about "
                        f"{pace:.0f} s")
        best = self.best()
        ref = best.result if best is not None else self.baseline
        pct = pct_roofline(ref) if ref is not None else None
        # above the peak, the MEP's work estimate (mep.yaml `work`) is wrong, not the kernel done: keep going
        if pct is not None and b.roofline_pct <= pct <= ROOFLINE_TRUSTED_PCT:
            who = f"{best.id}" if best is not None else "the original"
            return f"roofline reached: {who} runs at {pct:.0f}% of the GPU's peak (threshold {b.roofline_pct:g}%)"
        if not self.available:
            return "no proposer available: " + "; ".join(f"{k}: {v}" for k, v in self.unavailable.items())
        return None

    def _ask(self, proposer, parent: Attempt | None, want: int) -> list[Proposal]:
        try:
            return proposer.propose(self.ctx, parent, want)
        except ProposerUnavailable as e:
            self._drop(proposer, e)
            return []
        finally:
            self._drain_rejections(proposer, parent)

    def _fresh(self, props: list[Proposal], room: int) -> list[Proposal]:
        out = []
        for p in props:
            h = content_hash(p.text, p.launch, p.nvcc_flags)
            if h not in self.seen and len(out) < room:
                self.seen.add(h)
                out.append(p)
        return out

    def _collect(self, parents: list[Attempt | None], room: int) -> list[tuple[Proposal, object, Attempt | None]]:
        """Up to `room` new proposals, shared out over the parents and the available proposers. A proposer
        whose proposals were all seen before is asked once more for more of them (deterministic proposers
        list the same first choices again)."""
        out: list[tuple[Proposal, object, Attempt | None]] = []
        share = self.share(room, parents)
        for parent in parents:
            for proposer in self.available:
                if len(out) >= room:
                    return out
                want = min(share, room - len(out))
                props = self._ask(proposer, parent, want)
                fresh = self._fresh(props, want)
                if not fresh and props and proposer.name not in self.unavailable:
                    tried = sum(1 for a in self.state.attempts.values() if a.parent == (parent.id if parent else None))
                    fresh = self._fresh(self._ask(proposer, parent, want + tried + len(props)), want)
                if not fresh and isinstance(self.strategy, MCTS):
                    self.strategy.mark_exhausted(parent)
                for p in fresh:
                    self.lookahead.note_proposed(p)
                    self._start(p)
                out += [(p, proposer, parent) for p in fresh]
        return out

    def share(self, room: int, parents: list) -> int:
        """Proposals asked of each (parent, proposer) pair for a round of `room`."""
        return max(1, -(-room // max(1, len(parents) * max(1, len(self.available)))))

    def _start(self, proposal: Proposal) -> None:
        """Submit a proposal to a streaming evaluate now (its compile starts while the round is still collected)."""
        if self.submit is not None:
            future = self.submit(proposal, self.traj.folder / WORK)
            self.started[id(proposal)] = future
            if self.on_faster is not None:
                future.add_done_callback(lambda f, p=proposal: self._tell_faster(p, f))

    def _tell_faster(self, proposal: Proposal, future) -> None:
        """on_faster(proposal, result) where the future's result is faster. A done-callback: it runs on the thread
        that completed the future (the pipeline's GPU thread; the caller's where it was done already)."""
        try:
            if future.cancelled() or future.exception() is not None:
                return
            result = future.result()
            if getattr(result, "faster", False):
                self.on_faster(proposal, result)
        except Exception as e:  # noqa: BLE001 (a head start only, never raised into the pipeline's GPU thread, where
            # concurrent.futures would log it over the progress lines; the round's on_win still tells the win, and
            # the trajectory says what failed once the round is recorded)
            self.faster_errors.append(f"{type(e).__name__}: {e}")

    def _evaluate(self, batch: list[tuple[Proposal, object, Attempt | None, str | None]]) -> list[Attempt]:
        if not batch:
            return []
        if self.submit is not None:
            for p, *_ in batch:
                if id(p) not in self.started:
                    self._start(p)
            futures = [self.started.pop(id(p)) for p, *_ in batch]
            self.lookahead.wait(batch, futures)      # guesses the next round as results arrive (lookahead.py)
            results = [f.result() for f in futures]
        else:
            results = self.evaluate([p for p, *_ in batch], self.traj.folder / WORK)
        done = []
        for (prop, proposer, parent, repair_of), res in zip(batch, results):
            a = Attempt(self._next_id(), prop, res, parent=parent.id if parent else None, repair_of=repair_of)
            self.evaluations += 1
            self._record(a, proposer)
            self.traj.add(a, proposer.name if proposer is not None else prop.source, self.evaluations,
                          self.budget.candidates)
            done.append(a)
        if self.faster_errors:
            told, self.faster_errors = self.faster_errors, []
            self.traj.event("on_faster_failed", f"the early hand-over of a faster result failed ({told[0]}"
                                                f"{f', and {len(told) - 1} more' if len(told) > 1 else ''}); the "
                                                f"round's record told the win as before")
        if self.on_progress is not None:
            self.on_progress(self.snapshot("still running"))
        return done

    def snapshot(self, stop_reason: str) -> Outcome:
        return Outcome(self.best(), list(self.state.attempts.values()), self.evaluations, stop_reason,
                       dict(self.unavailable))

    def _pace(self) -> float | None:
        """Seconds per candidate: the mean of those evaluated, else the estimate given (None: unknown)."""
        spent = [getattr(a.result, "seconds", 0.0) or 0.0 for a in self.state.attempts.values()]
        if spent:
            return sum(spent) / len(spent)
        return self.first_pace

    def _room_in_time(self, room: int) -> int:
        """Under a time limit, no more candidates in a round than the time left allows at the pace so far."""
        if self.budget.seconds is None:
            return room
        left = self.budget.seconds - (self.clock() - self.start)
        pace = self._pace()
        return max(1, min(room, int(left // pace))) if pace else room

    def _room(self, evaluated: int | None = None) -> int:
        """Proposals in the next round (after `evaluated` evaluations; default: those so far): the width, or what is
        left of the budget when that exceeds the width by a quarter of it at most (25 candidates at width 8: 8, 8, 9,
        not 8, 8, 8, 1: a last round of one would wait for its compile alone, the GPU idle); 0 when none is left."""
        left = self.budget.candidates - (self.evaluations if evaluated is None else evaluated)
        if left <= 0:
            return 0
        return left if left - self.budget.width <= self.budget.width // 4 else self.budget.width

    def _repair(self, failed: list[Attempt]) -> None:
        """Hand each failure back to its proposer, round after round, up to `repairs` rounds per candidate."""
        while failed:
            batch = []
            for a in failed:
                root = a.repair_of and self._root(a) or a.id
                if self.repairs_of.get(root, 0) >= self.budget.repairs or self._stop_reason():
                    continue
                if self.evaluations + len(batch) >= self.budget.candidates:
                    break
                proposer = self.owner.get(a.id)
                if proposer is None or proposer.name in self.unavailable:
                    continue
                try:
                    fix = proposer.repair(self.ctx, a)
                except ProposerUnavailable as e:
                    self._drop(proposer, e)
                    continue
                finally:
                    self._drain_rejections(proposer, a)
                self.repairs_of[root] = self.repairs_of.get(root, 0) + 1
                if fix is None:
                    continue
                h = content_hash(fix.text, fix.launch, fix.nvcc_flags)
                if h in self.seen:
                    continue
                self.seen.add(h)
                parent = self.state.attempts.get(a.parent) if a.parent else None
                self._start(fix)          # its compile runs while the other failures are repaired
                batch.append((fix, proposer, parent, a.id))
            done = self._evaluate(batch)
            failed = [d for d in done if getattr(d.result, "status", "") in REPAIRABLE]

    def _root(self, a: Attempt) -> str:
        while a.repair_of and a.repair_of in self.state.attempts:
            a = self.state.attempts[a.repair_of]
        return a.id

    def run(self) -> Outcome:
        stop = None
        while stop is None:
            stop = self._stop_reason()
            if stop:
                break
            room = self._room_in_time(self._room())
            parents = self.strategy.parents(self.state, self.budget.width)
            items = self._collect(parents, room)
            if not items:
                stop = self._stop_reason() or "no proposer has anything new to propose"
                break
            done = self._evaluate([(p, who, parent, None) for p, who, parent in items])
            self._repair([a for a in done if getattr(a.result, "status", "") in REPAIRABLE])
        said = self.lookahead.report()
        if said:
            self.traj.event("lookahead", said)
        self.traj.event("stopped", f"stopped after {self.evaluations} evaluation(s): {stop}")
        return Outcome(self.best(), list(self.state.attempts.values()), self.evaluations, stop, dict(self.unavailable))
