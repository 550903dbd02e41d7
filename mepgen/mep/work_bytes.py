"""The bytes a launch moves at least (a mep.yaml's `work.bytes`, for the roofline)."""
from __future__ import annotations

from ..spec import Param, itemsize

#: accesses that read a buffer's old contents from memory (an atomic reads and writes at the L2)
READING = ("read", "rmw", "atomic", "call_read")


def written_only(params: list[Param], facts) -> set[str]:
    """The inout buffers the kernel never reads: inout only because some elements are left unwritten (a stencil's
    border), so a launch writes them and reads nothing of them. Buffers without known accesses are not claimed."""
    out = set()
    for p in params:
        acc = facts.accesses.get(p.name, [])
        if p.role == "inout" and acc and not any(a.kind in READING for a in acc):
            out.add(p.name)
    return out


def work_bytes(params: list[Param], grid: list[str] | None = None, block: list[str] | None = None,
                loops: int = 0, written_only: set[str] = frozenset()) -> str | None:
    """Bytes a launch moves at least, for the roofline: every buffer read once, an inout one read and written,
    except one the kernel only writes (`written_only`: counted once; full-sector writes fetch nothing).
    A loop-free kernel touches at most one element of each buffer per thread, so the estimate is capped by
    the launch's thread count (a kernel that updates the perimeter of a grid does not move the whole grid)."""
    total = _buffer_bytes(params, written_only)
    if total is None or loops or not grid or not block:
        return total
    per_thread = sum(itemsize_of(p) * _times(p, written_only) for p in params if p.role != "scalar")
    threads = " * ".join(f"({e})" for e in [*grid, *block])
    return f"std::min({total}, {per_thread} * {threads})"


def itemsize_of(p: Param) -> int:
    return itemsize(p.dtype) or 1


def _times(p: Param, written_only: set[str]) -> int:
    return 2 if p.role == "inout" and p.name not in written_only else 1


def _buffer_bytes(params: list[Param], written_only: set[str] = frozenset()) -> str | None:
    terms = []
    for p in params:
        if p.role == "scalar":
            continue
        size = itemsize_of(p)
        times = _times(p, written_only)
        terms.append(f"{times * size} * ({p.count})" if times * size != 1 else f"({p.count})")
    return " + ".join(terms) or None
