"""Which call of a function template the run reaches: `if (w >= 960) run<192>(..); else run<64>(..);`.

A launch inside a function template has the template's arguments of one of its instantiations. When the calls
that instantiate it sit in branches of `if` statements whose conditions mepgen can decide from the values it
derived (the run command's sizes, macros), the instantiation is the one the run takes there, not merely the first
in the source: the first would be a launch the application does not make at those sizes. A call whose branches
cannot be decided is kept as a candidate; the choice among candidates stays stated in mep.yaml's notes.
"""
from __future__ import annotations

from . import flow


def reached(r, call, caller) -> bool | None:
    """False when `call` sits in a branch of an `if` in `caller` that the resolver `r` decides is not taken; True
    when every `if` around it is decided to take it; None when one cannot be decided. Leaves r's reasons as they
    were (a condition that cannot be decided is no todo of the MEP)."""
    if caller is None or call is None or call.extent.start.file is None:
        return None
    marks = len(r.unsure), len(r.cond_why)
    path = flow.path_to(caller, call.extent.start.offset)
    out: bool | None = True
    try:
        for j, x in enumerate(path):
            if x.kind.name not in flow.BRANCHES:
                continue
            kids = list(x.get_children())
            child = path[j + 1] if j + 1 < len(path) else None
            if x.kind.name != "IF_STMT" or len(kids) < 2 or child is None or child == kids[0]:
                out = None
                continue
            value = r._decide(caller, kids[0])
            if value is None:
                out = None
            elif (child == kids[1]) != bool(value):
                return False
        return out
    finally:
        del r.unsure[marks[0]:]
        del r.cond_why[marks[1]:]


def keep_reached(r, pairs: list) -> tuple[list, bool]:
    """(the (call, caller, ...) tuples of `pairs` the run may reach, whether any was ruled out); all of them when
    every one would be ruled out (mepgen then decides nothing)."""
    if r is None:
        return pairs, False
    kept = [p for p in pairs if reached(r, p[0], p[1]) is not False]
    return (kept, True) if kept and len(kept) < len(pairs) else (pairs, False)
