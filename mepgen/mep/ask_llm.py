"""`mepgen mep --ask-llm`: an OpenAI-compatible LLM proposes the fields mepgen could not infer.

The model gets the kernel (kernel.cu), the launch site it is reproduced from, mep.yaml as mepgen wrote it
and exactly which fields are todo and why (templates/prompts/mep_todo*.j2), and answers with one YAML
block of field path -> value (todo_reply.py). Each value is checked like a person's edit, and more
(todo_proposal.py). An accepted value settles its todo and is marked in mep.yaml as the model's, for a
person to review; a refused one stays a todo whose reason says what the model proposed and why it was
refused. A reply that cannot be parsed, or values that are refused, go back to the model once (`repairs`).

An endpoint that cannot answer (unreachable, key refused, time-out after the client's retries) changes
nothing: the MEP is written exactly as without the LLM, with a one-line warning naming the endpoint, and
the LLM is not asked again in the same run.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from ..llm import prompts
from ..llm.client import ChatClient, LLMError
from ..spec import DTYPES, Spec, Todo, validate_dict
from .todo_proposal import Refused, check, current, settles
from .todo_reply import ReplyError, parse_reply

#: LLMError kinds that are a problem of the reply (handed back to the model), not of the endpoint
REPLY_KINDS = ("truncated", "empty")
#: the comment that marks an accepted value in mep.yaml
MARK = "LLM-PROPOSED"
SITE_LINES_BEFORE, SITE_LINES_AFTER = 30, 4


@dataclass
class Proposed:
    field: str
    value: object
    settles: list[str]                # the todo fields it settles (empty: not a field that was asked for)
    refused: str | None = None        # why, when refused
    spec_dict: dict | None = field(default=None, repr=False)   # accepted: the spec with it (and those before)

    def to_dict(self) -> dict:
        out = {"field": self.field, "value": self.value, "settles": self.settles}
        return {**out, "refused": self.refused} if self.refused else out


@dataclass
class Outcome:
    """What asking the LLM about one MEP's todos came to."""
    model: str
    endpoint: str
    spec: Spec                        # with the accepted values in and the todos updated
    accepted: list[Proposed] = field(default_factory=list)
    refused: list[Proposed] = field(default_factory=list)
    unanswered: list[str] = field(default_factory=list)    # todo fields the model gave no value for
    error: str | None = None          # why nothing could be used (the spec is then the one asked about)
    requests: int = 0

    @property
    def changed(self) -> bool:
        return self.error is None and bool(self.accepted or self.refused)

    def marks(self, asked: Spec) -> list[tuple[str, str]]:
        """(field, comment) for mep.yaml: where each accepted value went, and what it settled."""
        reasons = {t.field: t.reason for t in asked.todo}
        return [(p.field, f"{MARK}({self.model}): {p.field} = {_flow(p.value)} was proposed by the LLM, not "
                          f"inferred by mepgen: review it (the todo was: "
                          f"{'; '.join(reasons[f] for f in p.settles)})") for p in self.accepted]

    def header(self) -> list[str]:
        if not self.accepted:
            return []
        return [f"the LLM {self.model} proposed {', '.join(p.field for p in self.accepted)} (marked {MARK}): "
                f"review them; once you have, delete the marks and the file is yours (kept by --keep-edits)"]

    def to_dict(self) -> dict:
        return {"model": self.model, "endpoint": self.endpoint, "requests": self.requests, "error": self.error,
                "accepted": [p.to_dict() for p in self.accepted], "refused": [p.to_dict() for p in self.refused],
                "unanswered": self.unanswered}


def launch_site(app_root: Path, kernel: dict) -> dict | None:
    """The first launch site's file, line and the source lines before it (numbered), for the prompt."""
    for site in kernel.get("launch_sites", []):
        path = Path(app_root) / site["file"]
        try:
            lines = path.read_text(errors="replace").splitlines()
        except OSError:
            continue
        first = max(1, site["line"] - SITE_LINES_BEFORE)
        last = min(len(lines), site["line"] + SITE_LINES_AFTER)
        excerpt = "\n".join(f"{n:>5}{'>' if n == site['line'] else ' '} {lines[n - 1]}" for n in range(first, last + 1))
        return {"file": site["file"], "line": site["line"], "excerpt": excerpt}
    return None


