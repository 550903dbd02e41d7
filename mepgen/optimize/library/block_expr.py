"""A block dimension written as an expression of size symbols (`N < BLOCK_SIZE ? N : BLOCK_SIZE`, the block
clamped to a small problem), which the grid divides by verbatim (`(N + (that) - 1) / (that)`).

The launch rewrites (launch_config, split_columns) replace the block dimension by a literal and the same text in
the grid by the same literal: the grid still rounds the work up to whole blocks. They accepted only a macro or a
literal; an expression is as good when its value is known for the MEP's sizes (it is a compile-time value) and
the kernel spells none of its names (no `__shared__ float s[BLOCK_SIZE]` that would keep the old size).
"""
from __future__ import annotations

import re

from ...cexpr import is_one_group


def _bare(expr: str) -> str:
    e = " ".join(str(expr).split())
    while is_one_group(e):
        e = e[1:-1].strip()
    return e



def in_grid(token: str, grid: str) -> bool:
    """Whether `grid` spells `token` as a whole operand (not inside a longer name)."""
    return re.search(rf"(?<![\w.]){re.escape(token)}(?![\w.])", " ".join(str(grid).split())) is not None


def expression_block(expr: str, grid: str, spec, kernel_text: str) -> str | None:
    """The block expression (spaces normalised) when it is not a single macro or literal, the grid spells it,
    its value is known for the MEP's sizes and the kernel uses none of its names; None otherwise."""
    e = _bare(expr)
    if e.isidentifier() or e.isdigit() or not in_grid(e, grid):
        return None
    if spec.size(e) is None:
        return None
    names = set(re.findall(r"[A-Za-z_]\w*", e))
    if any(re.search(rf"(?<![\w.]){re.escape(n)}(?![\w.])", kernel_text) for n in names):
        return None
    return e


def substitute(grid: str, token: str, value: int) -> str:
    """`grid` with every whole occurrence of `token` (a macro, literal or expression) replaced by `value`."""
    return re.sub(rf"(?<![\w.]){re.escape(token)}(?![\w.])", str(value), " ".join(str(grid).split()))
