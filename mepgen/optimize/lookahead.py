"""Lookahead: the next round's likely proposals compiled while the GPU judges the end of this one.

A round of the search ends at a barrier: the strategy picks the next parents from the round's verdicts, the
proposers write from them, and only then do the next compiles start (about 1 s of nvcc) while the GPU waits. A
round's compiles end long before its last candidates are judged (8 candidates of a 20 us kernel: the GPU judges
one every 0.1-0.2 s), so the cores are free for most of the round's tail.

While the search waits for a round's results, each result that arrives is added to a copy of the state, and the
strategy is asked which parents it would choose next (`Strategy.likely_parents`, which changes nothing). Each
likely parent is given, again with every result (a new best changes the parents, and the original's next tuning
points follow its children's costs), to the deterministic proposers (`speculative = True`: the library's proposals are a function
of the parent, the spec and the history alone) on a copy of the context whose history holds the results so far,
and their proposals are linted and compiled ahead into the caches the next round's submit finds
(candidates.Stream.prefetch). Nothing else is touched: the state, the history, the seen set, the trajectory and
the proposers' answers of the real round are exactly those of a search without lookahead, so the search's path is
the same; only a next round's compiles that were guessed right are already done. A wrong guess costs a compile on
a core that was idle (at most CAP x the next round's proposals a round); its folder stays in the run's work/.
Measured (bench/results/gpu_2026-11-28g): PolyBench/GPU's 47 MEPs on 4 H200s, the search's median 7.1 -> 5.9 s
for kernels < 200 us, candidates per minute 108.2 -> 119.6 there (asking each parent once a round; asking again
with every result compiles about a third more ahead, and more of it is used, in bench/search_pipeline.py).

A search whose evaluate cannot prefetch (few cores: the search calls it with whole rounds) has no lookahead.
"""
from __future__ import annotations

from concurrent.futures import FIRST_COMPLETED, wait
from dataclasses import replace

from .candidates import WORK
from .proposer import Attempt
from .strategies import State
from .trajectory import content_hash


class Lookahead:
    #: proposals compiled ahead in a round, at most this many times the next round's room
    CAP = 2

    def __init__(self, search):
        self.s = search
        self.prefetch = getattr(search.evaluate, "prefetch", None)
        self.ahead: set[str] = set()          # content hashes compiled ahead (the whole run)
        self.compiled = 0                     # how many were compiled ahead
        self.used = 0                         # ... and then proposed in a real round
        self.errors: list[str] = []           # what a guess raised (the search goes on without lookahead)
        self.spent = 0                        # compiled ahead in the round being waited for

    def enabled(self) -> bool:
        return self.prefetch is not None and self.s.submit is not None and not self.errors and bool(self._proposers())

    def _proposers(self) -> list:
        return [p for p in self.s.available if getattr(p, "speculative", False)]

    def note_proposed(self, proposal) -> None:
        """A real round proposed this: counted as used when it was compiled ahead."""
        if content_hash(proposal.text, proposal.launch, proposal.nvcc_flags) in self.ahead:
            self.used += 1

    def wait(self, batch: list[tuple], futures: list) -> None:
        """Wait until every future of the round is done, guessing and compiling the next round as results
        arrive. Returns without guessing where lookahead is off or nothing follows this round."""
        room = self.s._room(self.s.evaluations + len(batch)) if self.enabled() else 0
        if room <= 0:
            return
        self.spent = 0                        # compiled ahead in this round
        pending = set(futures)
        while pending:
            _, pending = wait(pending, return_when=FIRST_COMPLETED)
            if pending and self.spent < self.CAP * room and not self.errors:
                self._guess(batch, futures, room)

    def _guess(self, batch, futures, room: int) -> None:
        """Ask the likely parents again with every result that arrived (a new best changes the parents; the
        original's next points depend on its children's costs): what was compiled ahead or seen is not again."""
        s = self.s
        hypothetical = []
        for k, ((prop, _proposer, parent, repair_of), fut) in enumerate(zip(batch, futures)):
            if not fut.done() or fut.cancelled() or fut.exception() is not None:
                continue
            hypothetical.append(Attempt(f"c{s.counter + k + 1:04d}", prop, fut.result(),
                                        parent=parent.id if parent else None, repair_of=repair_of))
        state = State({**s.state.attempts, **{a.id: a for a in hypothetical}})
        try:
            parents = s.strategy.likely_parents(state, s.budget.width)
        except Exception as e:  # noqa: BLE001 (a guess only: the real round asks the strategy itself)
            self.errors.append(f"{type(e).__name__}: {e}")
            return
        ctx = replace(s.ctx, history=list(s.ctx.history) + hypothetical)
        share = s.share(room, parents)
        for parent in parents:
            for proposer in self._proposers():
                try:
                    props = proposer.propose(ctx, parent, share)
                except Exception as e:  # noqa: BLE001 (the real round asks again and meets it there)
                    self.errors.append(f"{proposer.name}: {type(e).__name__}: {e}")
                    return
                for p in props[:share]:
                    h = content_hash(p.text, p.launch, p.nvcc_flags)
                    if h in s.seen or h in self.ahead or self.spent >= self.CAP * room:
                        continue
                    try:
                        self.prefetch(p, s.traj.folder / WORK)
                    except Exception as e:  # noqa: BLE001 (an invalid launch: the real submit says it)
                        self.errors.append(f"{type(e).__name__}: {e}")
                        return
                    self.ahead.add(h)
                    self.compiled += 1
                    self.spent += 1

    def report(self) -> str | None:
        """One line for the trajectory at the end of the search, or None where nothing was compiled ahead."""
        if not self.compiled and not self.errors:
            return None
        line = (f"lookahead: {self.compiled} proposal(s) of a next round compiled while the GPU judged the end of "
                f"a round; {self.used} of them were proposed")
        if self.errors:
            line += f"; stopped guessing after: {self.errors[0]}"
        return line
