"""Which values are the same in every thread of a warp, on the kernel's syntax tree: the analysis behind rewrites
that let one lane act for its warp (warp_atomics.py).

- `converged`: a statement list every thread of a warp runs the same number of times: the kernel's body; the body
  of a `for` whose start, bound and step are such values, with no `break`, `continue`, `return` or `goto` in it; a
  branch of an `if` whose condition is one; each inside such a list in turn.
- `uniform`: an expression that is such a value: parameters never assigned, block-level values (blockIdx,
  blockDim, gridDim), literals and enumerators, the counters of the converged loops around it, locals declared
  before it in those statement lists from such values and never assigned, CUDA's integer functions of those; the
  address (`&`) of a `__shared__` or global variable, of an element or member of one, but never its value. It reads
  no memory and calls nothing else (a function of kernel.cu may read threadIdx inside).
"""
from __future__ import annotations

import re

from .analysis import check_pure, squash
from .memory_roots import parents
from .source import Refused, kind, walk

#: CUDA's integer functions of their arguments alone, allowed in a uniform value (a call of anything else is refused)
INTEGER_FUNCTIONS = {"min", "max", "abs", "labs", "llabs", "umin", "umax", "llmin", "llmax", "ullmin", "ullmax",
                     "__mul24", "__umul24", "__mulhi", "__umulhi", "__mul64hi", "__umul64hi"}
_WRAPPERS = ("UNEXPOSED_EXPR", "PAREN_EXPR", "CSTYLE_CAST_EXPR", "CXX_STATIC_CAST_EXPR",
             "CXX_REINTERPRET_CAST_EXPR", "CXX_CONST_CAST_EXPR")


def callee(call) -> str:
    """The called function's name; in a template a call on dependent arguments has no spelling of its own, its
    callee is an overloaded reference (`atomicAdd(&sum, v)` on a `T sum`)."""
    if call.spelling:
        return call.spelling
    kids = list(call.get_children())
    if kids:
        for k in walk(kids[0]):
            if kind(k) in ("OVERLOADED_DECL_REF", "DECL_REF_EXPR") and k.spelling:
                return k.spelling
    return ""


def through(c):
    """Through casts, parentheses and implicit wrappers to the expression they hold."""
    while c is not None and kind(c) in _WRAPPERS and len([k for k in c.get_children() if kind(k) != "TYPE_REF"]) == 1:
        c = next(k for k in c.get_children() if kind(k) != "TYPE_REF")
    return c


POSITION = re.compile(r"\b(threadIdx|blockIdx|blockDim|gridDim)\b")


def thread_dependent(src) -> set[str]:
    """The kernel's locals whose value depends on the thread's or block's position (declared from threadIdx,
    blockIdx ..., or from such a local), in declaration order."""
    out: set[str] = set()
    for c in src.nodes("VAR_DECL"):
        text = src.expand(src.src(c).split("=", 1)[1]) if "=" in src.src(c) else ""
        if POSITION.search(text) or set(re.findall(r"[A-Za-z_]\w*", text)) & out:
            out.add(c.spelling)
    return out


def assigned_names(src) -> set[str]:
    out = {n for n in (assigned_target(w) for w in src.writes()) if n is not None}
    for c in src.nodes("UNARY_OPERATOR"):          # an address taken: the variable may be written through it
        toks = [t.spelling for t in c.get_tokens()]
        kids = list(c.get_children())
        if toks[:1] == ["&"] and kids and kind(through(kids[0])) == "DECL_REF_EXPR":
            out.add(through(kids[0]).spelling + "&")
    return out


def converged(src, par, compound, assigned, depth: int = 0) -> dict | None:
    """Where every thread of a warp runs `compound` the same number of times: {"compounds": the statement lists
    from the kernel's body down to it, "counters": the counters of the loops among them, "parents": `par`}; None
    elsewhere.
    The kernel's body; the body of a `for` whose start, bound and step are the same in every thread, without
    `break`, `continue`, `return` or `goto` in it; a branch of an `if` whose condition is; each inside one."""
    if compound == src.body:
        return {"compounds": {compound.hash}, "counters": set(), "parents": par}
    p = par.get(compound)
    gp = par.get(p) if p is not None else None
    if p is None or gp is None or kind(gp) != "COMPOUND_STMT" or depth > 8:
        return None
    kids = list(p.get_children())
    if kind(p) == "IF_STMT" and kids[0] != compound:
        ctx = converged(src, par, gp, assigned, depth + 1)
        if ctx is None or not same_in_warp(src, kids[0], src.span(p)[0], assigned, ctx):
            return None
        return {**ctx, "compounds": ctx["compounds"] | {compound.hash}}
    if kind(p) != "FOR_STMT" or len(kids) != 4 or kids[-1] != compound:
        return None
    if any(kind(x) in ("BREAK_STMT", "CONTINUE_STMT", "RETURN_STMT", "GOTO_STMT") for x in walk(compound)):
        return None
    ctx = converged(src, par, gp, assigned, depth + 1)
    init, cond, inc = kids[:3]
    decls = [x for x in init.get_children() if kind(x) == "VAR_DECL"] if kind(init) == "DECL_STMT" else []
    if ctx is None or len(decls) != 1:
        return None
    v = decls[0].spelling
    steps = [w for w in src.writes(p) if assigned_target(w) == v]
    if any(not (src.span(inc)[0] <= src.span(w)[0] < src.span(inc)[1]) for w in steps) or \
            v + "&" in assigned:
        return None                              # the counter is changed in the body too
    inner = {**ctx, "counters": ctx["counters"] | {v}}
    start = [x for x in decls[0].get_children() if kind(x) not in ("TYPE_REF", "NAMESPACE_REF")]
    if not start or not all(same_in_warp(src, e, src.span(p)[0], assigned, c)
                            for e, c in ((start[-1], ctx), (cond, inner), (inc, inner))):
        return None
    return {**inner, "compounds": ctx["compounds"] | {compound.hash}}


