"""What fuse_updates and hoist_loads share: the loops of a kernel outermost first, the text of a loop with some of its
accesses read from registers, and that loop wrapped so the registers are set before it and stored after it.

The wrapper runs only where the loop runs at least once: `if ((lo) < (hi)) { REGISTERS; LOOP; STORES }` for a
loop `for (v = lo; v < hi; ...)`; a loop that does not run touches no register, loads nothing it did not load and
stores nothing it did not store. Its bounds are evaluated once more before it, so they must be pure.
"""
from __future__ import annotations

import re

from .analysis import pure_call, Loop, canonical_loop, check_pure
from .source import KernelSource, Refused, kind, walk


def first_reason(reasons: list[str]) -> str:
    """The reason to show first: one about an element or a load before one about a loop's shape (a condition other
    than `<`, a counter declared outside), which only says that loop was not looked into."""
    shape = ("a loop ", "not a for loop")
    return next((r for r in reasons if not r.startswith(shape)), reasons[0])


def loops_outer_first(src: KernelSource) -> list:
    return src.nodes("FOR_STMT")


def inside(src: KernelSource, c, others) -> bool:
    s, e = src.span(c)
    return any(a <= s and e <= b and (a, b) != (s, e) for a, b in (src.span(o) for o in others))


def checked_loop(src: KernelSource, c) -> Loop:
    """The canonical loop `c` whose bounds may be evaluated once more before it and whose body calls only
    functions without side effects; Refused otherwise."""
    loop = canonical_loop(src, c)
    kids = list(c.get_children())
    check_pure(src, kids[1], "the loop condition")
    init = list(kids[0].get_children())
    if init:
        check_pure(src, init[0], "the loop start")
    for n in walk(loop.body):
        if kind(n) == "CALL_EXPR" and not n.spelling.startswith(("__sync", "__threadfence", "atomic")) and \
                not pure_call(src, n):
            raise Refused(f"the loop over {loop.var} calls `{n.spelling or '?'}`, which may write memory")
    return loop


def open_loops(src: KernelSource, chosen: list, reasons: list[str]):
    """(cursor, loop) of each checked loop, outermost first, that is not inside a loop `chosen` already holds
    (`chosen`: plans whose first item is a Loop, read as they grow); a loop checked_loop refuses adds its reason."""
    for c in loops_outer_first(src):
        if inside(src, c, [p[0].cursor for p in chosen]):
            continue
        try:
            yield c, checked_loop(src, c)
        except Refused as e:
            reasons.append(str(e))


def loop_extent(src: KernelSource, loop: Loop) -> tuple[int, int]:
    """The loop's text with the `;` of a body without braces, and the `#pragma` line before it."""
    s, e = src.span(loop.cursor)
    body_end = src.span(loop.body)[1]
    if kind(loop.body) != "COMPOUND_STMT" and src.text[body_end:body_end + 1] == ";" and e <= body_end:
        e = body_end + 1
    if src.has_pragma(loop.cursor):
        line = src.text.rfind("\n", 0, s)
        prev = src.text.rfind("\n", 0, line)
        if "#pragma" in src.text[prev + 1:line]:
            s = prev + 1
        elif "#pragma" in src.text[line + 1:s]:
            s = line + 1
    return s, e


def wrapped(src: KernelSource, loop: Loop, replace: list[tuple[int, int, str]], before: list[str],
            after: list[str]) -> tuple[int, int, str]:
    """An edit (start, end, text) replacing the loop by `if (lo < hi) { before; loop with `replace`d accesses;
    after }`."""
    s, e = loop_extent(src, loop)
    text = src.text[s:e]
    for a, b, new in sorted(replace, reverse=True):
        if not (s <= a and b <= e):
            raise Refused("an access to replace lies outside the loop (a bug)")
        text = text[:a - s] + new + text[b - s:]
    line = src.text[src.text.rfind("\n", 0, s) + 1:s]
    ind = line if not line.strip() else ""
    body = "\n".join([f"if (({loop.lo}) < ({loop.hi})) {{", *[f"{ind}    {b}" for b in before],
                      f"{ind}    " + text.replace("\n", "\n    "), *[f"{ind}    {a}" for a in after], f"{ind}}}"])
    before_loop = src.text[:s].rstrip()
    if before_loop.endswith((")", "else")) or re.search(r"\bdo$", before_loop):
        body = "{ " + body + " }"           # the loop is the body of an if, loop or else: an `else` must not bind here
    return s, e, body
