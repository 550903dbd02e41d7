"""Host functions that call themselves: a pyramid of levels (`level(in, out, w / 2, n - 1)`), a recursive scan.

A parameter of such a function has one value per depth of the recursion; the MEP reproduces one launch. Its
value is the one of the outermost call, the call from another function that starts the recursion (as a loop's
first iteration is taken), and the notes of mep.yaml say so. The recursive calls themselves are never followed
for it: their arguments are the parameter again, which would only lead back to where the search started.
"""
from __future__ import annotations


def outer_calls(fn, calls: list) -> tuple[list, bool]:
    """(the (call, caller) pairs of `calls` whose caller is not `fn` itself, whether any was left out)."""
    usr = fn.get_usr()
    outer = [(call, caller) for call, caller in calls if caller is None or caller.get_usr() != usr]
    return outer, len(outer) != len(calls)


def outermost_note(param: str, fn: str, where: str) -> str:
    """The stated choice for a parameter of a recursive function whose value came from its outermost call."""
    return (f"`{param}` in {fn}() is the value of its outermost call at {where}: {fn}() calls itself, and its "
            "deeper levels launch with other values")
