"""Block coarsening: each block does the work of C consecutive blocks of the original launch along one dimension
(y of a 2D launch, or x), in a loop over them, and the grid along it shrinks by C (rounded up). Index arithmetic,
guards and the block's start are amortized; a thread keeps more independent loads in flight.

The kernel runs unchanged inside the loop, with `blockIdx.d` replaced by the virtual block `blockIdx.d * C + c`:
every thread computes for virtual block b exactly what it computed as block b. The virtual blocks past the original
grid (the grid rounded up to a multiple of C) must do nothing; two ways, in this order:
- exact: the original grid along d is an expression the kernel can compute (kernel_expr.py: its scalar parameters,
  kernel.cu's macros, a size that is the block itself as blockDim): the loop stops there (`if (b >= G) break;`,
  the same for the whole block). Shared memory and barriers are then allowed: each virtual block's work ends with
  a barrier (the next one reuses the shared arrays); a `return` ends one virtual block's work (`continue`), so
  it is refused together with barriers, shared memory or warp intrinsics, and inside a loop or switch;
- guarded: the kernel is pure declarations (no memory read, no call with side effects), then ONE `if (COND)
  {...}` holding all its work (what the library's normalization makes of early returns), where COND is a
  conjunction whose first terms read no memory and one of them is `L < H` (or `L <= H`) with L affine in
  blockIdx.d with a positive coefficient (non-negative in the other indices): for the MEP's sizes and scalars, L
  at the first virtual block past the grid (threads at 0) is already past H, so those blocks skip the work (the
  same reliance on the grid covering the bound as coarsen's rounded-up grid). No shared memory, barrier or warp
  intrinsic there.
Either way gridDim.d is not used (the rounded-up grid is not the original one), and blockIdx.d is neither hidden in
a macro (the replacement must see every use) nor read by a function the kernel calls.
The analysis is the shared affine one (affine.py) over the syntax tree; the reason names what fails.
"""
from __future__ import annotations

import re

from .affine import local_constants, poly
from .analysis import body_statements, check_pure, squash
from .base import Rewrite, Transformation, launch_threads
from .grid_axis import axis_refs, callees_read
from .kernel_expr import in_kernel
from .replicas import _SIDE_EFFECTS
from .source import Refused, kind, walk

FACTORS = [2, 4, 8]
#: threads the coarsened launch keeps at least (half of the 2048 a 132-SM H100 holds per SM): fewer would leave the GPU
#: half idle, which no saving of index arithmetic pays back
MIN_THREADS = 132 * 1024
AXES = "xyz"


def _conjuncts(src, c) -> list:
    c = _bare(c)
    if kind(c) == "BINARY_OPERATOR" and src.operator(c) == "&&":
        a, b = list(c.get_children())
        return _conjuncts(src, a) + _conjuncts(src, b)
    return [c]


def _bare(c):
    while kind(c) in ("UNEXPOSED_EXPR", "PAREN_EXPR") and len(list(c.get_children())) == 1:
        c = list(c.get_children())[0]
    return c


