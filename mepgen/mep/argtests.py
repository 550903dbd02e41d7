"""Tests of the command line that pick a branch, decided with the application's own run command:
`if (strcmp(argv[1], "r") == 0) n = SIZE; else n = read_from(argv[1]);` with `./app r`, or `argc > 2`.

The run command is the one :mod:`.argvalue` reads (a stated choice: the note names it). Anything else, or no
run command, gives None and the condition stays undecided, as before.
"""
from __future__ import annotations

import re

from .argvalue import run_command

_COMPARE = ("strcmp", "strncmp", "strcasecmp")


def _argv_k(c, p) -> int | None:
    m = re.fullmatch(r"\s*argv\s*\[\s*(\d+)\s*\]\s*", p.text(c))
    return int(m.group(1)) if m else None


def _literal(c, p) -> str | None:
    m = re.fullmatch(r'\s*"([^"\\]*)"\s*', p.text(c))
    return m.group(1) if m else None


def string_compare(p, call, near: str | None) -> tuple[str, str] | None:
    """(value, note) of `strcmp(argv[k], "word")` (either order; strncmp with a literal length) under the run
    command: "0" when the run passes that word, "1" otherwise; None when it is not such a call or no run command
    gives argv[k]."""
    if call.spelling not in _COMPARE:
        return None
    args = list(call.get_arguments())
    if len(args) < 2:
        return None
    k, word = _argv_k(args[0], p), _literal(args[1], p)
    if k is None:
        k, word = _argv_k(args[1], p), _literal(args[0], p)
    if k is None or word is None:
        return None
    rc = run_command(p, near)
    if rc is None or k - 1 >= len(rc.args) or k < 1:
        return None
    given = rc.args[k - 1]
    if call.spelling == "strncmp":
        m = re.fullmatch(r"\s*(\d+)\s*", p.text(args[2])) if len(args) > 2 else None
        if m is None:
            return None
        n = int(m.group(1))
        equal = given[:n] == word[:n]
    elif call.spelling == "strcasecmp":
        equal = given.lower() == word.lower()
    else:
        equal = given == word
    return ("0" if equal else "1"), f"{p.text(call)} is {'0' if equal else 'not 0'}: {rc.describe()} passes `{given}`"


def argc_value(p, d, near: str | None) -> tuple[str, str] | None:
    """(value, note) of main's `argc` under the run command, else None."""
    fn = d.semantic_parent
    if fn is None or fn.spelling != "main" or d.spelling != "argc":
        return None
    rc = run_command(p, near)
    if rc is None:
        return None
    return str(len(rc.args) + 1), f"argc is {len(rc.args) + 1}: {rc.describe()}"
