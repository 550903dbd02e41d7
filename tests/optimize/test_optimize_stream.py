"""The search with a streaming evaluate (candidates.Stream in production): each proposal is submitted the moment
its proposer returns it, so its compile overlaps the rest of the round's proposing; the trajectory (ids, parents,
verdicts, repairs) is the one a batch evaluate gives."""
from __future__ import annotations

import json
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor

from mepgen.optimize import strategies
from mepgen.optimize.search import Budget, Search, auto_width
from mepgen.optimize.trajectory import Trajectory
from optimize_fakes import FakeEvaluate, MarkerProposer, baseline, make_ctx, score


class StreamingEvaluate:
    """submit(proposal, workdir) -> Future: a stand-in 'compile' sleeping `compile_s` on a thread pool, then the
    marker's verdict; records when each submit happened."""

    def __init__(self, compile_s: float = 0.0, jobs: int = 8):
        self.compile_s = compile_s
        self.pool = ThreadPoolExecutor(jobs)
        self.submitted: list[float] = []
        self.seen: list[str] = []

    def submit(self, proposal, workdir) -> Future:
        self.submitted.append(time.monotonic())
        self.seen.append(proposal.text)
        n = len(self.seen)

        def run():
            time.sleep(self.compile_s)
            return score(proposal.text, f"cand{n}")
        return self.pool.submit(run)

    def __call__(self, proposals, workdir):
        raise AssertionError("a streaming evaluate is never called with a whole batch")


class SlowProposer(MarkerProposer):
    """A proposer that takes `seconds` per call (a library parse, an LLM reply); records when each call ended."""

    def __init__(self, seconds: float, **kw):
        super().__init__(**kw)
        self.seconds, self.returned = seconds, []

    def propose(self, ctx, parent, budget):
        time.sleep(self.seconds)
        out = super().propose(ctx, parent, budget)
        self.returned.append(time.monotonic())
        return out


def run(tmp_path, name, evaluate, proposer, budget, **hooks):
    ctx = make_ctx(tmp_path / name)
    traj = Trajectory(tmp_path / name / "run", {"kernel": "cg.xpay", "spec_sha256": "s"})
    out = Search(ctx, [proposer], evaluate, strategies.make("elite"), budget, traj, baseline=baseline(),
                 **hooks).run()
    return out, [(a.id, a.parent, a.repair_of, a.proposal.change, a.result.status,
                  a.result.timed.decision if a.result.timed else None) for a in out.attempts]


def test_streaming_gives_the_batch_trajectory(tmp_path):
    budget = Budget(candidates=14, width=3, repairs=1)
    extra = [("compile", "broken edit"), ("speed=1.3", "coalesce")]
    batch_out, batch_trail = run(tmp_path, "batch", FakeEvaluate(), MarkerProposer(extra=extra), budget)
    stream_out, stream_trail = run(tmp_path, "stream", StreamingEvaluate(), MarkerProposer(extra=extra), budget)
    assert stream_trail == batch_trail
    assert any(t[2] for t in stream_trail)                         # a repair went through the stream too
    assert stream_out.best.id == batch_out.best.id and stream_out.stop_reason == batch_out.stop_reason


def test_a_proposal_compiles_while_the_round_is_still_proposed(tmp_path):
    """Four parents' proposals in a round, 0.1 s per proposer call, 0.3 s per compile: the round's first proposal
    is submitted (its compile starts) as soon as its proposer returns, before the round's last proposer call."""
    ev = StreamingEvaluate(compile_s=0.3)
    proposer = SlowProposer(0.1, ladder=(1.1, 1.2, 1.3, 1.4, 1.5))
    start = time.monotonic()
    out, trail = run(tmp_path, "overlap", ev, proposer, Budget(candidates=8, width=4))
    wall = time.monotonic() - start
    assert out.evaluations == 8
    # round 2 (4 parents, one call each): its first submit precedes its last proposer call's return
    second_round = [t for t in ev.submitted if t > proposer.returned[0] + 0.2]
    assert second_round and second_round[0] < proposer.returned[-1]
    calls = len(proposer.returned)
    assert wall < calls * 0.1 + 2 * 0.3 + 1.0          # two rounds: each waits for one compile after its proposals


