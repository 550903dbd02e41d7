"""Lookahead (optimize/lookahead.py): while a round's last candidates are judged, the next round's likely proposals
are compiled ahead. The search's path must not change: the same attempts, parents, verdicts and best as a search
whose evaluate cannot prefetch; only a guessed proposal's compile is started earlier."""
from __future__ import annotations

import json
import time
from concurrent.futures import Future, ThreadPoolExecutor

from mepgen.optimize import strategies
from mepgen.optimize.search import Budget, Search
from mepgen.optimize.strategies import State
from mepgen.optimize.trajectory import Trajectory
from optimize_fakes import MarkerProposer, baseline, make_ctx, score


class SpeculativeMarker(MarkerProposer):
    speculative = True


class SerialGPU:
    """submit: a result every `judge_s`, one at a time (the GPU judging a round's candidates in turn); with
    `prefetch` the texts compiled ahead, and when (relative to the submits)."""

    def __init__(self, judge_s: float = 0.02, can_prefetch: bool = True):
        self.judge_s = judge_s
        self.gpu = ThreadPoolExecutor(1)
        self.log: list[tuple[str, str]] = []            # ("submit" | "ahead", text), in order
        if can_prefetch:
            self.prefetch = self._prefetch

    def submit(self, proposal, workdir) -> Future:
        self.log.append(("submit", proposal.text))
        n = len(self.log)

        def judge():
            time.sleep(self.judge_s)
            return score(proposal.text, f"cand{n}")
        return self.gpu.submit(judge)

    def _prefetch(self, proposal, workdir) -> None:
        self.log.append(("ahead", proposal.text))

    def __call__(self, proposals, workdir):
        raise AssertionError("a streaming evaluate is never called with a whole batch")


def run(tmp_path, name, evaluate, proposer, budget, strategy="elite"):
    ctx = make_ctx(tmp_path / name)
    traj = Trajectory(tmp_path / name / "run", {"kernel": "cg.xpay", "spec_sha256": "s"})
    out = Search(ctx, [proposer], evaluate, strategies.make(strategy), budget, traj, baseline=baseline()).run()
    trail = [(a.id, a.parent, a.repair_of, a.proposal.text, a.result.status,
              a.result.timed.decision if a.result.timed else None) for a in out.attempts]
    events = [json.loads(ln) for ln in (tmp_path / name / "run" / "trajectory.jsonl").read_text().splitlines()]
    return out, trail, [e for e in events if e.get("kind") == "event"]


LADDER = (1.1, 1.2, 1.3, 1.4, 1.5, 1.6)


def test_the_next_round_is_compiled_ahead_and_the_path_is_the_same(tmp_path):
    budget = Budget(candidates=12, width=4)
    ahead_ev = SerialGPU()
    out, trail, events = run(tmp_path, "ahead", ahead_ev, SpeculativeMarker(ladder=LADDER), budget)
    plain_out, plain_trail, plain_events = run(tmp_path, "plain", SerialGPU(can_prefetch=False),
                                               SpeculativeMarker(ladder=LADDER), budget)
    assert trail == plain_trail and out.best.id == plain_out.best.id and out.stop_reason == plain_out.stop_reason
    assert not [e for e in plain_events if e["event"] == "lookahead"]
    ahead = [t for kind, t in ahead_ev.log if kind == "ahead"]
    submits = [t for kind, t in ahead_ev.log if kind == "submit"]
    used = [t for t in ahead if t in submits]
    assert used, "no proposal compiled ahead was proposed by a later round"
    for t in used:     # compiled ahead: before its own submit, and while the round before it was still judged
        assert ahead_ev.log.index(("ahead", t)) < ahead_ev.log.index(("submit", t))
    assert submits[:4] == [a[3] for a in trail[:4]]            # round 1 is never guessed (nothing to guess from)
    assert not set(ahead) & set(submits[:4])
    said = [e["message"] for e in events if e["event"] == "lookahead"]
    assert said and f"{len(ahead)} proposal(s)" in said[0] and f"{len(used)} of them were proposed" in said[0]


def test_a_guess_stays_within_the_cap(tmp_path):
    """At most CAP x the next round's proposals are compiled ahead a round, however many results arrive."""
    ev = SerialGPU()
    out, _, _ = run(tmp_path, "cap", ev, SpeculativeMarker(ladder=LADDER), Budget(candidates=9, width=3))
    from mepgen.optimize.lookahead import Lookahead
    rounds, current = [], 0
    for kind, _ in ev.log:           # ahead entries between two rounds' submits belong to one round's wait
        if kind == "ahead":
            current += 1
        elif current:
            rounds.append(current)
            current = 0
    assert rounds and max(rounds) <= Lookahead.CAP * 3


def test_no_lookahead_without_a_speculative_proposer_or_for_mcts(tmp_path):
    budget = Budget(candidates=8, width=4)
    ev = SerialGPU()
    run(tmp_path, "plainprop", ev, MarkerProposer(ladder=LADDER), budget)
    assert not [k for k, _ in ev.log if k == "ahead"]
    ev = SerialGPU()
    run(tmp_path, "mcts", ev, SpeculativeMarker(ladder=LADDER), budget, strategy="mcts")
    assert not [k for k, _ in ev.log if k == "ahead"]


def test_a_guess_that_raises_stops_guessing_and_is_said(tmp_path):
    class Flaky(SpeculativeMarker):
        """Raises when asked on any context but the search's own (the first it sees): a guess's copy."""
        own = None

        def propose(self, ctx, parent, budget):
            self.own = self.own or ctx
            if ctx is not self.own:
                raise RuntimeError("parser state lost")
            return super().propose(ctx, parent, budget)
    budget = Budget(candidates=8, width=4)
    out, trail, events = run(tmp_path, "flaky", SerialGPU(), Flaky(ladder=LADDER), budget)
    _, plain, _ = run(tmp_path, "plain", SerialGPU(can_prefetch=False), SpeculativeMarker(ladder=LADDER), budget)
    assert trail == plain and out.evaluations == 8
    said = [e["message"] for e in events if e["event"] == "lookahead"]
    assert said and "stopped guessing after: library: RuntimeError: parser state lost" in said[0]


def test_elite_likely_parents_are_its_next_parents_and_change_nothing(tmp_path):
    out, _, _ = run(tmp_path, "state", SerialGPU(can_prefetch=False), MarkerProposer(ladder=LADDER),
                    Budget(candidates=8, width=4))
    state = State({a.id: a for a in out.attempts})
    elite = strategies.make("elite", original_rounds=2)
    first = elite.likely_parents(state, 4)
    assert elite.rounds == 0 and elite.likely_parents(state, 4) == first
    assert elite.parents(state, 4) == first and elite.rounds == 1
    assert first[-1] is None                 # round 1 of 2 original rounds: the original is a parent
    assert strategies.make("mcts").likely_parents(state, 4) == []