class CoarsenBlocks(Transformation):
    def __init__(self):
        super().__init__("coarsen_blocks", "each block does the work of C consecutive blocks along one dimension",
                         {"factor": 4, "dim": "y"})

    def _values(self, src, spec, launch, d: int) -> dict:
        """Atom -> value for the MEP's launch, sizes and scalar parameters (blockIdx.d left to the caller)."""
        vals = {}
        for i, axis in enumerate(AXES):
            vals[f"blockDim.{axis}"] = spec.size(str(launch["block"][i])) if i < len(launch["block"]) else 1
            vals[f"threadIdx.{axis}"] = 0
            if i != d:
                vals[f"blockIdx.{axis}"] = 0
                vals[f"gridDim.{axis}"] = spec.size(str(launch["grid"][i])) if i < len(launch["grid"]) else 1
        for p in spec.params:
            if p.role == "scalar" and p.value is not None and spec.size(str(p.value)) is not None:
                vals[p.name] = spec.size(str(p.value))
        return vals

    def _number(self, src, spec, atom: str, vals: dict) -> int:
        if atom in vals and vals[atom] is not None:
            return vals[atom]
        v = spec.size(src.expand(atom))
        if v is None:
            raise Refused(f"`{atom}` has no value for the MEP's sizes")
        return v

    def _match(self, src, spec, launch, axis: str) -> dict:
        d = AXES.index(axis)
        if d >= len(launch["grid"]) or d >= len(launch["block"]):
            raise Refused(f"the launch has no {axis} dimension")
        if spec.size(str(launch["grid"][d])) == 1:
            raise Refused(f"the grid has one block along {axis}")
        if any(kind(c) == "MEMBER_REF_EXPR" and squash(src.src(c)) == f"gridDim.{axis}" for c in walk(src.body)):
            raise Refused(f"the kernel uses gridDim.{axis}: the rounded-up grid is not the original one")
        refs = axis_refs(src, axis)
        if not refs:
            raise Refused(f"the kernel does not use blockIdx.{axis}")
        callees_read(src, axis)
        barriers = bool(src.shared_arrays()) or any(c.startswith("__syncthreads") for c in src.calls())
        warp = [c for c in src.calls() if c.startswith(_SIDE_EFFECTS) and not c.startswith("atomic")]
        returns = src.nodes("RETURN_STMT")
        try:
            bound = in_kernel(src, spec, launch["grid"][d], launch)
        except Refused as e:
            bound, exact_why = None, str(e)
        fixed = bound is not None and not _follows_the_launch(src, spec, bound)
        if fixed and _captured(spec):
            # a captured launch's grid is the recorded run's number of blocks: written into the kernel as the bound it
            # holds for that run only (the application's other launches, other sizes, have other grids and would do
            # too little or too much: shuffle's transpose, launched with blocks of 8, 16 and 32, failed the
            # application's check on the GPU after a 7.9x win in its MEP)
            bound, fixed, exact_why = None, False, (
                f"`{squash(str(launch['grid'][d]))}` is the captured run's number of blocks, no expression of the "
                "kernel's parameters: a bound written as it holds for that run only, not for the application's other "
                "launches or sizes")
        elif fixed and spec.launch.varies.get("grid") and not spec.launch.observed:
            bound, fixed, exact_why = None, False, (
                f"`{squash(str(launch['grid'][d]))}` is one round's: the loop around the launch site changes "
                f"{', '.join(spec.launch.varies['grid'])}")
        elif fixed and len(spec.launch.observed_grids()) > 1:
            bound, fixed, exact_why = None, False, (
                f"`{squash(str(launch['grid'][d]))}` holds for one of the {len(spec.launch.observed_grids())} "
                "different grids the application launched this kernel with (launch.observed)")
        if bound is not None and fixed:
            # a static MEP's literal or macro is its launch site's own spelling (patch refuses it where the sites
            # spell other grids): the kernel's own guard, when it has one, is still the better bound
            guarded = self._guarded_or_none(src, spec, launch, d, refs, barriers, warp, returns)
            if guarded is not None:
                return guarded
        if bound is not None:
            # the loop stops at the original grid itself: no guard to prove; a `return` ends one block's work
            if returns and (barriers or warp):
                raise Refused("the kernel returns early and uses barriers, shared memory or warp intrinsics: a "
                              "thread would meet the next block's barrier")
            for r in returns:
                if any(src.span(l)[0] <= src.span(r)[0] < src.span(l)[1]
                       for l in src.nodes("FOR_STMT", "WHILE_STMT", "DO_STMT", "SWITCH_STMT")):
                    raise Refused("a `return` inside a loop or switch (it would not end the block's work)")
            return {"refs": refs, "d": d, "bound": bound, "barrier": barriers, "returns": returns}
        return self._guarded(src, spec, launch, d, refs, barriers, warp, returns, exact_why)

    def _guarded_or_none(self, src, spec, launch, d: int, refs, barriers: bool, warp: list, returns) -> dict | None:
        """The guarded way where it applies (None where it does not: the fixed bound is used instead)."""
        try:
            return self._guarded(src, spec, launch, d, refs, barriers, warp, returns, "is a fixed number")
        except Refused:
            return None

    def _guarded(self, src, spec, launch, d: int, refs, barriers: bool, warp: list, returns, exact_why: str) -> dict:
        """The guarded way: declarations, then one `if (guard) {...}` whose guard the blocks past the grid fail."""
        if barriers:
            raise Refused(f"the kernel uses shared memory or barriers, and the grid's {exact_why}")
        if warp:
            raise Refused(f"the kernel calls {warp[0]} (a warp-level intrinsic)")
        stmts = body_statements(src.body)
        if not stmts or kind(stmts[-1]) != "IF_STMT" or len(list(stmts[-1].get_children())) != 2:
            raise Refused(f"the grid's {exact_why}, and the kernel is not declarations then one `if (guard) {{...}}`")
        for s in stmts[:-1]:
            if kind(s) != "DECL_STMT":
                raise Refused(f"a statement before the guard: `{squash(src.src(s))[:50]}`")
            check_pure(src, s, "a declaration before the guard")
            if any(kind(c) in ("ARRAY_SUBSCRIPT_EXPR",) or (kind(c) == "UNARY_OPERATOR" and
                                                             src.src(c).lstrip().startswith("*")) for c in walk(s)):
                raise Refused(f"a declaration before the guard reads memory: `{squash(src.src(s))[:50]}`")
        if returns:
            raise Refused("the kernel returns early")
        guard = stmts[-1]
        self._guard(src, spec, launch, d, list(guard.get_children())[0])
        return {"refs": refs, "d": d, "bound": None, "barrier": False, "returns": []}

    def _guard(self, src, spec, launch, d: int, cond) -> None:
        axis = AXES[d]
        env = local_constants(src, src.body, set())
        vals = self._values(src, spec, launch, d)
        grid = spec.size(str(launch["grid"][d]))
        if grid is None:
            raise Refused(f"the grid's {axis} dimension `{launch['grid'][d]}` has no value for the MEP's sizes")
        why = []
        reads_before = None
        for term in _conjuncts(src, cond):
            if reads_before is not None:
                break          # a term after a memory read: the read would run for the blocks past the grid
            if any(kind(c) in ("ARRAY_SUBSCRIPT_EXPR", "CALL_EXPR") or (kind(c) == "UNARY_OPERATOR" and
                                                                         src.src(c).lstrip().startswith("*"))
                   for c in walk(term)):
                reads_before = squash(src.src(term))
                continue
            if kind(term) != "BINARY_OPERATOR" or src.operator(term) not in ("<", "<=", ">", ">="):
                continue
            a, b = list(term.get_children())
            op = src.operator(term)
            if op in (">", ">="):
                a, b, op = b, a, {">": "<", ">=": "<="}[op]
            try:
                p = poly(src, a, env)
            except Refused as e:
                why.append(str(e))
                continue
            bidx = f"blockIdx.{axis}"
            if not any(bidx in m for m in p):
                continue
            try:
                low = self._lowest(src, spec, p, vals, bidx, grid)
                bound = self._bound(src, spec, b, vals)
            except Refused as e:
                why.append(str(e))
                continue
            if low > bound or (op == "<" and low == bound):
                return
            why.append(f"`{squash(src.src(term))}` still holds past the grid ({low} vs {bound})")
        if reads_before is not None:
            why.insert(0, f"`{reads_before[:50]}` reads memory before any bound is checked")
        raise Refused(f"no guard on blockIdx.{axis} that the blocks past the grid fail" +
                      (f" ({'; '.join(why[:2])})" if why else ""))

    def _lowest(self, src, spec, p, vals, bidx: str, grid: int) -> int:
        """L at the first virtual block past the grid with the threads at 0, after checking L grows with the block
        (positive coefficient) and does not shrink with the thread indices."""
        total = 0
        for m, c in p.items():
            if m.count(bidx) > 1:
                raise Refused(f"the index is not linear in {bidx}")
            free = [a for a in m if a != bidx and (a.startswith("threadIdx.") or a.startswith("blockIdx."))]
            rest = c
            for atom in m:
                if atom != bidx and atom not in free:
                    rest *= self._number(src, spec, atom, vals)
            if bidx in m and (free or rest <= 0):
                raise Refused(f"the index does not grow with {bidx} alone")
            if free and rest < 0:
                raise Refused(f"the index shrinks with {free[0]}")
            if not free:
                total += rest * grid if bidx in m else rest
        return total

    def _bound(self, src, spec, b, vals) -> int:
        text = src.expand(src.src(b))
        if re.search(r"\b(threadIdx|blockIdx)\b", text):
            raise Refused(f"the bound `{squash(src.src(b))}` depends on the thread")
        for name, v in vals.items():
            if "." not in name:
                text = re.sub(rf"(?<![\w.]){re.escape(name)}(?![\w.])", f"({v})", text)
        v = spec.size(text)
        if v is None:
            raise Refused(f"the bound `{squash(src.src(b))}` has no value for the MEP's sizes")
        return v

    def space(self, src, spec, launch):
        dims = [a for a in ("y", "x") if AXES.index(a) < len(launch["grid"])]
        why = []
        ok = []
        for a in dims:
            try:
                self._match(src, spec, launch, a)
                ok.append(a)
            except Refused as e:
                why.append(f"{a}: {e}" if len(dims) > 1 else str(e))
        if not ok:
            raise Refused("; ".join(why))
        total = launch_threads(spec, launch) or 0
        factors = [f for f in FACTORS if total // f >= MIN_THREADS]
        if not factors:
            raise Refused(f"the launch has {total} threads: {FACTORS[0]} blocks' work per block would leave fewer than "
                          f"{MIN_THREADS} (half of an H100) to run")
        return {"factor": factors, "dim": ok}

    def first_point(self, src, spec, launch):
        space = self.space(src, spec, launch)
        return {"factor": 4 if 4 in space["factor"] else space["factor"][-1], "dim": space["dim"][0]}

    def apply(self, src, spec, launch, params):
        axis = str(params.get("dim", "y"))
        c = int(params.get("factor", 4))
        m = self._match(src, spec, launch, axis)
        s, e = src.span(src.body)
        body = src.text[s:e]
        edits = [(*src.span(r), "mepgen_b") for r in m["refs"]] + [(*src.span(r), "continue") for r in m["returns"]]
        for a, b, new in sorted(edits, reverse=True):
            body = body[:a - s] + new + body[b - s:]
        stop = f"    if (mepgen_b >= (unsigned int)({m['bound']})) break;     // past the original grid\n" \
            if m["bound"] is not None else ""
        end = "\n    __syncthreads();     // the block's shared memory is reused by the next block's work" \
            if m["barrier"] else ""
        text = src.text[:s] + "{\n    // mepgen coarsen_blocks: " + \
            f"{c} consecutive blocks along {axis} per block\n" + \
            f"    for (unsigned int mepgen_c = 0; mepgen_c < {c}; ++mepgen_c) {{\n" + \
            f"    const unsigned int mepgen_b = blockIdx.{axis} * {c} + mepgen_c;\n" + stop + body[1:-1] + end + \
            "\n    }\n}" + src.text[e:]
        grid = list(launch["grid"])
        grid[m["d"]] = f"(({grid[m['d']]}) + {c} - 1) / {c}"
        return Rewrite(text, f"block coarsening: each block does the work of {c} consecutive blocks along {axis} "
                             f"(blockIdx.{axis} -> blockIdx.{axis} * {c} + c), grid along {axis} divided by {c}",
                       {"grid": grid, "block": list(launch["block"]), "shared_mem": str(launch.get("shared_mem", "0"))})


def _captured(spec) -> bool:
    """Whether the MEP's launch is a capture's: its inputs come from the recorded run (data/captured/), or it is
    what `mepgen capture` writes for a kernel without inputs (no size symbols, one input set)."""
    items = [*spec.params, *spec.constants, *spec.buffers]
    return any(x.init is not None and x.init.kind == "file" and str(x.init.args.get("path", "")).startswith(
        "data/captured/") for x in items) or (not spec.sizes and spec.verify.input_sets == 1)


def _follows_the_launch(src, spec, bound: str) -> bool:
    """Whether a bound over the kernel's values changes with each launch: it names a scalar parameter of the kernel
    (each launch passes its own) or blockDim (each launch sets its own)."""
    names = set(re.findall(r"(?<![\w.])[A-Za-z_]\w*", bound))
    scalars = {p.name for p in spec.params if p.role == "scalar"}
    return bool(names & scalars) or "blockDim" in names
