"""Strict parsing of an LLM's answer to the todo prompt: exactly one fenced YAML (or JSON) block holding a
mapping of field path -> proposed value (`null` for a field it cannot determine). Anything else (no block,
several, not a mapping, duplicate keys) is a ReplyError whose message goes back to the model: never
guessed. Which keys may be set, and to what, is the caller's check (todo_proposal.py)."""
from __future__ import annotations

import re

from ..errors import MepgenError
from ..strict_yaml import load_doc

_FENCE = re.compile(r"^```[ \t]*([\w+-]*)[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)
_LANGS = {"", "yaml", "yml", "json"}


class ReplyError(Exception):
    """The reply holds no usable proposal; the message says why, for the model and the user."""


def parse_reply(reply: str) -> dict[str, object]:
    """Field path -> proposed value (None: the model cannot tell)."""
    blocks = [body for lang, body in _FENCE.findall(reply) if lang.lower() in _LANGS]
    if not blocks:
        raise ReplyError("the reply has no ```yaml block: answer with one ```yaml block mapping each field to "
                         "its value")
    if len(blocks) > 1:
        raise ReplyError(f"the reply has {len(blocks)} ```yaml blocks; send exactly one")
    try:
        data = load_doc("the yaml block", blocks[0]).data
    except MepgenError as e:
        raise ReplyError(str(e)) from None
    if not isinstance(data, dict) or not data:
        raise ReplyError("the ```yaml block must be a mapping of field path -> value, e.g. `sizes.N: 4096`")
    return {str(k): v for k, v in data.items()}