def test_auto_width_follows_the_cores():
    assert auto_width(2) == 4 and auto_width(1) == 4      # small machines keep the old default
    assert auto_width(12) == 6 and auto_width(16) == 8 and auto_width(128) == 8


def test_no_round_of_one_at_the_end(tmp_path):
    """25 candidates at width 8: rounds of 8, 8 and 9 (a last round of one would wait for its compile alone)."""
    sizes = []

    class Recording(FakeEvaluate):
        def __call__(self, proposals, workdir):
            sizes.append(len(proposals))
            return super().__call__(proposals, workdir)
    ladder = tuple(1.0 + 0.01 * i for i in range(1, 30))
    out, _ = run(tmp_path, "rounds", Recording(), MarkerProposer(ladder=ladder), Budget(candidates=25, width=8))
    assert out.evaluations == 25 and sizes == [8, 8, 9]
    sizes.clear()
    out, _ = run(tmp_path, "rounds3", Recording(), MarkerProposer(ladder=ladder), Budget(candidates=10, width=3))
    assert sizes == [3, 3, 3, 1]          # a quarter of 3 is no candidate: the width holds


class GatedEvaluate(StreamingEvaluate):
    """The first proposal's result at once; every later one waits for `gate` (5 s at most). `events`: each
    result's completion, in order."""

    def __init__(self):
        super().__init__()
        self.gate, self.events = threading.Event(), []

    def submit(self, proposal, workdir) -> Future:
        self.seen.append(proposal.text)
        n = len(self.seen)

        def run():
            if n > 1:
                self.gate.wait(5)
            self.events.append(("done", n))
            return score(proposal.text, f"cand{n}")
        return self.pool.submit(run)


def test_a_faster_result_is_told_the_moment_it_arrives_and_the_trajectory_is_unchanged(tmp_path):
    """on_faster (optimize: the winner's memcheck harness starts building) hears the round's first faster result
    while the round's later candidates are still being judged (they wait for the hook here); on_win and the
    trajectory come at the round's end, in its order, as without the hook."""
    ev, wins, told = GatedEvaluate(), [], []

    def on_faster(proposal, result):
        ev.events.append(("faster", ev.seen.index(proposal.text) + 1))
        told.append((proposal, result))
        ev.gate.set()
    budget = Budget(candidates=3, width=3)
    out, trail = run(tmp_path, "hooked", ev, MarkerProposer(), budget, on_faster=on_faster,
                     on_win=lambda a: wins.append((a.id, len(told))))
    ev.pool.shutdown(wait=True)            # a future's callbacks run on its thread after its waiter wakes
    assert ev.events[:2] == [("done", 1), ("faster", 1)]                  # before candidates 2 and 3 completed
    assert sorted(e for e in ev.events if e[0] == "faster") == [("faster", 1), ("faster", 2), ("faster", 3)]
    assert [w for w, _ in wins] == ["c0001", "c0002", "c0003"]             # recorded after the round, in order
    assert wins[0][1] >= 1                 # the first win was told before (the others' hooks may race the round)
    by_text = {a.proposal.text: a for a in out.attempts}
    assert all(by_text[p.text].proposal is p and by_text[p.text].result is r for p, r in told)
    _, plain = run(tmp_path, "plain", StreamingEvaluate(), MarkerProposer(), budget)
    assert trail == plain and out.best.id == "c0003"


def test_a_hook_that_raises_does_not_disturb_the_search(tmp_path):
    def broken(proposal, result):
        raise RuntimeError("the build pool is gone")
    budget = Budget(candidates=6, width=3)
    out, trail = run(tmp_path, "broken", StreamingEvaluate(compile_s=0.01), MarkerProposer(), budget,
                     on_faster=broken)
    _, plain = run(tmp_path, "plain", StreamingEvaluate(compile_s=0.01), MarkerProposer(), budget)
    assert trail == plain and out.evaluations == 6 and out.best is not None
    events = [json.loads(ln) for ln in (tmp_path / "broken" / "run" / "trajectory.jsonl").read_text().splitlines()]
    told = [e["message"] for e in events if e.get("event") == "on_faster_failed"]
    assert told and "RuntimeError: the build pool is gone" in told[0]          # said, not swallowed
