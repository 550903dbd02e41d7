"""The search loop with a stand-in evaluation function: acceptance, budgets, early stop, repairs, resume,
proposer fall-back, and both strategies."""
from __future__ import annotations

import json

import pytest

from mepgen.errors import MepgenError
from mepgen.optimize import strategies
from mepgen.optimize.proposer import Proposal
from mepgen.optimize.search import Budget, ProposerUnavailable, Search
from mepgen.optimize.trajectory import Trajectory
from optimize_fakes import FakeEvaluate, MarkerProposer, baseline, make_ctx


def new_search(tmp_path, proposers, budget=Budget(candidates=10, width=3), strategy="elite", resume=False,
               evaluate=None, clock=None, name="run1", lines=None, **opts):
    ctx = make_ctx(tmp_path)
    traj = Trajectory(tmp_path / "runs" / name, {"kernel": "cg.xpay", "spec_sha256": "s"}, resume=resume,
                      progress=(lines.append if lines is not None else (lambda line: None)))
    kw = {"clock": clock} if clock else {}
    return Search(ctx, proposers, evaluate or FakeEvaluate(), strategies.make(strategy, **opts), budget, traj,
                  baseline=baseline(), **kw)


def test_elite_climbs_from_the_best_and_accepts_only_faster(tmp_path):
    prop = MarkerProposer(extra=[("speed=1.01", "noise only")])
    out = new_search(tmp_path, [prop], Budget(candidates=12, width=3)).run()
    assert out.evaluations == 12
    assert out.best is not None and out.best.result.faster
    medians = [a.result.timed.median_ms for a in out.attempts if a.ok]
    assert out.best.result.timed.median_ms == min(medians)
    assert out.best.parent is not None                # it climbed: the best is a child of an earlier win
    assert "budget" in out.stop_reason
    noise = [a for a in out.attempts if a.proposal.change == "noise only"]
    assert noise and not noise[0].result.faster       # within noise: never the best even if its median were lower


def test_within_noise_is_never_accepted(tmp_path):
    prop = MarkerProposer(ladder=(1.01, 1.015), extra=[])
    out = new_search(tmp_path, [prop], Budget(candidates=4, width=2)).run()
    assert out.best is None
    assert all(a.result.timed.decision == "same" for a in out.attempts)


def test_time_limit_stops_the_search(tmp_path):
    t = [0.0]

    def clock():
        t[0] += 4.0
        return t[0]
    out = new_search(tmp_path, [MarkerProposer()], Budget(candidates=100, seconds=10, width=2), clock=clock).run()
    assert "time limit" in out.stop_reason and out.evaluations < 100


def test_stops_early_at_the_roofline(tmp_path):
    prop = MarkerProposer(ladder=(1.1,), extra=[("speed=1.4,roof=93", "vectorize float4")])
    out = new_search(tmp_path, [prop], Budget(candidates=50, width=2, roofline_pct=90)).run()
    assert out.stop_reason.startswith("roofline reached") and "93%" in out.stop_reason
    assert out.evaluations == 2 and out.best.proposal.change == "vectorize float4"


def test_a_share_above_the_peak_does_not_stop_the_search(tmp_path):
    """176% of peak (seen on the H200 for heat::apply_boundary) means the work estimate is wrong, not done."""
    prop = MarkerProposer(ladder=(1.1, 1.2), extra=[("speed=1.4,roof=176", "launch 128")])
    out = new_search(tmp_path, [prop], Budget(candidates=4, width=2, roofline_pct=90)).run()
    assert out.stop_reason == "candidate budget reached (4)"
    assert out.evaluations == 4


def test_failures_are_repaired_with_a_bound(tmp_path):
    prop = MarkerProposer(ladder=(), extra=[("compile", "bad intrinsic"), ("wrong", "race")], repair_to="speed=1.3")
    out = new_search(tmp_path, [prop], Budget(candidates=10, width=2, repairs=2)).run()
    repaired = [a for a in out.attempts if a.repair_of]
    assert len(repaired) == 2 and all(a.result.faster for a in repaired)
    assert out.best in repaired
    # a repair that fails again is repaired again, but at most `repairs` times per candidate
    prop2 = MarkerProposer(ladder=(), extra=[("compile", "bad")], repair_to="fault")
    out2 = new_search(tmp_path / "b", [prop2], Budget(candidates=20, width=1, repairs=3)).run()
    chain = [a for a in out2.attempts if a.repair_of]
    assert len(chain) == 3 and out2.best is None
    assert chain[1].repair_of == chain[0].id and chain[2].repair_of == chain[1].id


