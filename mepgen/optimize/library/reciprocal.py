"""A floating-point division in a loop by a value the loop does not change: one division before the loop, a
multiplication in it.

    for (int i = 0; i < M; ++i) {                   if ((0) < (M)) {
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
- the divisor is invariant in the loop: it reads only variables declared before the loop and not assigned in it, no
  memory and no call (Memory.invariant_in);
- the division's type is `float` or `double` (canonical type: a typedef or `auto` of one counts);
- a divisor that is a power-of-two literal is left alone: nvcc multiplies by its exact inverse itself.
The loop's bounds are evaluated once more (the `if (lo < hi)` around it, loop_registers.wrapped): they must be pure
(checked_loop). `a /= d` becomes `a *= r`. A division inside another one that is rewritten stays a division.
"""
from __future__ import annotations

import math

from .analysis import squash
from .base import Rewrite, Transformation
from .loop_registers import first_reason, open_loops, wrapped
from .memory_roots import Memory
from .source import Refused, kind, walk

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


class Reciprocal(Transformation):
    def __init__(self):
        super().__init__("reciprocal", "a loop-invariant floating-point divisor: one division before the loop, "
                                       "a multiplication in it")

    def _plans(self, src, spec):
        why = _tolerance_refusal(spec)
        if why:
            raise Refused(why)
        mem = Memory(src, spec)
        chosen, reasons = [], []
        for _, loop in open_loops(src, chosen, reasons):
            sites = []
            for d in walk(loop.body):
                if kind(d) not in ("BINARY_OPERATOR", "COMPOUND_ASSIGNMENT_OPERATOR"):
                    continue
                kids = list(d.get_children())
                op = src.operator(d)
                if op not in ("/", "/=") or len(kids) != 2:
                    continue
                t = FLOATS.get((kids[0] if op == "/=" else d).type.get_canonical().kind.name)
                if t is None or _power_of_two(kids[1]):
                    continue
                if "/" not in src.src(d):
                    reasons.append(f"a division is spelled through a macro: `{squash(src.src(d))[:40]}`")
                    continue
                varies = mem.invariant_in(kids[1], loop.cursor)
                if varies:
                    reasons.append(f"`{squash(src.src(d))[:40]}` divides by a value the loop over {loop.var} "
                                   f"changes ({varies})")
                    continue
                sites.append((d, t, op))
            spans = [src.span(d) for d, _, _ in sites]
            sites = [s for s, (a, b) in zip(sites, spans)     # a division inside another rewritten one stays
                     if not any(x <= a and b <= y and (x, y) != (a, b) for x, y in spans)]
            if sites:
                chosen.append((loop, sites))
        if not chosen:
            raise Refused("no floating-point division in a loop by a value the loop does not change"
                          + (f" ({first_reason(reasons)})" if reasons else ""))
        return chosen

    def space(self, src, spec, launch):
        self._plans(src, spec)
        return {}

    def apply(self, src, spec, launch, params):
        edits, names, n = [], [], 0
        for loop, sites in self._plans(src, spec):
            regs: dict[tuple[str, str], str] = {}
            before, replace = [], []
            for d, t, op in sites:
                lhs, divisor = (src.src(k) for k in d.get_children())
                key = (t, squash(divisor))
                if key not in regs:
                    regs[key] = f"mepgen_inv{n}"
                    n += 1
                    before.append(f"const {t} {regs[key]} = ({t})1 / ({t})({divisor});")
                    names.append(squash(divisor))
                new = f"{lhs} *= {regs[key]}" if op == "/=" else f"({lhs}) * {regs[key]}"
                replace.append((*src.span(d), new))
            edits.append(wrapped(src, loop, replace, before, []))
        return Rewrite(src.replace(edits), f"reciprocal: division by {', '.join(names)} done once before the loop, "
                                           "a multiplication in it (results may differ by an ulp per division)")