def assigned_target(w) -> str | None:
    kids = list(w.get_children())
    t = through(kids[0]) if kids else None
    return t.spelling if t is not None and kind(t) == "DECL_REF_EXPR" else None


def same_in_warp(src, expr, before, assigned, ctx) -> bool:
    try:
        uniform(src, expr, before, assigned, ctx, what="a loop's or condition's value")
        return not src.writes(expr) or all(assigned_target(w) in ctx["counters"] for w in src.writes(expr))
    except Refused:
        return False


def uniform(src, addr, before: int, assigned: set[str], ctx: dict, depth: int = 0,
             what: str = "its address") -> set[str]:
    """The variables the address updates (its roots) where it is the same in every thread of a warp: names of
    `ctx` (`converged`) are the locals of its statement lists and its loops' counters."""
    if re.search(r"\b(threadIdx|__lane_id|laneid)\b", src.expand(src.src(addr))):
        raise Refused(f"{what} `{squash(src.src(addr))[:40]}` depends on the thread")
    par = parents(addr)
    roots = set()
    for c in walk(addr):
        k = kind(c)
        if k == "ARRAY_SUBSCRIPT_EXPR":
            index = list(c.get_children())[1]
            if any(kind(x) == "ARRAY_SUBSCRIPT_EXPR" or readsthrough(src, x) for x in walk(index)):
                raise Refused("its address reads memory")
        elif readsthrough(src, c):
            raise Refused("its address reads memory")
        elif k == "CALL_EXPR" and callee(c) not in INTEGER_FUNCTIONS:
            # a function of kernel.cu may read threadIdx inside: its value may differ between the lanes
            raise Refused(f"its address calls `{callee(c) or '?'}`, whose value may depend on the thread")
        if k != "DECL_REF_EXPR":
            continue
        if c.spelling in ("blockIdx", "blockDim", "gridDim"):      # the same in every thread of a block
            continue
        d = c.referenced
        if d is None:
            raise Refused(f"`{c.spelling}` in its address is not resolved")
        dk = kind(d)
        if dk in ("ENUM_CONSTANT_DECL", "TEMPLATE_NON_TYPE_PARAMETER") or \
                dk in ("FUNCTION_DECL", "FUNCTION_TEMPLATE") and c.spelling in INTEGER_FUNCTIONS:
            continue
        if dk == "PARM_DECL":
            if c.spelling in assigned or c.spelling + "&" in assigned:
                raise Refused(f"the parameter {c.spelling} is assigned in the kernel")
            if d.type.get_canonical().kind.name in ("POINTER", "RECORD", "ELABORATED"):
                roots.add(c.spelling)           # a struct parameter may hold the pointer (`&p.sums[k]`)
            continue
        if dk != "VAR_DECL":
            raise Refused(f"`{c.spelling}` in its address")
        fs, fe = src.span(src.fn)
        inside = fs <= d.extent.start.offset < fe and d.location.file is not None and \
            d.location.file.name == src.path
        memory = not inside or "__shared__" in src.src(d) or any(kind(x) == "CUDASHARED_ATTR"
                                                                  for x in d.get_children())
        if memory:                       # shared or global: only its address, never its value
            if not address_only(c, par, addr):
                raise Refused(f"its address reads the variable {c.spelling}")
            roots.add(c.spelling)
            continue
        if c.spelling in ctx["counters"]:             # a counter of a loop every lane runs alike
            continue
        if c.spelling in assigned or c.spelling + "&" in assigned:
            raise Refused(f"the local {c.spelling} in {what} is assigned")
        body = ctx["parents"]             # the kernel body's parent map, made once by the caller
        dp = body.get(d)
        if dp is None or kind(dp) != "DECL_STMT" or body.get(dp) is None or \
                body.get(dp).hash not in ctx["compounds"] or src.span(d)[0] >= before:
            raise Refused(f"the local {c.spelling} in {what} is not declared before it in a statement list every "
                          "lane runs alike")
        init = [x for x in d.get_children() if kind(x) not in ("TYPE_REF", "NAMESPACE_REF")]
        if not init or depth > 8:
            raise Refused(f"the local {c.spelling} in {what} has no initializer")
        check_pure(src, init[-1], f"the initializer of {c.spelling}")
        uniform(src, init[-1], src.span(d)[0], assigned, ctx, depth + 1, what)
        if d.type.get_canonical().kind.name == "POINTER":
            roots.add(c.spelling)
    return roots


def readsthrough(src, c) -> bool:
    if kind(c) == "UNARY_OPERATOR":
        toks = [t.spelling for t in c.get_tokens()]
        return toks[:1] == ["*"]
    return kind(c) == "MEMBER_REF_EXPR" and "->" in src.src(c)


def address_only(ref, par, addr) -> bool:
    """`ref` is under `&` through bases only: `&v`, `&v.x`, `&v[i]`."""
    node = ref
    while node != addr:
        up = par.get(node)
        if up is None:
            return False
        k = kind(up)
        if k == "UNARY_OPERATOR" and [t.spelling for t in up.get_tokens()][:1] == ["&"]:
            return True
        if k in ("MEMBER_REF_EXPR", "PAREN_EXPR", "UNEXPOSED_EXPR") or \
                k == "ARRAY_SUBSCRIPT_EXPR" and list(up.get_children())[0] == node:
            node = up
            continue
        return False
    return False
