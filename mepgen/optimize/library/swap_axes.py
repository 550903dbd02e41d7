"""Swap the x and y axes of a 2D/3D launch, so that a warp's threads walk memory along the contiguous dimension.

A naive kernel often maps x to the strided dimension: `a[(bx*bdx + tx) * n + (by*bdy + ty)]` puts a warp's 32
threads n elements apart (32 transactions a load). Renaming threadIdx/blockIdx/blockDim/gridDim .x <-> .y in
the kernel and swapping the launch's x and y extents gives every thread the same work (the same (x, y) pair
under the other name), with a warp now along the unit-stride dimension.

Decided on the shared access model (affine.py): every global access's index as a polynomial over the thread
indices; the rewrite is offered only when more accesses are unit-stride along y and strided along x than the
reverse. Legal only where the renaming is the whole story: no warp-level operation (shuffles, votes,
`warpSize`, `volatile` shared memory: a warp's members change), no thread geometry spelled through a macro or
read by a device function (the renaming would miss it), and the swapped grid within the y limit (65535).
"""
from __future__ import annotations

import re

from .affine import local_constants, poly
from .analysis import squash, warp_level
from .base import Rewrite, Transformation
from .source import Refused, kind, walk

BUILTIN = re.compile(r"\b(threadIdx|blockIdx|blockDim|gridDim)(\s*\.\s*)([xy])\b")
GRID_Y_MAX = 65535


def _stride(p: dict, t: str):
    """The coefficient of the thread index `t` in polynomial `p`: an int, or None when it is symbolic."""
    mons = [m for m in p if t in m]
    if not mons:
        return 0
    if mons == [(t,)]:
        return p[(t,)]
    return None


def _padded(launch: dict) -> tuple[list[str], list[str]]:
    grid, block = [str(g) for g in launch["grid"]], [str(b) for b in launch["block"]]
    n = max(len(grid), len(block))
    return grid + ["1"] * (n - len(grid)), block + ["1"] * (n - len(block))


class SwapAxes(Transformation):
    def __init__(self):
        super().__init__("swap_axes", "threads along x walk the contiguous dimension (x and y swapped)",
                         {"axes": "yx"})

    def _check(self, src, spec, launch) -> tuple[int, int]:
        grid, block = _padded(launch)
        if len(grid) < 2:
            raise Refused("the launch is 1D: no y axis to swap with")
        body = src.src(src.body)
        if not BUILTIN.search(body):
            raise Refused("the kernel does not read its thread geometry along x or y")
        warp = warp_level(src)
        if warp:
            raise Refused(f"the kernel uses warp-level operations ({', '.join(warp)}): swapping x and y changes "
                          "which threads form a warp")
        if len(BUILTIN.findall(src.expand(body))) != len(BUILTIN.findall(body)):
            raise Refused("a macro spells the thread geometry: renaming x and y in the kernel would miss it")
        for c in src.nodes("CALL_EXPR"):
            ref = c.referenced
            fn = (ref.get_definition() or ref) if ref is not None else None
            if fn is not None and fn.location.file is not None and fn.location.file.name == src.path and \
                    re.search(r"\b(threadIdx|blockIdx|blockDim|gridDim)\b", src.src(fn)):
                raise Refused(f"the device function {fn.spelling} reads the thread geometry itself")
        gx = spec.size(grid[0])
        if gx is None:
            raise Refused(f"the grid's x extent `{grid[0]}` has no value for the MEP's sizes (the y limit is "
                          f"{GRID_Y_MAX})")
        if gx > GRID_Y_MAX:
            raise Refused(f"the grid's x extent is {gx} blocks: more than the {GRID_Y_MAX} a grid's y may have")
        return self._accesses(src)

    def _accesses(self, src) -> tuple[int, int]:
        """(accesses that would become coalesced, accesses that would stop being) over the global buffers."""
        env = local_constants(src, src.body, set())
        pointers = {p.name for p in src.params if p.pointer}
        pro = con = 0
        for c in walk(src.body):
            if kind(c) != "ARRAY_SUBSCRIPT_EXPR":
                continue
            base, idx = list(c.get_children())
            if squash(src.src(base)) not in pointers:
                continue
            try:
                p = poly(src, idx, env)
            except Refused:
                continue
            sx, sy = _stride(p, "threadIdx.x"), _stride(p, "threadIdx.y")
            good_x, good_y = sx in (0, 1, -1), sy in (0, 1, -1)
            pro += (not good_x) and sy in (1, -1)
            con += sx in (1, -1) and not good_y
        return pro, con

    def space(self, src, spec, launch):
        pro, con = self._check(src, spec, launch)
        if pro <= con:
            raise Refused(f"threads along x already walk the contiguous dimension ({pro} global access(es) would "
                          f"become unit-stride along x, {con} would stop being)")
        return {"axes": ["yx"]}

    def apply(self, src, spec, launch, params):
        pro, con = self._check(src, spec, launch)
        start, end = src.span(src.body)
        body = BUILTIN.sub(lambda m: m.group(1) + m.group(2) + ("y" if m.group(3) == "x" else "x"), src.text[start:end])
        grid, block = _padded(launch)
        grid[0], grid[1] = grid[1], grid[0]
        block[0], block[1] = block[1], block[0]
        new = {"grid": grid, "block": block, "shared_mem": str(launch.get("shared_mem", "0"))}
        return Rewrite(src.replace([(start, end, body)]),
                       f"swap_axes: x and y swapped (grid {', '.join(grid)}; block {', '.join(block)}): {pro} global "
                       f"access(es) become unit-stride along a warp, {con} stop being", new)
