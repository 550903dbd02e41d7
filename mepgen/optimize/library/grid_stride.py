"""The grid of a grid-stride kernel sized for the work: `per_thread` elements per thread at least, the grid
`ceil(count / (block * per_thread))` over the same size symbols as mep.yaml's launch. A kernel whose every
element is visited by grid-stride loops is correct for any grid; its speed is not. A grid sized for the GPU's
maximum (`min(n / block, 4096)`) leaves a privatized histogram with 4 elements per thread and a block's
set-up and merge (zeroing and adding its shared copy) paid for every 4 elements: on the H200 heatcg's histogram
went 25.0 -> 10.0 us at 32 elements per thread (bench/results/histogram_variants.md).

Applies to a 1D launch whose kernel uses blockIdx and gridDim only in grid-stride loops: each such loop starts
at `[OFFSET +] blockIdx.x * blockDim.x + threadIdx.x` (OFFSET free of the grid) and steps by
`blockDim.x * gridDim.x` (or a local holding it). Per-block results (`partial[blockIdx.x]`), grid-wide
indices elsewhere or 2D/3D launches are refused. The element count is the largest loop bound that mep.yaml
gives a value. Only the launch changes; the grid expression keeps the block's symbol, so launch_config can
still retune the block afterwards.
"""
from __future__ import annotations

import re

from .analysis import size_expr, canonical_loop, is_global_index, is_grid_stride, squash
from .base import Rewrite, Transformation
from .source import Refused, kind, walk

PER_THREAD = [32, 64, 16, 128, 8]
_OFFSET_INDEX = re.compile(r"^(?P<offset>.+?)\s*\+\s*\((?P<index>[^()]*)\)$")


class GridStride(Transformation):
    def __init__(self):
        super().__init__("grid_stride", "the grid of grid-stride loops sized for several elements per thread",
                         {"per_thread": 32})

    def _match(self, src, spec, launch):
        if len(launch["grid"]) != 1 or len(launch["block"]) != 1:
            raise Refused("the launch is not 1D")
        strides = {}
        for c in src.nodes("VAR_DECL"):
            init = [k for k in c.get_children() if kind(k) not in ("TYPE_REF", "NAMESPACE_REF")]
            if init and is_grid_stride(src.src(init[-1])):
                strides[c.spelling] = src.span(c)
        starts = {}          # `int index = blockIdx.x * blockDim.x + threadIdx.x;` used only to start the loops
        for c in src.nodes("VAR_DECL"):
            init = [k for k in c.get_children() if kind(k) not in ("TYPE_REF", "NAMESPACE_REF")]
            if init and is_global_index(src.src(init[-1])):
                starts[c.spelling] = src.span(c)
        allowed, bounds, started = list(strides.values()), [], []
        for c in src.nodes("FOR_STMT"):
            try:
                loop = canonical_loop(src, c)
            except Refused:
                continue
            step = squash(loop.step)
            if "gridDim" not in src.src(c) and "blockIdx" not in src.src(c) and squash(loop.lo) not in starts:
                continue
            if not (is_grid_stride(step) or step in strides):
                continue
            if squash(loop.lo) in starts:
                started.append(squash(loop.lo))
            elif not self._starts_at_global_index(loop.lo):
                raise Refused(f"a grid-stride loop starts at `{squash(loop.lo)[:60]}`, not at the global index")
            init, _cond, inc = list(c.get_children())[:3]
            allowed += [src.span(init), src.span(inc)]
            bounds.append(loop.hi)
        if not bounds:
            raise Refused("no grid-stride loop (blockIdx.x * blockDim.x + threadIdx.x; += blockDim.x * gridDim.x)")
        for name in set(started):
            uses = [c for c in walk(src.body) if kind(c) == "DECL_REF_EXPR" and c.spelling == name]
            if len(uses) != started.count(name):
                raise Refused(f"{name} (the global index) is used other than to start the grid-stride loops")
            allowed.append(starts[name])
        for c in walk(src.body):
            if kind(c) == "MEMBER_REF_EXPR" and src.src(c).split(".")[0] in ("blockIdx", "gridDim"):
                if src.src(c) not in ("blockIdx.x", "gridDim.x"):
                    raise Refused(f"the kernel uses {src.src(c)} (a 2D/3D grid)")
                s = src.span(c)[0]
                if not any(a <= s < b for a, b in allowed):
                    line = src.text[src.text.rfind("\n", 0, s) + 1:src.text.find("\n", s)].strip()
                    raise Refused(f"{src.src(c)} is used outside a grid-stride loop: `{line[:60]}`")
        count, value = None, -1
        for hi in bounds:
            expr = size_expr(src, spec, squash(hi))
            v = spec.size(expr) if expr is not None else None
            if v is not None and v > value:
                count, value = expr, v
        if count is None:
            raise Refused(f"no grid-stride loop bound ({', '.join(squash(b) for b in bounds)}) has a value in mep.yaml")
        block = launch["block"][0]
        threads = spec.size(str(block))
        if threads is None:
            raise Refused(f"the block `{block}` has no value over the MEP's sizes")
        return count, value, str(block), threads

    @staticmethod
    def _starts_at_global_index(lo: str) -> bool:
        lo = squash(lo)
        if is_global_index(lo):
            return True
        m = _OFFSET_INDEX.match(lo)
        return bool(m and is_global_index(m.group("index")) and "blockIdx" not in m.group("offset")
                    and "gridDim" not in m.group("offset"))

    @staticmethod
    def _value_expr(spec, hi: str) -> str | None:
        """The loop bound as an expression over mep.yaml's sizes: a scalar parameter's value or the expression."""
        try:
            p = spec.param(hi)
            return p.value if p.role == "scalar" and p.value is not None else None
        except KeyError:
            return hi if spec.size(hi) is not None else None

    @staticmethod
    def _grid(count: str, block: str, per_thread: int) -> str:
        return f"(({count}) + ({block}) * {per_thread} - 1) / (({block}) * {per_thread})"

    def space(self, src, spec, launch):
        count, value, block, threads = self._match(src, spec, launch)
        current = spec.size(launch["grid"][0])
        values = [e for e in PER_THREAD
                  if spec.size(self._grid(count, block, e)) not in (current, 0)]
        if not values:
            raise Refused(f"every per-thread count gives the current grid ({current} blocks)")
        return {"per_thread": values}

    def apply(self, src, spec, launch, params):
        count, value, block, threads = self._match(src, spec, launch)
        e = int(params.get("per_thread", self.defaults["per_thread"]))
        if e < 1:
            raise Refused(f"per_thread {e}: at least 1")
        grid = self._grid(count, block, e)
        blocks, current = spec.size(grid), spec.size(launch["grid"][0])
        if blocks == current:
            raise Refused(f"the grid is already {current} blocks")
        new = {"grid": [grid], "block": list(launch["block"]), "shared_mem": str(launch.get("shared_mem", "0"))}
        return Rewrite(src.text, f"grid sized for {e} elements per thread: {blocks} blocks of {threads} (was "
                                 f"{current}) over the grid-stride loops' {value} elements; the kernel is unchanged",
                       new)
