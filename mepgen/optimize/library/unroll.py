"""`#pragma unroll N` on the kernel's innermost loops: more independent loads in flight per thread.

Refuses when no innermost loop exists, when a loop already carries a pragma, or when the loop body
holds a barrier (unrolling is legal then, but gains nothing and grows code around the barrier).
"""
from __future__ import annotations

from .base import Rewrite, Transformation
from .source import Refused, kind, walk


class Unroll(Transformation):
    def __init__(self):
        super().__init__("unroll", "#pragma unroll on innermost loops", {"factor": 4})

    def _loops(self, src):
        loops = []
        for c in src.nodes("FOR_STMT", "WHILE_STMT"):
            if kind(c) != "FOR_STMT" or any(kind(k) in ("FOR_STMT", "WHILE_STMT", "DO_STMT")
                                            for k in list(walk(c))[1:]):
                continue
            if src.has_pragma(c):
                continue
            if "__syncthreads" in src.src(c):
                continue
            loops.append(c)
        if not loops:
            raise Refused("no innermost for loop without a pragma or a barrier")
        return loops

    def space(self, src, spec, launch):
        self._loops(src)
        return {"factor": [2, 4, 8, 16]}

    def apply(self, src, spec, launch, params):
        n = int(params.get("factor", 4))
        loops = self._loops(src)
        edits = [(c.extent.start.offset, c.extent.start.offset, f"\n#pragma unroll {n}\n") for c in loops]
        return Rewrite(src.replace(edits), f"unroll: #pragma unroll {n} on {len(loops)} innermost loop(s)")
