"""A floating-point division in a loop by a value the loop does not change: one division before the loop, a
multiplication in it.

    for (int i = 0; i < M; ++i) {                   {
        float v = (x[i] - avg) / std;          ->       const float mepgen_inv0 = (float)1 / (float)(std);
        ...                                             for (int i = 0; i < M; ++i) {
    }                                                       float v = ((x[i] - avg)) * mepgen_inv0; ...

Without fast math (`-prec-div=true`, nvcc's default) a float `/` is IEEE division: a reciprocal approximation, a
Newton step and a correction, with a slow path for special operands, about ten times a multiplication's issue cost.
nvcc may not replace it by a multiplication by the reciprocal, since that result can differ in the last bit; this
rewrite does, so the outputs may differ from the original's by an ulp or two per division. It is offered only where
every output is floating point with a relative tolerance of at least 1e-6 in mep.yaml (an integer output, a bin
or an index, could flip where a quotient rounds), and the judge verifies the candidate on every input set as always.

Proven on the kernel's text (the shared access model, memory_roots.py), never on its spelling:
- the divisor is invariant in the loop: it reads only variables declared before the loop and not assigned in it
  (members of a local struct too), no memory and no call (Memory.invariant_in);
- the division's type is `float` or `double` (canonical type: a typedef or `auto` of one counts);
- a divisor that is a power-of-two literal is left alone: nvcc multiplies by its exact inverse itself;
- the divisor names only the kernel's parameters and its locals: no `__device__` variable another thread or a
  call could change; and in the loop none of them has its address taken or is handed to a call (a reference
  parameter could change it).
Any loop (`for`, `while`, `do`, any condition or step): the reciprocal is computed before the outermost loop in
which the divisor does not change, in a block around that loop; computing it where the loop then does not run has
no effect (a division has no side effect on a GPU: 1/0 is inf, as a/0 would have been). `a /= d` becomes
`a *= r`. A division inside another one that is rewritten stays a division.
"""
from __future__ import annotations

import math
from typing import NamedTuple

from .analysis import pure_call, squash
from .base import Rewrite, Transformation
from .loop_registers import first_reason, loop_extent
from .memory_roots import Memory, _id
from .source import Refused, kind, walk

LOOPS = ("FOR_STMT", "WHILE_STMT", "DO_STMT")

FLOATS = {"FLOAT": "float", "DOUBLE": "double"}
MIN_RTOL = 1e-6


def _tolerance_refusal(spec) -> str | None:
    for out in spec.outputs:
        if out.dtype not in ("float16", "float32", "float64"):
            return f"output {out.name} is {out.dtype}: a quotient that rounds differently could change it"
        tol = spec.verify.tolerance.get(out.name)
        if tol is None or tol.rtol < MIN_RTOL:
            return (f"output {out.name} is compared with a relative tolerance below {MIN_RTOL:g} "
                    "(a reciprocal may change the last bit of a quotient)")
    return None


def _power_of_two(c) -> bool:
    """A literal divisor that is a power of two (`2.0f`, `(0.5)`): nvcc already multiplies by its exact inverse."""
    while kind(c) in ("PAREN_EXPR", "UNEXPOSED_EXPR") and len(list(c.get_children())) == 1:
        c = list(c.get_children())[0]
    if kind(c) not in ("FLOATING_LITERAL", "INTEGER_LITERAL"):
        return False
    tokens = [t.spelling for t in c.get_tokens()]
    try:
        v = float(tokens[0].rstrip("fFlLuU")) if tokens else 0.0
    except ValueError:
        return False
    return v != 0 and math.frexp(abs(v))[0] == 0.5


class _Loop(NamedTuple):
    cursor: object
    body: object


def _loop(c) -> _Loop:
    kids = list(c.get_children())
    return _Loop(c, kids[0] if kind(c) == "DO_STMT" else kids[-1])


def _changeable(src, mem: Memory, divisor, loop) -> str | None:
    """Why the loop (or another thread) might change a variable the divisor names; None where nothing can."""
    names = {c.spelling for c in walk(divisor) if kind(c) == "DECL_REF_EXPR"}
    for c in walk(divisor):
        ref = c.referenced if kind(c) == "DECL_REF_EXPR" else None
        if ref is not None and kind(ref) == "VAR_DECL" and (ref.semantic_parent is None or
                                                           kind(ref.semantic_parent) not in ("FUNCTION_DECL",
                                                                                             "FUNCTION_TEMPLATE")):
            return f"{c.spelling} is no local or parameter of the kernel"
    for c in walk(loop.cursor):
        if kind(c) != "DECL_REF_EXPR" or c.spelling not in names:
            continue
        p = mem.parent.get(_id(c))
        while p is not None and kind(p) in ("UNEXPOSED_EXPR", "PAREN_EXPR"):
            p = mem.parent.get(_id(p))
        if p is not None and kind(p) == "UNARY_OPERATOR" and src.src(p).lstrip().startswith("&"):
            return f"the loop takes the address of {c.spelling}"
        if p is not None and kind(p) == "CALL_EXPR" and not _pure(src, p):
            return f"the loop hands {c.spelling} to `{p.spelling or '?'}`, which may change it"
    return None


