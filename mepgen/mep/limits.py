"""CUDA's launch limits checked on the MEP's launch with its sizes: a grid whose y extent passes 65535 or a block
of more than 1024 threads does not launch ("invalid argument"), in the MEP as in the application. When the sizes
are derived (no size todo), the application's own launch at that size fails too: the todo says so and asks for
sizes the launch can take, instead of an MEP called complete that cannot run.
"""
from __future__ import annotations

from .. import cexpr

GRID_MAX = (2**31 - 1, 65535, 65535)
BLOCK_MAX = (1024, 1024, 64)
THREADS_MAX = 1024


def launch_beyond_limits(grid: list[str], block: list[str], sizes: dict[str, int], macros: dict) -> str | None:
    """Why the launch cannot run with these sizes, or None (also when an extent does not evaluate)."""
    values = {**macros, **sizes}
    g = [cexpr.evaluate(e, values) for e in grid]
    b = [cexpr.evaluate(e, values) for e in block]
    if any(v is None or isinstance(v, bool) for v in g + b):
        return None
    g, b = [int(v) for v in g], [int(v) for v in b]
    for axis, (v, most) in enumerate(zip(g, GRID_MAX)):
        if v > most:
            return f"grid.{'xyz'[axis]} is {v} with these sizes, beyond CUDA's {most}"
        if v < 1:
            return f"grid.{'xyz'[axis]} is {v} with these sizes: no block runs"
    for axis, (v, most) in enumerate(zip(b, BLOCK_MAX)):
        if v > most or v < 1:
            return f"block.{'xyz'[axis]} is {v} with these sizes, outside CUDA's 1..{most}"
    threads = 1
    for v in b:
        threads *= v
    if threads > THREADS_MAX:
        return f"a block of {threads} threads with these sizes, beyond CUDA's {THREADS_MAX}"
    return None
