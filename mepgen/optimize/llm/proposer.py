"""The LLM proposer: asks an OpenAI-compatible model for faster kernel.cu variants, and for repairs.

Each proposal is one conversation: the system and propose prompts (the kernel, the MEP spec, the GPU, the
evaluator's evidence, the inherited patterns, the attempts so far), then the model's reply, parsed strictly
(replies.py) and checked as untrusted code (guard.py). A reply that cannot be parsed or is refused is a
failed attempt: its message goes back to the model in the same conversation, at most `repairs` times, and
is reported to the search (`take_rejections()`) for the trajectory. `repair()` continues the conversation
of a candidate the evaluator failed, quoting the evaluator's own evidence (`EvalResult.feedback()`).

An endpoint that cannot serve (unreachable, key refused, rate limited or timing out after the client's
bounded retries, a server error) raises ProposerUnavailable: the search goes on with the other proposers.
"""
from __future__ import annotations

import hashlib
import math
from pathlib import Path

from ..proposer import Attempt, Context, Proposal
from ..search import ProposerUnavailable
from . import guard, prompts
from ...llm.client import ChatClient, LLMError
from .replies import ReplyError, parse_reply

#: LLMError kinds that are a problem of the reply (handed back to the model), not of the endpoint
REPLY_KINDS = ("truncated", "empty")


