"""Which namespace-scope variables a function writes: `__device__ int hits[32]` set by `hits[i] = v`, `flag = 1`,
`count++`, `atomicAdd(&count, 1)`, `atomicOr(mask + w, b)`, or handed on where it may be written through (an
array's name or a variable's address passed to a call, bound to a non-const reference).

A kernel that leaves its result in such a variable (the host reads it back with cudaMemcpyFromSymbol) has no
output among its parameters; the mep and capture stages make each written `__device__` variable an output of the
MEP (mep.yaml `constants[i].role: inout`), so that the judge compares it. The answer errs towards "written": a
variable that escapes (its address taken, an array decaying to a pointer outside a subscript) counts as written,
which costs one more compared output; one written where this cannot see it would leave an output unchecked.
Writes through a pointer a variable holds (`__device__ float* table; table[i] = x`) write the memory it points
to, not the variable, and do not count.
"""
from __future__ import annotations

from ..parsing.clang import operator_spelling

_ASSIGN = {"=", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<<=", ">>="}
_ASSIGN_CALLS = {f"operator{op}" for op in _ASSIGN} | {"operator++", "operator--"}
#: expressions that pass their operand's lvalue through (parentheses, implicit conversions, casts)
_THROUGH = ("PAREN_EXPR", "UNEXPOSED_EXPR", "CSTYLE_CAST_EXPR", "CXX_STATIC_CAST_EXPR", "CXX_REINTERPRET_CAST_EXPR",
            "CXX_CONST_CAST_EXPR")


def written_variables(function) -> set[str]:
    """USRs of the namespace-scope variables `function`'s body (a definition cursor) writes or lets escape."""
    out: set[str] = set()
    stack = [(function, None)]          # (cursor, (parent, its own link)): the ancestors, for escapes
    while stack:
        c, up = stack.pop()
        kids = list(c.get_children())
        k = c.kind.name
        if k in ("BINARY_OPERATOR", "COMPOUND_ASSIGNMENT_OPERATOR") and kids and _op(c) in _ASSIGN:
            _add(out, _target(kids[0]))
        elif k == "UNARY_OPERATOR" and kids and _op(c) in ("++", "--", "&"):
            _add(out, _target(kids[0]))
        elif k == "CALL_EXPR" and c.spelling in _ASSIGN_CALLS and kids:
            _add(out, _target(kids[1] if len(kids) > 1 and _is_operator_ref(kids[0]) else kids[0]))
        elif k == "DECL_REF_EXPR" and _global(c.referenced) and _escapes(c, up):
            out.add(c.referenced.get_usr())
        stack.extend((x, (c, up)) for x in reversed(kids))
    return out


def _add(out: set[str], decl) -> None:
    if _global(decl):
        out.add(decl.get_usr())


def _op(c) -> str:
    known = operator_spelling(c)
    if known is not None:
        return known
    toks = [t.spelling for t in c.get_tokens()]
    if c.kind.name == "UNARY_OPERATOR":
        return toks[0] if toks and toks[0] in ("&", "*", "++", "--") else (toks[-1] if toks else "")
    end = next(iter(c.get_children())).extent.end.offset
    return next((t.spelling for t in c.get_tokens() if t.extent.start.offset >= end), "")


def _is_operator_ref(c) -> bool:
    c = _through(c)
    return c.kind.name == "DECL_REF_EXPR" and c.spelling.startswith("operator")


def _through(c):
    """Through parentheses, implicit conversions and casts to the expression they wrap."""
    while c.kind.name in _THROUGH:
        kids = [x for x in c.get_children() if x.kind.name != "TYPE_REF"]
        if not kids:
            return c
        c = kids[-1]
    return c


def _target(c):
    """The variable an lvalue expression designates: `g`, `g[i]`, `g.f`, `g[i].f[j]` -> g; through a pointer
    (`p[i]` with a pointer `p`, `s->f`, `*p`) -> None: that writes what the pointer points to."""
    while True:
        c = _through(c)
        k = c.kind.name
        if k == "DECL_REF_EXPR":
            return c.referenced
        kids = list(c.get_children())
        if k == "ARRAY_SUBSCRIPT_EXPR" and kids:
            base = _through(kids[0])
            if base.kind.name == "DECL_REF_EXPR" and base.type.get_canonical().kind.name == "POINTER":
                return None
            c = kids[0]
        elif k == "MEMBER_REF_EXPR" and kids:
            if kids[0].type.get_canonical().kind.name == "POINTER":
                return None
            c = kids[0]
        else:
            return None


def _global(decl) -> bool:
    if decl is None or decl.kind.name != "VAR_DECL":
        return False
    p = decl.semantic_parent
    return p is not None and p.kind.name in ("TRANSLATION_UNIT", "NAMESPACE", "LINKAGE_SPEC")


def _escapes(ref, up) -> bool:
    """An array's name that decays to a pointer anywhere but a subscript's base or sizeof (`f(hits)`, `hits + w`,
    `int* p = hits`), or a variable bound to a reference (a call's argument that no conversion wraps: `f(count)`
    into `int&`; `int& r = count`). A const variable never escapes into a write."""
    canon = ref.type.get_canonical()
    array = canon.kind.name in ("CONSTANTARRAY", "INCOMPLETEARRAY")
    if (canon.element_type if array else canon).get_canonical().is_const_qualified():
        return False
    child, link = ref, up
    while link is not None and link[0].kind.name in (_THROUGH if array else ("PAREN_EXPR",)):
        child, link = link
    if link is None:
        return False
    a = link[0]
    ak = a.kind.name
    if array:
        first = next(iter(a.get_children()), None)
        return not ((ak == "ARRAY_SUBSCRIPT_EXPR" and first == child) or ak == "CXX_UNARY_EXPR")
    if ak == "CALL_EXPR":
        return next(iter(a.get_children()), None) != child        # an argument, not the callee
    return ak == "VAR_DECL" and a.type.kind.name == "LVALUEREFERENCE" and \
        not a.type.get_pointee().is_const_qualified()
