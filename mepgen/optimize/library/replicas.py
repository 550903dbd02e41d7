"""1D work launched on a 2D block or grid: `dim3 block(32, 8)` for a kernel that only ever reads
`blockIdx.x * blockDim.x + threadIdx.x`. No code the kernel runs reads a y (or z) index, so the 8 threads along
y of each block, and the blocks along y of the grid, all repeat the work of the one at y = 0: the same reads,
the same values written to the same places.

- `replicated_dims`: which launch dimensions only replicate, from the kernel's syntax tree (macros expanded, the
  device functions it calls included), refused where a replica could tell itself apart: an atomic (each
  replica adds again), a warp-level intrinsic (a warp of a 16 x 16 block holds two replicas), a cooperative
  group, or a reference to a built-in index other than through `.x`/`.y`/`.z`.
- `DropReplicas`: the same launch without them. Each output is then written once by one thread instead of
  8 times by 8 (whose `y[j] += ...` also raced with each other).
- `OnOneDimension(inner)`: a transformation that needs a 1D launch (split_columns, coarsen ...) also applies
  there, to the launch without the replicas, which its candidate then states.
"""
from __future__ import annotations

from .base import Rewrite, Transformation
from .source import KernelSource, Refused, kind, walk

_BUILTINS = ("threadIdx", "blockIdx", "blockDim", "gridDim")
_AXES = {"y": 1, "z": 2}
_SIDE_EFFECTS = ("atomic", "__shfl", "__ballot", "__any", "__all", "__activemask", "__match", "__reduce_",
                 "__syncwarp", "__syncthreads_", "this_thread_block", "tiled_partition", "coalesced_threads")


def _functions(src: KernelSource) -> list:
    """The kernel's definition and those of the functions it calls (through any depth) that the parse can see
    outside system headers."""
    out, todo, seen = [], [src.fn], set()
    while todo:
        fn = todo.pop()
        usr = fn.get_usr() or str(fn.extent)
        if usr in seen:
            continue
        seen.add(usr)
        out.append(fn)
        for c in walk(fn):
            if kind(c) != "CALL_EXPR" or c.referenced is None:
                continue
            d = c.referenced.get_definition()
            if d is not None and d.location.file is not None and not d.location.is_in_system_header:
                todo.append(d)
    return out


def replicated_dims(src: KernelSource, launch: dict) -> list[int]:
    """The dimensions (1 = y, 2 = z) the launch extends over (block or grid not a literal 1) that no code the
    kernel runs tells apart; Refused with the reason where replicas could behave differently."""
    used, refs, members = set(), 0, 0
    for fn in _functions(src):
        for c in walk(fn):
            k = kind(c)
            if k == "CALL_EXPR" and c.spelling.startswith(_SIDE_EFFECTS):
                raise Refused(f"the kernel calls {c.spelling}: replicas along y would not do the same")
            if k == "DECL_REF_EXPR" and c.spelling in _BUILTINS:
                refs += 1
            elif k == "MEMBER_REF_EXPR" and c.spelling in ("x", "y", "z"):
                kids = list(c.get_children())
                if len(kids) == 1 and kind(kids[0]) in ("DECL_REF_EXPR", "UNEXPOSED_EXPR") and \
                        any(kind(n) == "DECL_REF_EXPR" and n.spelling in _BUILTINS for n in walk(kids[0])):
                    members += 1
                    if c.spelling in _AXES:
                        used.add(_AXES[c.spelling])
    if refs != members:
        raise Refused("the kernel uses a built-in index other than through .x/.y/.z (a copy of threadIdx ...)")
    one = lambda v: str(v).strip().strip("()").strip().rstrip("uUlL") == "1"
    extent = lambda d: any(d < len(side) and not one(side[d]) for side in (launch["grid"], launch["block"]))
    return [d for d in (1, 2) if extent(d) and d not in used]


def without(launch: dict, dims: list[int]) -> dict:
    """The launch with those dimensions removed from grid and block (trailing ones: a middle one stays as 1)."""
    grid, block = list(launch["grid"]), list(launch["block"])
    for side in (grid, block):
        for d in dims:
            if d < len(side):
                side[d] = "1"
        while len(side) > 1 and side[-1].strip().strip("()").strip() == "1":
            side.pop()
    return {**launch, "grid": grid, "block": block}


def _said(launch: dict, dims: list[int]) -> str:
    axes = " and ".join("yz"[d - 1] for d in dims)
    extents = [f"{side}.{'yz'[d - 1]} = {launch[side][d]}" for side in ("block", "grid") for d in dims
               if d < len(launch[side]) and launch[side][d].strip().strip("()") != "1"]
    return f"no code of the kernel reads a {axes} index, so the threads along {axes} ({', '.join(extents)}) repeat " \
           "the same work"


class DropReplicas(Transformation):
    def __init__(self):
        super().__init__("drop_replicas", "1D work on a 2D launch: the threads that repeat it are not launched", {})

    def space(self, src, spec, launch):
        dims = replicated_dims(src, launch)
        if not dims:
            raise Refused("every launch dimension is read by the kernel (or is 1)")
        # a y extent written as a size that is 1 here (`DIM_Y` = 1): the launch without it is the same launch; the
        # 1D rewrites still apply through OnOneDimension, which does not depend on its value
        if all(spec.size(str(side[d])) == 1 for d in dims for side in (launch["grid"], launch["block"])
               if d < len(side)):
            raise Refused("the dimensions no code reads are 1 at the MEP's sizes: no replicas to drop")
        return {}

    def apply(self, src, spec, launch, params):
        dims = replicated_dims(src, launch)
        if not dims:
            raise Refused("every launch dimension is read by the kernel (or is 1)")
        return Rewrite(src.text, f"launch without replicas: {_said(launch, dims)}; launched with 1 there",
                       launch=without(launch, dims))


class OnOneDimension(Transformation):
    """`inner`, also on a launch whose extra dimensions only replicate 1D work (as DropReplicas): there it
    applies to the launch without them. Name, parameters and defaults are inner's: a chain replays the same way."""

    def __init__(self, inner: Transformation):
        super().__init__(inner.name, inner.summary, dict(inner.defaults))
        self.inner = inner

    def _launch(self, src, spec, launch):
        """(inner's space, the launch it applies to, the dimensions dropped or None)."""
        try:
            return self.inner.space(src, spec, launch), launch, None
        except Refused as first:
            try:
                dims = replicated_dims(src, launch)
            except Refused:
                raise first from None
            if not dims:
                raise first from None
            reduced = without(launch, dims)
            try:
                return self.inner.space(src, spec, reduced), reduced, dims
            except Refused as again:
                raise Refused(f"{first} (without the replicas along y/z: {again})") from None

    def space(self, src, spec, launch):
        return self._launch(src, spec, launch)[0]

    def first_point(self, src, spec, launch):
        return self.inner.first_point(src, spec, self._launch(src, spec, launch)[1])

    def leads(self, src, spec):
        return self.inner.leads(src, spec)

    def apply(self, src, spec, launch, params):
        _, reduced, dims = self._launch(src, spec, launch)
        rw = self.inner.apply(src, spec, reduced, params)
        if dims:
            rw.launch = rw.launch if rw.launch is not None else reduced
            rw.explanation = f"launch without replicas ({_said(launch, dims)}), then {rw.explanation}"
        return rw