def _pure(src, call) -> bool:
    try:
        return pure_call(src, call)
    except Refused:
        return False


class Reciprocal(Transformation):
    def __init__(self):
        super().__init__("reciprocal", "a loop-invariant floating-point divisor: one division before the loop, "
                                       "a multiplication in it")

    def _sites(self, src, spec):
        """[(loop, [(division, type, operator)])]: each division with the outermost loop it may leave."""
        why = _tolerance_refusal(spec)
        if why:
            raise Refused(why)
        mem = Memory(src, spec)
        loops = [c for c in src.nodes(*LOOPS)]                 # outermost first
        spans = {_id(c): src.span(c) for c in loops}
        by_loop: dict = {}
        reasons = []
        for d in src.nodes("BINARY_OPERATOR", "COMPOUND_ASSIGNMENT_OPERATOR"):
            kids = list(d.get_children())
            op = src.operator(d)
            if op not in ("/", "/=") or len(kids) != 2:
                continue
            t = FLOATS.get((kids[0] if op == "/=" else d).type.get_canonical().kind.name)
            if t is None or _power_of_two(kids[1]):
                continue
            a, b = src.span(d)
            around = [c for c in loops if spans[_id(c)][0] <= a and b <= spans[_id(c)][1]]
            if not around:
                continue                                        # once per thread: nothing to gain
            if "/" not in src.src(d):
                reasons.append(f"a division is spelled through a macro: `{squash(src.src(d))[:40]}`")
                continue
            for c in around:
                loop = _loop(c)
                varies = mem.invariant_in(kids[1], c) or _changeable(src, mem, kids[1], loop)
                if varies is None:
                    by_loop.setdefault(_id(c), (loop, []))[1].append((d, t, op))
                    break
            else:
                reasons.append(f"`{squash(src.src(d))[:40]}` divides by a value its loop changes ({varies})")
        plans = []
        for loop, sites in by_loop.values():
            spans_ = [src.span(d) for d, _, _ in sites]
            sites = [s_ for s_, (a, b) in zip(sites, spans_)   # a division inside another rewritten one stays
                     if not any(x <= a and b <= y and (x, y) != (a, b) for x, y in spans_)]
            plans.append((loop, sites))
        # a loop inside another chosen one keeps its own block inside the outer loop's text: one edit per outermost
        outer = [p for p in plans if not any(q is not p and _inside(src, p[0].cursor, q[0].cursor) for q in plans)]
        if not outer:
            raise Refused("no floating-point division in a loop by a value the loop does not change"
                          + (f" ({first_reason(reasons)})" if reasons else ""))
        inner = [p for p in plans if p not in outer]
        return outer, inner

    def space(self, src, spec, launch):
        self._sites(src, spec)
        return {}

    def apply(self, src, spec, launch, params):
        outer, inner = self._sites(src, spec)
        names, counter = [], [0]

        def rewritten(loop, sites, extra) -> tuple[int, int, str]:
            """The loop's text in a block that first computes its reciprocals, its divisions replaced; `extra`:
            replacements of enclosing loops' divisions that lie in it; loops of `inner` in it are rewritten too."""
            s, e = loop_extent(src, loop)
            regs: dict[tuple[str, str], str] = {}
            before, replace = [], list(extra)
            for d, t, op in sites:
                lhs, divisor = (src.src(k) for k in d.get_children())
                key = (t, squash(divisor))
                if key not in regs:
                    regs[key] = f"mepgen_inv{counter[0]}"
                    counter[0] += 1
                    before.append(f"const {t} {regs[key]} = ({t})1 / ({t})({divisor});")
                    names.append(squash(divisor))
                new = f"{lhs} *= {regs[key]}" if op == "/=" else f"({lhs}) * {regs[key]}"
                replace.append((*src.span(d), new))
            mine = [q for q in inner if _inside(src, q[0].cursor, loop.cursor)]
            direct = [q for q in mine if not any(o is not q and _inside(src, q[0].cursor, o[0].cursor) for o in mine)]
            for lp, st in direct:
                ns, ne = loop_extent(src, lp)
                down = [r for r in replace if ns <= r[0] and r[1] <= ne]
                replace = [r for r in replace if r not in down] + [rewritten(lp, st, down)]
            text = src.text[s:e]
            for a, b, new in sorted(replace, key=lambda r: r[0], reverse=True):
                text = text[:a - s] + new + text[b - s:]
            line = src.text[src.text.rfind("\n", 0, s) + 1:s]
            ind = line if not line.strip() else ""
            return s, e, "\n".join(["{", *[f"{ind}    {x}" for x in before], f"{ind}    " + text.replace("\n", "\n    "),
                                     f"{ind}}}"])

        edits = [rewritten(loop, sites, []) for loop, sites in outer]
        return Rewrite(src.replace(edits), f"reciprocal: division by {', '.join(names)} done once before the loop, "
                                           "a multiplication in it (results may differ by an ulp per division)")


def _inside(src, a, b) -> bool:
    (x, y), (u, v) = src.span(a), src.span(b)
    return u <= x and y <= v and (x, y) != (u, v)