class TodoAsker:
    """Asks one endpoint about the todos of each MEP of a `mepgen mep` run."""

    def __init__(self, client: ChatClient, repairs: int = 1, warn=lambda message: None):
        self.client = client
        self.repairs = max(0, repairs)
        self.warn = warn
        self.down: str | None = None       # an endpoint failure: not asked again in this run

    @property
    def model(self) -> str:
        return self.client.settings.model

    @property
    def endpoint(self) -> str:
        return self.client.settings.base_url

    def __call__(self, spec: Spec, kernel_cu: str, mep_yaml: str, site: dict | None) -> Outcome:
        out = Outcome(self.model, self.endpoint, spec)
        if self.down is not None:
            out.error = self.down
            return out
        allowed = settles(spec)
        d = spec.to_dict()
        known = set(re.findall(r"[A-Za-z_]\w*", kernel_cu))
        reasons = {t.field: t.reason for t in spec.todo}
        accepted: dict[str, Proposed] = {}
        refused: dict[str, Proposed] = {}
        answered: set[str] = set()
        messages = [{"role": "system", "content": prompts.render("mep_todo_system", dtypes=list(DTYPES))},
                    {"role": "user", "content": prompts.render("mep_todo", **self._context(spec, d, kernel_cu,
                                                                                          mep_yaml, site))}]
        problem = None
        for round_ in range(self.repairs + 1):
            before = self.client.requests
            try:
                reply, problem = self.client.complete(messages), None
            except LLMError as e:
                if e.kind not in REPLY_KINDS:
                    out.requests += self.client.requests - before
                    self.down = f"asking the LLM failed ({e.kind}): {_one_line(str(e))}"
                    self.warn(self.down + ("; the MEPs are written without it" if not accepted and not refused else
                                           "; keeping what it proposed before"))
                    if not accepted and not refused:
                        out.error = self.down
                        return out
                    break
                reply, problem = None, str(e)
            out.requests += self.client.requests - before
            now_refused: list[Proposed] = []
            if reply is not None:
                try:
                    proposals = parse_reply(reply)
                except ReplyError as e:
                    problem = str(e)
                else:
                    answered |= set(proposals)
                    for p in self._judge(proposals, d, allowed, known, reasons, accepted):
                        if p.refused:
                            refused[p.field] = p
                            now_refused.append(p)
                        else:
                            accepted[p.field] = p
                            refused.pop(p.field, None)
                            d = p.spec_dict
            if (problem is None and not now_refused) or round_ == self.repairs:
                break
            settled = {f for p in accepted.values() for f in p.settles}
            retry = [t.field for t in spec.todo if t.field not in settled]
            messages = [*messages, {"role": "assistant", "content": reply or "(no usable reply)"},
                        {"role": "user", "content": prompts.render("mep_todo_repair", problem=problem, fields=retry,
                                                                   refused=[{"field": p.field, "value": _flow(p.value),
                                                                             "why": p.refused} for p in now_refused])}]
        if not accepted and not refused:
            out.error = (f"the LLM at {self.endpoint} gave no usable answer: {problem}" if problem else None)
            if out.error:
                self.warn(out.error)
            out.unanswered = [t.field for t in spec.todo]
            return out
        out.accepted, out.refused = list(accepted.values()), list(refused.values())
        out.spec = self._updated(spec, d, out)
        settled = {f for p in out.accepted for f in p.settles}
        out.unanswered = [t.field for t in spec.todo if t.field not in settled and t.field not in answered]
        return out

    @staticmethod
    def _judge(proposals: dict, d: dict, allowed: dict[str, list[str]], known: set[str], reasons: dict[str, str],
               accepted: dict[str, Proposed]):
        """Each new proposal, checked in order on the spec as the accepted ones before it left it."""
        for name, value in proposals.items():
            if name in accepted or value is None:
                continue
            if name not in allowed:
                yield Proposed(name, value, [], "not a field that was asked for")
                continue
            try:
                d, _ = check(d, name, value, known, reasons.get(name, ""))
            except Refused as e:
                yield Proposed(name, value, allowed[name], str(e))
            else:
                yield Proposed(name, value, allowed[name], spec_dict=d)

    def _context(self, spec: Spec, d: dict, kernel_cu: str, mep_yaml: str, site: dict | None) -> dict:
        allowed = settles(spec)
        todo = {t.field for t in spec.todo}
        return {"kernel": {"name": spec.kernel.name, "source": spec.kernel.source}, "kernel_cu": kernel_cu.rstrip(),
                "mep_yaml": mep_yaml.rstrip(), "site": site,
                "fields": [{"field": t.field, "reason": t.reason, "current": _flow(current(d, t.field))}
                           for t in spec.todo],
                "extra": [f for f in allowed if f not in todo]}

    def _updated(self, spec: Spec, d: dict, out: Outcome) -> Spec:
        """The spec with the accepted values (already in `d`), settled todos gone, refused ones explained."""
        settled = {f for p in out.accepted for f in p.settles}
        todo = []
        for t in spec.todo:
            if t.field in settled:
                continue
            why = [f"the LLM ({self.model}) proposed {p.field} = {_flow(p.value)}, refused: {p.refused}"
                   for p in out.refused if t.field in p.settles]
            todo.append(Todo(t.field, "; ".join([t.reason, *why]), t.kind))
        d = {**d, "todo": [{"field": t.field, "reason": t.reason} for t in todo]}
        d = _work_follows_counts(spec, d)
        new = validate_dict(d)
        new.todo = todo
        return new


def _work_follows_counts(spec: Spec, d: dict) -> dict:
    """work.bytes / work.flops name a buffer's count as mepgen wrote it (often a placeholder size such as
    OUT_COUNT); where the LLM replaced that count, the work expressions take the new one, or they would name a size
    that no longer exists and the MEP would have no roofline."""
    work = dict(d.get("work") or {})
    changed = False
    for old, new in zip(spec.params, d.get("params", [])):
        was, now = old.count, new.get("count")
        if not was or now is None or str(now) == str(was) or not re.fullmatch(r"[A-Za-z_]\w*", str(was)):
            continue
        for key, expr in work.items():
            if isinstance(expr, str) and re.search(rf"\b{re.escape(was)}\b", expr):
                work[key] = re.sub(rf"\b{re.escape(was)}\b", lambda _m: f"({now})", expr)
                changed = True
    return {**d, "work": work} if changed else d


def _flow(value) -> str:
    return yaml.safe_dump(value, default_flow_style=True, sort_keys=False, width=10 ** 6).strip().removesuffix("\n...").strip()


def _one_line(message: str) -> str:
    """An error message's first line (the client's messages name the endpoint and model, never the key)."""
    return message.splitlines()[0][:300] if message else ""
