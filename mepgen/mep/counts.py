"""Element counts as expressions: from an allocation's byte size, or from a kernel's index expressions.

`cudaMalloc(&d_u, static_cast<size_t>(n) * sizeof(real_t))` gives `n` elements; `A[row * ncols + j]` with
`row < nrows` and `j < ncols` gives `nrows * ncols`; `row_ptr[row + 1]` with `row < nrows` gives
`nrows + 1`. Kernel-side names are then rewritten over the launch's values (`nrows` -> `MAT_N`).
"""
from __future__ import annotations

import re

from .. import cexpr
from ..cexpr import split_top_level
from .access import Access, upper_bounds

_SIZEOF = re.compile(r"^sizeof\s*\((.+)\)$")
_CAST = re.compile(r"static_cast\s*<[^<>]*>\s*\(")
_IDENT = re.compile(r"(?<![\w.])([A-Za-z_]\w*)(\s*\.\s*([A-Za-z_]\w*))?")


def unparen(text: str) -> str:
    """Drop redundant outer parentheses and doubled ones: `((NX * NY))` -> `NX * NY`."""
    t = text.strip()
    while cexpr.is_one_group(t):
        t = t[1:-1].strip()
    prev = None
    while prev != t:
        prev = t
        t = re.sub(r"\(\(([^()]*)\)\)", r"(\1)", t)
        # not a cast (`(double)n` stays), nor sizeof's operand (`sizeof (double) * n`)
        t = re.sub(r"(?<![\w>])\((\w+)\)(?!\s*[\w(.])",
                   lambda m: m.group(0) if re.search(r"\bsizeof\s*$", t[:m.start()]) else m.group(1), t)
    return t


def drop_casts(text: str) -> str:
    """`static_cast<size_t>(n) * 4` -> `(n) * 4` (casts do not change a count)."""
    while True:
        m = _CAST.search(text)
        if not m:
            return text
        text = text[:m.start()] + "(" + text[m.end():]


def count_from_bytes(bytes_expr: str, elem_size: int | None) -> str:
    """Elements in an allocation of `bytes_expr` bytes: drop a top-level `* sizeof(T)` factor, else divide."""
    text = unparen(drop_casts(bytes_expr))
    if _depth0_ops(text) <= {"*"}:
        factors = split_top_level(text, "*")
        kept = [f for f in factors if not _SIZEOF.match(unparen(f))]
        if len(kept) == len(factors) and elem_size and str(elem_size) in [unparen(f) for f in kept]:
            kept.remove(next(f for f in kept if unparen(f) == str(elem_size)))   # `n * 32`: 32-byte elements
        if len(kept) < len(factors):      # `W * (X + 1) * sizeof(T)` -> `W * (X + 1)`: a sum keeps its parentheses
            return unparen(" * ".join(_p(unparen(f)) for f in kept)) if kept else "1"
    return text if elem_size == 1 else f"({text}) / {elem_size or 1}"


def _depth0_ops(text: str) -> set[str]:
    ops, depth = set(), 0
    for ch in text:
        depth += ch == "("
        depth -= ch == ")"
        if depth == 0 and ch in "+-*/%":
            ops.add(ch)
    return ops


def index_count(acc: Access, locals_: dict[str, str], thread_locals: set[str]) -> str | None:
    """The element count an access implies (kernel-side names), or None when its index has no known form."""
    if acc.index is None or acc.via:
        return None
    bounds = upper_bounds(acc.guards)
    idx = _expand(acc.index, locals_, thread_locals, bounds)
    b = lambda v: bounds[v][0] if v in bounds else None
    t = re.sub(r"\s+", " ", unparen(idx))
    m = re.fullmatch(r"(\w+)", t)
    if m and b(m.group(1)):
        return b(m.group(1))
    m = re.fullmatch(r"(\w+) ?([+-]) ?(\d+)", t)
    if m and b(m.group(1)):
        return f"{b(m.group(1))} {m.group(2)} {m.group(3)}" if m.group(2) == "+" else b(m.group(1))
    m = re.fullmatch(r"\(?(\w+) ?\* ?([\w.]+)\)? ?\+ ?(\w+)", t)
    if m and b(m.group(1)) and b(m.group(3)):
        rows, stride, col = b(m.group(1)), m.group(2), b(m.group(3))
        return f"{_p(rows)} * {stride}" if col.replace(" ", "") == stride else f"({_p(rows)} - 1) * {stride} + {_p(col)}"
    return None


def _p(text: str) -> str:
    return text if re.fullmatch(r"[\w.]+", text.strip()) else f"({text.strip()})"


def _expand(index: str, locals_: dict[str, str], thread_locals: set[str], bounds: dict) -> str:
    """Substitute non-thread locals by their initializers (idx -> j * g.nx + i), a few levels deep."""
    for _ in range(4):
        changed = False

        def sub(m):
            nonlocal changed
            name = m.group(1)
            if name in locals_ and name not in thread_locals and name not in bounds and not m.group(2):
                changed = True
                return f"({locals_[name]})"
            return m.group(0)
        index = _IDENT.sub(sub, index)
        if not changed:
            break
    return index


def to_sizes(expr: str, values: dict[str, str], struct_fields: dict[str, str], locals_: dict[str, str],
             known: set[str]) -> str | None:
    """Rewrite a kernel-side expression (`g.nx - 1`, `nrows + 1`) over launch values and size symbols."""
    text = expr
    for _ in range(5):
        def sub(m):
            name, member = m.group(1), m.group(3)
            if member and f"{name}.{member}" in struct_fields:
                return _p(struct_fields[f"{name}.{member}"])
            if not member and name in values:
                return _p(values[name])
            if not member and name in locals_:
                return _p(locals_[name])
            return m.group(0)
        new = _IDENT.sub(sub, text)
        if new == text:
            break
        text = new
    text = unparen(text)
    return None if cexpr.names(text) - known or cexpr.evaluate(text, {k: 1 for k in known}) is None else text
