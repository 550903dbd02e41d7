"""Strict parsing of an LLM's reply into a new kernel.cu.

Two forms are accepted, nothing else:
- SEARCH/REPLACE edits (aider's format), applied to the current kernel.cu in order; each SEARCH text must
  occur exactly once;
- one whole kernel.cu in a single fenced code block.
Anything that does not fit (no code, several code blocks, an edit whose SEARCH text is missing or
ambiguous, unbalanced markers) is a ReplyError whose message goes back to the model: never skipped,
never guessed.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

SEARCH, DIVIDER, REPLACE = "<<<<<<< SEARCH", "=======", ">>>>>>> REPLACE"
_FENCE = re.compile(r"^```[ \t]*([\w+-]*)[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)
_CODE_LANGS = {"", "cuda", "cu", "cpp", "c++", "cxx", "c", "cuh"}


class ReplyError(Exception):
    """The reply cannot be turned into a kernel.cu; the message says why, for the model."""


@dataclass
class Proposal:
    text: str          # the complete new kernel.cu
    mode: str          # "edits" | "whole"
    strategy: str      # what the model said it did (prose outside the code), for the trajectory
    edits: int = 0


def _strategy(reply: str) -> str:
    prose = _FENCE.sub("", reply)
    prose = re.sub(rf"{re.escape(SEARCH)}.*?{re.escape(REPLACE)}", "", prose, flags=re.S)
    words = " ".join(prose.split())
    return words[:400]


def _edits(reply: str) -> list[tuple[str, str]]:
    lines = reply.splitlines(keepends=True)
    edits, i = [], 0
    while i < len(lines):
        if lines[i].strip() == SEARCH:
            j = i + 1
            while j < len(lines) and lines[j].strip() not in (DIVIDER, SEARCH, REPLACE):
                j += 1
            if j >= len(lines) or lines[j].strip() != DIVIDER:
                raise ReplyError(f"edit {len(edits) + 1}: '{SEARCH}' without its '{DIVIDER}'")
            k = j + 1
            while k < len(lines) and lines[k].strip() not in (REPLACE, SEARCH, DIVIDER):
                k += 1
            if k >= len(lines) or lines[k].strip() != REPLACE:
                raise ReplyError(f"edit {len(edits) + 1}: '{DIVIDER}' without its '{REPLACE}'")
            edits.append(("".join(lines[i + 1:j]), "".join(lines[j + 1:k])))
            i = k + 1
        elif lines[i].strip() in (DIVIDER, REPLACE) and edits == [] and SEARCH in reply:
            raise ReplyError(f"'{lines[i].strip()}' before any '{SEARCH}'")
        else:
            i += 1
    return edits


def apply_edits(current: str, edits: list[tuple[str, str]]) -> str:
    text = current
    for n, (old, new) in enumerate(edits, 1):
        if not old.strip():
            raise ReplyError(f"edit {n}: the SEARCH text is empty")
        count = text.count(old)
        if count == 0:
            first = old.strip().splitlines()[0][:120]
            raise ReplyError(f"edit {n}: the SEARCH text is not in kernel.cu (it starts with: {first!r}); "
                             f"copy the lines exactly, whitespace included")
        if count > 1:
            raise ReplyError(f"edit {n}: the SEARCH text occurs {count} times in kernel.cu; include more "
                             f"lines so it matches one place")
        text = text.replace(old, new, 1)
    return text


def parse_reply(reply: str, current: str) -> Proposal:
    """The new kernel.cu a reply proposes, or ReplyError."""
    if SEARCH in reply or REPLACE in reply:
        edits = _edits(reply)
        if not edits:
            raise ReplyError(f"'{REPLACE}' without '{SEARCH}'")
        return Proposal(apply_edits(current, edits), "edits", _strategy(reply), len(edits))
    blocks = [(lang.lower(), body) for lang, body in _FENCE.findall(reply)]
    code = [(lang, body) for lang, body in blocks if lang in _CODE_LANGS]
    if not code:
        if "```" in reply:
            raise ReplyError("a code block is opened but never closed, or is not CUDA; send the whole kernel.cu "
                             "in one ```cuda block, or SEARCH/REPLACE edits")
        raise ReplyError("the reply has no code: send the whole kernel.cu in one ```cuda block, or "
                         "SEARCH/REPLACE edits")
    if len(code) > 1:
        raise ReplyError(f"the reply has {len(code)} code blocks; send the whole kernel.cu in exactly one, or "
                         f"SEARCH/REPLACE edits")
    body = code[0][1]
    if "__global__" not in body:
        raise ReplyError("the code block holds no __global__ kernel: send the whole kernel.cu")
    return Proposal(body if body.endswith("\n") else body + "\n", "whole", _strategy(reply))
