"""The LLM proposer end to end: the real openai client against a scripted chat-completions server on
loopback, inside the real search loop, with a stand-in evaluation function (no GPU)."""
from __future__ import annotations

import json
import socket

import pytest

from chat_server import ChatServer
from mepgen.optimize import strategies
from mepgen.llm.client import ChatClient, LLMSettings
from mepgen.optimize.llm.proposer import LLMProposer
from mepgen.optimize.search import Budget, Search
from mepgen.optimize.summary import write as write_summary
from mepgen.optimize.trajectory import Trajectory
from optimize_fakes import COMPILER_MESSAGE, XPAY, FakeEvaluate, MarkerProposer, baseline, make_ctx

KEY_ENV, KEY = "MEPGEN_TEST_KEY", "sk-test-very-secret-4242"


def kernel(marker: str, body: str = "p[i] = x[i] + beta * p[i];") -> str:
    return XPAY.replace("p[i] = x[i] + beta * p[i];", f"{body}  // MARK:{marker}")


def whole(marker: str, strategy: str = "Use a grid-stride loop with fused multiply-add.") -> dict:
    return {"content": f"{strategy}\n\n```cuda\n{kernel(marker)}```\n"}


def edit(old: str, new: str, strategy: str = "Fix the intrinsic.") -> dict:
    return {"content": f"{strategy}\n<<<<<<< SEARCH\n{old}\n=======\n{new}\n>>>>>>> REPLACE\n"}


def run(tmp_path, script, *, proposers_after=(), budget=Budget(candidates=3, width=1, repairs=2), timeout=5.0,
        retries=1, url=None, lines=None, secrets=()):
    ctx = make_ctx(tmp_path)
    with ChatServer(script) as srv:
        settings = LLMSettings(base_url=url or srv.base_url, model="test-model", api_key_env=KEY_ENV,
                               timeout_s=timeout, max_retries=retries)
        llm = LLMProposer(ChatClient(settings), tmp_path / "llm", repairs=2, baseline=baseline())
        traj = Trajectory(tmp_path / "run", {"kernel": "cg.xpay", "spec_sha256": "s"}, secrets=secrets,
                          progress=(lines.append if lines is not None else (lambda line: None)))
        ev = FakeEvaluate()
        search = Search(ctx, [llm, *proposers_after], ev, strategies.make("elite"), budget, traj, baseline=baseline())
        out = search.run()
        write_summary(traj, out, "cg::xpay", baseline())
        return out, srv.requests, traj, ev


def user_text(req) -> str:
    return req["json"]["messages"][-1]["content"]


def test_correct_and_faster_code_is_accepted(tmp_path):
    out, reqs, traj, ev = run(tmp_path, [whole("speed=1.4")], budget=Budget(candidates=1, width=1))
    assert out.best is not None and out.best.proposal.source == "llm"
    assert out.best.result.timed.speedup == 1.4
    assert out.best.proposal.strategy.startswith("Use a grid-stride loop")
    first = user_text(reqs[0])
    assert "cg::xpay" in first and "NVIDIA H200" in first and "1.0000 ms median" in first and "p rtol 1e-05" in first
    assert reqs[0]["json"]["model"] == "test-model"
    assert (tmp_path / "run/best/kernel.cu").read_text() == kernel("speed=1.4")


def test_compile_error_goes_back_with_the_compiler_message(tmp_path):
    script = [whole("compile"), edit("// MARK:compile", "// MARK:speed=1.3")]
    out, reqs, traj, ev = run(tmp_path, script, budget=Budget(candidates=2, width=1, repairs=2))
    assert len(reqs) == 2
    repair = reqs[1]["json"]["messages"]
    assert repair[-2]["role"] == "assistant" and "MARK:compile" in repair[-2]["content"]
    assert "failed at the compile stage" in repair[-1]["content"] and COMPILER_MESSAGE in repair[-1]["content"]
    fixed = out.best
    assert fixed is not None and fixed.repair_of is not None and fixed.result.timed.speedup == 1.3
    recs = traj.attempts()
    assert [r["status"] for r in recs] == ["compile_failed", "ok"] and recs[1]["repair_of"] == recs[0]["id"]


def test_wrong_results_go_back_with_the_mismatch(tmp_path):
    script = [whole("wrong"), edit("// MARK:wrong", "// MARK:speed=1.2")]
    out, reqs, traj, ev = run(tmp_path, script, budget=Budget(candidates=2, width=1, repairs=2))
    text = user_text(reqs[1])
    assert "failed at the verify stage" in text and "Output mismatch" in text
    assert "17 of 4096 elements wrong" in text and "expected 1.0, got 1.5" in text
    assert out.best is not None and out.best.result.timed.speedup == 1.2


