"""The optimizer's conversation: templates/prompts/system.j2, propose.j2 and repair.j2, rendered by the shared
prompt environment (mepgen/llm/prompts.py)."""
from __future__ import annotations

from ...llm.prompts import render


def propose_messages(**context) -> list[dict]:
    return [{"role": "system", "content": render("system")}, {"role": "user", "content": render("propose", **context)}]


def repair_messages(previous: list[dict], reply: str, **context) -> list[dict]:
    """The conversation so far, the model's failed reply, and the evidence of the failure."""
    return [*previous, {"role": "assistant", "content": reply}, {"role": "user", "content": render("repair", **context)}]
