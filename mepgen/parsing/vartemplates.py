"""Variable templates at namespace scope: `template <typename T> __constant__ T taps[N];`.

libclang exposes neither the template nor its specializations as VAR_DECLs: the template is an
UNEXPOSED_DECL (usr `c:@taps`), its implicit specializations are UNEXPOSED_DECLs too (usr `c:@taps>#d`,
with the instantiated type, `double[8]`). A template kernel names it through an OVERLOADED_DECL_REF
(`taps<T>[j]`), an ordinary kernel through a DECL_REF_EXPR to a specialization (`taps<float>[j]`). The
closure follows both to the template's own declaration, which kernel.cu copies like a plain global.
Shared by extract (the closure) and mep (the instantiation an MEP uploads to, mep/vartmpl.py).
"""
from __future__ import annotations

#: a memory-space keyword before the declared name -> the space `closure.global_spaces` reports
SPACE_WORDS = {"__constant__": "constant", "__device__": "device", "__managed__": "managed"}


def _header_end(tokens: list[str]) -> int:
    """Index just past the `template <...>` header (0 when the tokens do not start with one)."""
    if tokens[:2] != ["template", "<"]:
        return 0
    depth = 0
    for i, t in enumerate(tokens[1:], start=1):
        depth += {"<": 1, ">": -1, ">>": -2}.get(t, 0)
        if depth <= 0:
            return i + 1
    return 0


def space_of(cursor) -> str | None:
    """The memory space of a namespace-scope variable template (`constant`, `device`, `managed`, or
    `host_const` for a `constexpr`/`const` one), None for any other declaration (a function template,
    an explicit specialization, a specialization the compiler made)."""
    if cursor.kind.name != "UNEXPOSED_DECL" or not cursor.spelling or ">" in (cursor.get_usr() or ">"):
        return None
    tokens = [t.spelling for t in cursor.get_tokens()]
    start = _header_end(tokens)
    if start == 0 or tokens[start:start + 1] == ["template"]:
        return None
    rest = tokens[start:]
    if cursor.spelling not in rest:
        return None
    at = rest.index(cursor.spelling)
    if rest[at + 1:at + 2] == ["("]:        # a function, not a variable
        return None
    before = rest[:at]
    for word, space in SPACE_WORDS.items():
        if word in before:
            return space
    if "constexpr" in before or "const" in before:
        return "host_const"
    return None


def variable_templates(tops: list) -> dict[str, tuple[object, str]]:
    """usr -> (declaration, space) of every namespace-scope variable template among `tops`."""
    out: dict[str, tuple[object, str]] = {}

    def visit(cursors):
        for c in cursors:
            if c.kind.name in ("NAMESPACE", "LINKAGE_SPEC"):
                visit(c.get_children())
            elif c.kind.name == "UNEXPOSED_DECL":
                space = space_of(c)
                if space is not None:
                    out.setdefault(c.get_usr(), (c, space))

    visit(tops)
    return out


def template_usr(specialization_usr: str) -> str:
    """`c:@N@ns@taps>#d` (a specialization) -> `c:@N@ns@taps` (its template)."""
    return specialization_usr.partition(">")[0]