def test_repairs_are_bounded(tmp_path):
    script = [whole("compile")] + [edit("// MARK:compile", "// MARK:compile ")] + \
             [edit("// MARK:compile ", "// MARK:compile  ")] + [whole("speed=2.0")] * 3
    out, reqs, traj, ev = run(tmp_path, script, budget=Budget(candidates=3, width=1, repairs=2))
    statuses = [r["status"] for r in traj.attempts()]
    assert statuses == ["compile_failed"] * 3           # the original failure and two repairs, no third
    assert out.evaluations == 3 and out.best is None


@pytest.mark.parametrize("bad, message", [
    ({"content": "You should unroll the loop by four."}, "the reply has no code"),
    (edit("this line is not in the kernel", "x"), "the SEARCH text is not in kernel.cu"),
    ({"content": "```cuda\n" + XPAY + "```\nand\n```cuda\n" + XPAY + "```\n"}, "2 code blocks"),
    ({"content": "```cuda\n" + XPAY + "\nint main() { return 0; }\n```\n"}, "defines the host function main()"),
    ({"content": "cut off mid-kernel", "finish_reason": "length"}, "cut off at the model's length limit"),
])
def test_malformed_or_refused_replies_are_handed_back(tmp_path, bad, message):
    out, reqs, traj, ev = run(tmp_path, [bad, whole("speed=1.5")], budget=Budget(candidates=1, width=1))
    assert message in user_text(reqs[1]), user_text(reqs[1])
    rejected = [r for r in traj.attempts() if r["status"] == "reply_rejected"]
    assert len(rejected) == 1 and message in rejected[0]["feedback"]
    assert out.best is not None and out.best.result.timed.speedup == 1.5
    assert len(ev.seen) == 1                            # the bad reply never reached the evaluator


def test_slow_replies_time_out_and_the_library_takes_over(tmp_path):
    lines = []
    slow = [{"content": "late", "delay": 1.5}] * 2
    out, reqs, traj, ev = run(tmp_path, slow, proposers_after=[MarkerProposer()], timeout=0.5, retries=1,
                              budget=Budget(candidates=3, width=1), lines=lines)
    assert len(reqs) == 2                               # 1 + 1 retry, no more
    assert out.unavailable["llm"].startswith("timeout: no answer from")
    assert out.evaluations == 3 and out.best is not None and out.best.proposal.source == "library"
    assert any("the llm proposer stopped: timeout" in l and "continuing with library" in l for l in lines)


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


@pytest.mark.parametrize("case", ["unreachable", "wrong_key", "rate_limited"])
def test_endpoint_failures_give_a_clear_message_and_the_run_goes_on(tmp_path, case, monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)
    url = f"http://127.0.0.1:{_closed_port()}/v1" if case == "unreachable" else None
    script = {"unreachable": [], "wrong_key": [{"status": 401, "body": {"error": {"message": f"bad key {KEY}"}}}] * 3,
              "rate_limited": [{"status": 429}] * 3}[case]
    out, reqs, traj, ev = run(tmp_path, script, proposers_after=[MarkerProposer()], url=url, retries=1,
                              budget=Budget(candidates=2, width=1))
    why = out.unavailable["llm"]
    expect = {"unreachable": "unreachable: cannot reach", "wrong_key": f"auth: ", "rate_limited": "rate_limited: "}[case]
    assert why.startswith(expect)
    if case == "wrong_key":
        assert f"${KEY_ENV}" in why and len(reqs) == 1      # final at once
    if case == "rate_limited":
        assert "HTTP 429" in why and len(reqs) == 2         # bounded retries
    assert out.evaluations == 2 and out.best is not None     # the library went on


def test_llm_alone_failing_stops_cleanly_keeping_results(tmp_path):
    script = [whole("speed=1.3"), {"status": 429}, {"status": 429}]
    out, reqs, traj, ev = run(tmp_path, script, budget=Budget(candidates=5, width=1), retries=1)
    assert out.evaluations == 1 and out.best is not None and out.best.result.timed.speedup == 1.3
    assert out.stop_reason.startswith("no proposer available: llm: rate_limited")
    assert (tmp_path / "run/best/kernel.cu").is_file()
    assert "1.30x" in (tmp_path / "run/summary.md").read_text()


def test_the_api_key_is_never_written(tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)
    lines = []
    script = [whole("compile", strategy=f"My key is {KEY}."), edit("// MARK:compile", "// MARK:speed=1.2"),
              {"status": 401, "body": {"error": {"message": f"invalid key {KEY}"}}}]
    out, reqs, traj, ev = run(tmp_path, script, proposers_after=[MarkerProposer()], lines=lines, secrets=(KEY,),
                              budget=Budget(candidates=4, width=1))
    assert reqs[0]["headers"]["authorization"] == f"Bearer {KEY}"     # it was used...
    for path in (tmp_path / "run").rglob("*"):                        # ...and written nowhere
        if path.is_file():
            assert KEY not in path.read_text(errors="replace"), path
    assert not any(KEY in line for line in lines)
    assert "[redacted]" in (tmp_path / "run/trajectory.jsonl").read_text()
    assert json.loads((tmp_path / "run/run.json").read_text())["kernel"] == "cg.xpay"
