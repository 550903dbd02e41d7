"""dim3 values as the MEP writes them: `dim3(a, b)` text, its components, and what an assignment to one of
them (`grid.x = ...`, followed by mep/flow.py) makes of it."""
from __future__ import annotations

from ..cexpr import is_one_group, split_top_level
from .syntax import parens


DIM3_TYPES = ("dim3", "uint3")


def decl_name(t) -> str:
    decl = t.get_canonical().get_declaration() if t is not None else None
    return decl.spelling if decl is not None else ""


def dim3_items(value: str) -> list[str]:
    """The three components of a dim3 value text: `dim3(a, b)` -> [a, b, 1]; `n` (converted) -> [n, 1, 1]."""
    v = value.strip()
    if v.startswith("dim3(") and v.endswith(")") and is_one_group(v[4:]):
        items = [x for x in split_top_level(v[5:-1]) if x] or ["1"]
    else:
        items = [v]
    return (items + ["1", "1", "1"])[:3]


def dim3_component(value: str, member: str) -> str | None:
    if member not in ("x", "y", "z"):
        return None
    return dim3_items(value)["xyz".index(member)]


def apply_step(value: str | None, st, rhs: str | None, vtype) -> str | None:
    """The value after one followed change (flow.Step), or None where mepgen does not follow it."""
    if st.member is None:
        if st.op == "=":
            return rhs
        if value is None:
            return None
        if st.op in ("++", "--"):
            return f"{parens(value)} {st.op[0]} 1"
        return f"{parens(value)} {st.op[:-1]} {parens(rhs)}" if rhs is not None else None
    decl = vtype.get_canonical().get_declaration() if vtype is not None else None
    if decl is None or decl.spelling not in DIM3_TYPES or st.member not in ("x", "y", "z") or value is None:
        return None
    items = dim3_items(value)
    i = "xyz".index(st.member)
    if st.op == "=":
        items[i] = rhs
    elif st.op in ("++", "--"):
        items[i] = f"{parens(items[i])} {st.op[0]} 1"
    elif rhs is not None:
        items[i] = f"{parens(items[i])} {st.op[:-1]} {parens(rhs)}"
    else:
        return None
    return "dim3(" + ", ".join(items) + ")"
