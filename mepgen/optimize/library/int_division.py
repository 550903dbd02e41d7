"""A remainder by a run-time value, made cheap where its operands allow, with the exact result everywhere.

A GPU has no integer divider: `a % n` by a value known only at run time is a sequence of about 20 instructions.
Periodic neighbours are full of them: `(x + 1) % L`, `(L + x - 1) % L`, where the left side is almost always in
[0, n) or in [n, 2n). The rewrite, through a small device function so every operand is evaluated once (named after
the kernel, `mepgen_wrap32_KERNEL`, so two patched kernels of one file do not define it twice):

- 32-bit `a % n` (type `int`): where `0 <= a < n` the remainder is `a`; where `n <= a < 2n` it is `a - n` (the
  wrap of a periodic neighbour); else `a % n` as before. Both tests imply `n > 0`, so `n <= 0` takes the operator.
  Not where the kernel also computes `a / n` (a flat index split in two): one division gives both.

A divisor that is a literal is left alone (the compiler already multiplies by its inverse), and so is every
other type (unsigned, 64-bit, char, floating point). 64-bit operands were tried the same way (32-bit unsigned
division where both fit) and gave nothing on the corpus's flat-index splits (ising, H100, 2026-11-26): nvcc's own
64-bit division already takes a 32-bit path for such operands.
"""
from __future__ import annotations

from .analysis import squash
from .base import Rewrite, Transformation
from .source import KernelSource, Refused, kind, walk

HELPERS = {
    "wrap32": ("static __device__ __forceinline__ int mepgen_wrap32(int a, int n)\n"
               "{\n    return (a >= 0 && a < n) ? a : (a >= n && a - n < n) ? a - n : a % n;\n}\n"),
}


def _literal(c) -> bool:
    """Whether the divisor is an integer constant (`2`, `(4)`, `2u`), which the compiler divides by cheaply."""
    while kind(c) in ("PAREN_EXPR", "UNEXPOSED_EXPR") and len(list(c.get_children())) == 1:
        c = list(c.get_children())[0]
    return kind(c) in ("INTEGER_LITERAL", "CHARACTER_LITERAL")


def _sites(src: KernelSource) -> list[tuple[object, str]]:
    """(operator cursor, helper) of every remainder the rewrite makes cheap."""
    out = []
    quotients = set()                 # `a / n` in 32 bits: its `a % n` comes from the same division, left alone
    for c in src.nodes("BINARY_OPERATOR"):
        kids = list(c.get_children())
        if src.operator(c) == "/" and len(kids) == 2:
            quotients.add(tuple(squash(src.src(k)) for k in kids))
    for c in src.nodes("BINARY_OPERATOR", "COMPOUND_ASSIGNMENT_OPERATOR"):
        if kind(c) != "BINARY_OPERATOR":
            continue
        op = src.operator(c)
        kids = list(c.get_children())
        if op != "%" or len(kids) != 2 or _literal(kids[1]):
            continue
        if c.type.get_canonical().spelling != "int" or \
                any(k.type.get_canonical().spelling != "int" for k in kids):
            continue                  # unsigned, 64-bit, char, enum: other conversions, or nothing to gain
        if tuple(squash(src.src(k)) for k in kids) not in quotients:
            out.append((c, "wrap32"))
    return out


class IntDivision(Transformation):
    def __init__(self):
        super().__init__("int_division", "remainders by run-time values on a cheap exact path", {})

    def space(self, src, spec, launch):
        if not _sites(src):
            raise Refused("no `%` by a run-time value on ints (other than one that shares its division with a `/`)")
        return {}

    def apply(self, src, spec, launch, params):
        sites = _sites(src)
        if not sites:
            raise Refused("no `%` by a run-time value on ints (other than one that shares its division with a `/`)")
        which = {id(c): h for c, h in sites}
        # named after the kernel: two kernels of one file patched with this rewrite each bring their own
        names = {h: f"mepgen_{h}_{src.name}" for h in HELPERS}
        spans = {id(c): src.span(c) for c, _ in sites}

        def text_of(c) -> str:
            """The expression's text with every site inside it (itself included) through its helper."""
            start, end = src.span(c)
            if id(c) in which:
                a, b = list(c.get_children())
                return f"{names[which[id(c)]]}({text_of(a)}, {text_of(b)})"
            inner = sorted((spans[id(k)], k) for k in list(walk(c))[1:] if id(k) in which)
            out, pos, last = [], start, -1
            for (s, e), k in inner:
                if s < last:
                    continue                      # inside a site already taken
                out += [src.text[pos:s], text_of(k)]
                pos = last = e
            return "".join(out) + src.text[pos:end]

        outer = []
        for c, _ in sorted(sites, key=lambda s: spans[id(s[0])]):
            s, e = spans[id(c)]
            if outer and s < outer[-1][1]:
                continue
            outer.append((s, e, text_of(c)))
        used = sorted({h for _, h in sites})
        at = src.fn.extent.start.offset
        helpers = "".join(HELPERS[h].replace(f"mepgen_{h}(", f"{names[h]}(") for h in used)
        text = src.replace(outer + [(at, at, helpers)])
        return Rewrite(text, f"integer division: {len(sites)} `%` by run-time values through an exact cheap path (`a` "
                             f"where 0 <= a < n, the periodic wrap `a - n` where n <= a < 2n), the operator elsewhere")