def test_resume_skips_what_was_evaluated(tmp_path):
    ev1 = FakeEvaluate()
    out1 = new_search(tmp_path, [MarkerProposer()], Budget(candidates=5, width=2), evaluate=ev1).run()
    assert out1.evaluations == 5
    ev2 = FakeEvaluate()
    s2 = new_search(tmp_path, [MarkerProposer()], Budget(candidates=9, width=2), evaluate=ev2, resume=True)
    assert s2.resume() == 5
    out2 = s2.run()
    assert out2.evaluations == 9 and len(ev2.seen) == 4
    assert not set(ev2.seen) & set(ev1.seen)              # nothing evaluated twice
    ids = [json.loads(l)["id"] for l in (tmp_path / "runs/run1/trajectory.jsonl").read_text().splitlines()
           if json.loads(l)["kind"] == "attempt"]
    assert len(ids) == len(set(ids)) == 9
    assert out2.best.result.timed.speedup >= out1.best.result.timed.speedup


def test_resume_refuses_another_kernels_run(tmp_path):
    new_search(tmp_path, [MarkerProposer()], Budget(candidates=1)).run()
    with pytest.raises(MepgenError, match="spec_sha256"):
        Trajectory(tmp_path / "runs/run1", {"kernel": "cg.xpay", "spec_sha256": "other"}, resume=True)
    with pytest.raises(MepgenError, match="exists already"):
        Trajectory(tmp_path / "runs/run1", {"kernel": "cg.xpay", "spec_sha256": "s"})


class Broken:
    name = "llm"

    def __init__(self):
        self.calls = 0

    def propose(self, ctx, parent, budget):
        self.calls += 1
        raise ProposerUnavailable("unreachable: cannot reach http://127.0.0.1:9/v1")

    def repair(self, ctx, failed):
        return None


def test_an_unavailable_proposer_leaves_the_others(tmp_path):
    broken = Broken()
    lines = []
    out = new_search(tmp_path, [broken, MarkerProposer()], Budget(candidates=6, width=2), lines=lines).run()
    assert broken.calls == 1 and out.evaluations == 6 and out.best is not None
    assert "unreachable" in out.unavailable["llm"]
    assert any("the llm proposer stopped" in l and "continuing with library" in l for l in lines)


def test_only_proposer_unavailable_stops_cleanly(tmp_path):
    out = new_search(tmp_path, [Broken()], Budget(candidates=6)).run()
    assert out.evaluations == 0 and out.best is None
    assert out.stop_reason.startswith("no proposer available: llm: unreachable")
    events = [json.loads(l) for l in (tmp_path / "runs/run1/trajectory.jsonl").read_text().splitlines()]
    assert events[-1]["event"] == "stopped"


def test_nothing_new_stops(tmp_path):
    out = new_search(tmp_path, [MarkerProposer(ladder=())], Budget(candidates=6)).run()
    assert out.evaluations == 0 and "anything new" in out.stop_reason


def test_mcts_explores_and_backpropagates(tmp_path):
    s = new_search(tmp_path, [MarkerProposer(extra=[("wrong", "bad"), ("speed=0.8", "slower")])],
                   Budget(candidates=14, width=2, repairs=0), strategy="mcts", c=0.5, max_children=3)
    out = s.run()
    root = s.strategy.root
    assert out.evaluations == 14 and root.visits == 14
    assert sum(c.visits for c in root.children) == root.visits
    # the reward of a node is the sum over its subtree: a deeper win is counted at the root too
    assert abs(root.reward - sum(a.result.timed.speedup for a in out.attempts if a.ok)) < 1e-6
    depth = max(len(chain) for chain in [_depth(n) for n in s.strategy.nodes.values()])
    assert depth >= 2 and out.best.result.faster


def _depth(node):
    out = []
    while node is not None and node.attempt is not None:
        out.append(node)
        node = node.parent
    return out


def test_strategy_options_are_declared():
    with pytest.raises(MepgenError, match="unknown option.*explore.*known: c, max_children, virtual_loss"):
        strategies.make("mcts", explore=2)
    with pytest.raises(MepgenError, match="unknown strategy"):
        strategies.make("annealing")
    assert strategies.make("elite", elites=2).options == {"elites": 2, "original_rounds": 1}


def test_duplicate_proposals_are_evaluated_once(tmp_path):
    class Same(MarkerProposer):
        def propose(self, ctx, parent, budget):
            return [Proposal(text=ctx.original + "// MARK:speed=1.2\n", change="same again", source="library")]
    ev = FakeEvaluate()
    out = new_search(tmp_path, [Same()], Budget(candidates=5, width=2), evaluate=ev).run()
    assert len(ev.seen) == 1 and out.evaluations == 1