def _key(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _outcome(a: Attempt) -> str:
    r = a.result
    t = getattr(r, "timed", None)
    if getattr(r, "ok", False) and t is not None and t.speedup:
        return f"verified, {t.speedup:.2f}x ({t.decision})"
    first = (r.feedback() or "").splitlines()[0][:160] if hasattr(r, "feedback") else ""
    return f"{getattr(r, 'status', 'failed')} at {getattr(r, 'stage', '?')}: {first}"


class LLMProposer:
    name = "llm"

    def __init__(self, client: ChatClient, workdir: Path, repairs: int = 2, baseline=None, history: int = 12):
        self.client = client
        self.workdir = Path(workdir)
        self.repairs = max(0, repairs)
        self.baseline = baseline
        self.history = history
        self._threads: dict[str, list[dict]] = {}    # sha of a proposed kernel.cu -> its conversation so far
        self._rejections: list[dict] = []

    # --- the prompt ---------------------------------------------------------------------------------

    def _best(self, parent: Attempt | None) -> dict:
        r = parent.result if parent is not None else self.baseline
        t = getattr(r, "timed", None)
        prof = getattr(r, "profile", None) or None
        if prof and "error" in prof:
            prof = None
        return {"median_ms": t.median_ms if t else math.nan, "achieved_gbps": t.gbps if t else None,
                "bandwidth_pct": t.pct_peak_bw if t else None, "achieved_gflops": t.gflops if t else None,
                "profile": prof}

    def context(self, ctx: Context, parent: Attempt | None) -> dict:
        spec = ctx.spec
        gpu = {"name": "unknown GPU", "cc": "?", "peak_gbps": math.nan, "peak_gflops": math.nan, **ctx.gpu}
        return dict(
            kernel={"name": spec.kernel.name}, gpu=gpu,
            launch={"grid": spec.launch.grid, "block": spec.launch.block, "shared_mem": spec.launch.shared_mem},
            launch_changes="", sizes=spec.sizes,
            observed=[{"grid": o["grid"], "block": o["block"], "launches": o.get("launches")}
                      for o in spec.launch.observed],
            varies=sorted({n for names in spec.launch.varies.values() for n in names}),
            params=[{"ctype": p.ctype, "name": p.name, "role": p.role, "count": p.count, "dtype": p.dtype,
                     "value": p.value} for p in spec.params],
            symbols=[{"name": c.name, "count": c.count, "dtype": c.dtype} for c in spec.constants if c.role == "inout"],
            tolerance={k: {"rtol": t.rtol, "atol": t.atol} for k, t in spec.verify.tolerance.items()},
            best=self._best(parent), kernel_cu=parent.proposal.text if parent is not None else ctx.original,
            patterns=[{"kernel": p.get("kernel", "?"), "gpu": p.get("gpu", "?"),
                       "change": p.get("change", "") + (f" (strategy: {p['strategy'][:200]})" if p.get("strategy") else ""),
                       "speedup": float(p.get("speedup", 1.0))} for p in ctx.patterns],
            history=[{"change": a.proposal.change, "outcome": _outcome(a)} for a in ctx.history[-self.history:]])

    # --- talking to the model -----------------------------------------------------------------------

    def _complete(self, messages: list[dict]) -> tuple[str | None, str | None]:
        """(reply, None), or (None, a problem of the reply to hand back); endpoint failures raise."""
        try:
            return self.client.complete(messages), None
        except LLMError as e:
            if e.kind in REPLY_KINDS:
                return None, str(e)
            raise ProposerUnavailable(f"{e.kind}: {e}") from None

    def _check(self, ctx: Context, text: str) -> list[str]:
        work = self.workdir / "guard"
        work.mkdir(parents=True, exist_ok=True)
        return guard.check(ctx.original, text, ctx.spec.kernel.name, work, [str(ctx.mep_dir)])

    def _converse(self, ctx: Context, messages: list[dict], current: str, parent_id: str | None,
                  label: str) -> Proposal | None:
        """Ask, parse, guard; hand a bad reply back up to `repairs` times. None: the model gave up."""
        for round_ in range(self.repairs + 1):
            reply, problem = self._complete(messages)
            proposed = None
            if reply is not None:
                try:
                    parsed = parse_reply(reply, current)
                except ReplyError as e:
                    problem = f"the reply could not be used: {e}"
                else:
                    refused = self._check(ctx, parsed.text)
                    if not refused:
                        change = (parsed.strategy.split(". ")[0] or f"{parsed.mode} rewrite")[:160]
                        prop = Proposal(text=parsed.text, change=f"{label}{change}", source="llm",
                                        strategy=parsed.strategy)
                        self._threads[_key(prop.text)] = messages + [{"role": "assistant", "content": reply}]
                        return prop
                    problem = "the proposal was refused: " + "; ".join(refused)
                    proposed = parsed.text
            self._rejections.append({"parent": parent_id, "change": f"{label}reply {round_ + 1}", "message": problem})
            if round_ == self.repairs:
                return None
            messages = prompts.repair_messages(messages, reply or "(no usable reply)", kernel={"name": ctx.spec.kernel.name},
                                               stage="reply", message=problem, mismatch=None,
                                               proposed=proposed or current)
        return None

    # --- the Proposer contract ----------------------------------------------------------------------

    def propose(self, ctx: Context, parent: Attempt | None, budget: int) -> list[Proposal]:
        out = []
        current = parent.proposal.text if parent is not None else ctx.original
        for _ in range(max(0, budget)):
            messages = prompts.propose_messages(**self.context(ctx, parent))
            prop = self._converse(ctx, messages, current, parent.id if parent else None, "")
            if prop is not None:
                out.append(prop)
        return out

    def repair(self, ctx: Context, failed: Attempt) -> Proposal | None:
        r = failed.result
        before = self._threads.get(_key(failed.proposal.text))
        if before is None:    # not proposed in this session (a resumed run): restate the proposal
            before = prompts.propose_messages(**self.context(ctx, None)) + [
                {"role": "assistant", "content": f"```cuda\n{failed.proposal.text}```"}]
        wrong = getattr(r, "wrong", None)
        message = "the outputs differ from the original kernel's" if wrong else (r.feedback() or r.status)
        messages = prompts.repair_messages(before[:-1], before[-1]["content"], kernel={"name": ctx.spec.kernel.name},
                                           stage=getattr(r, "stage", "?"), message=message,
                                           mismatch=wrong.describe() if wrong else None, proposed=failed.proposal.text)
        return self._converse(ctx, messages, failed.proposal.text, failed.id, "repair: ")

    def take_rejections(self) -> list[dict]:
        out, self._rejections = self._rejections, []
        return out
