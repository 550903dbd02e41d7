"""R points per thread along a stencil's outermost axis (y in 2D, z in 3D), unrolled, so that neighbouring points
share their loads in registers.

A one-thread-per-point stencil issues every neighbour read as its own load: smooth9 makes 9 loads per point,
and on Hopper the L1's load throughput, not DRAM, then bounds it (45% of peak bandwidth on an H200,
bench/results/library_optimize_all.md). A shared-memory tile (tile_stencil) moves the 9 reads to shared memory,
which runs through the same pipe. Here each thread computes R consecutive points along the outermost axis in
a fully unrolled loop; where the whole strip is inside the stencil's guard (an interior fast path, checked at
the strip's two ends, which suffices because the guard is a conjunction of bounds on the thread indices), the
loop has no branches and, with `__restrict__` pointers, the compiler loads each value once for all the points
that read it. The fast path makes the sharing explicit where match_stencil proved the read offsets: each
element the strip reads is loaded once into a register at the address of the proven affine form, and the R points
follow as copies of the guarded statement reading those registers (smooth9 at R = 4: 18 loads for 4 points
instead of 36; diffuse7: 22 instead of 28; counted in the PTX by the tests). Reads through a `__device__` helper
stay calls (with `__restrict__`, the compiler merges them with the same addresses). Strips that touch the border
run the original guarded statement per point in an unrolled loop.

Applies to exactly what match_stencil recognises (stencil_match.py), with nothing after the guard, no
`return`, no shared memory or barriers, and the outer axis's thread index used nowhere but its declaration.
`__restrict__` is added to the pointer parameters under the same aliasing rules as restrict_ldg. The grid's
outer dimension is divided by R (rounded up); the guard masks the points past the end, as before.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from .analysis import body_statements, squash
from .base import Rewrite, Transformation
from .restrict import restrict_edits, unrestricted_pointers
from .source import Refused, kind
from .stencil_match import match_stencil

ROWS = [4, 2, 8]
AXES = "xyz"


@dataclass
class _Plan:
    """What apply needs from the analysis: the matched stencil, its outer axis and that axis' thread index (with
    its declaration), the declarations that follow the index per point, the guard's condition and body, and the
    pointers that may take `__restrict__`."""
    st: object
    axis: int
    name: str
    decl: object
    per_point: list
    cond: str
    then: object
    restrict: list


def _mentions(text: str, name: str) -> bool:
    return re.search(rf"(?<![\w.]){re.escape(name)}(?!\w)", text) is not None


def _substitute(text: str, name: str, value: str) -> str:
    return re.sub(rf"(?<![\w.]){re.escape(name)}(?!\w)", lambda _m: value, text)


class StencilRows(Transformation):
    def __init__(self):
        super().__init__("stencil_rows", "R points per thread along the outer axis, loads shared in registers",
                         {"rows": 4})

    def _plan(self, src, spec, launch) -> _Plan:
        st = match_stencil(src, spec)
        a = st.ndim - 1
        axis, name = AXES[a], st.index[a]
        if len(launch["grid"]) < st.ndim:
            raise Refused(f"the launch has {len(launch['grid'])} grid dimension(s) for a {st.ndim}D stencil")
        body = src.src(src.body)
        if "__syncthreads" in body or "__shared__" in body:
            raise Refused("the kernel uses shared memory or barriers: a thread's points cannot run in a loop")
        if re.search(r"\breturn\b", body):
            raise Refused("the kernel returns early: a `return` would end the thread's other points")
        stmts = body_statements(src.body)
        if st.guard not in stmts:
            raise Refused("the stencil's guard is not a statement of the kernel body")
        g = stmts.index(st.guard)
        if stmts[g + 1:]:
            raise Refused("statements follow the stencil's guard")
        children = list(st.guard.get_children())
        if len(children) != 2:
            raise Refused("the guard has an else branch")
        decl = next((d for d in st.index_stmts if _mentions(src.src(d), name)), None)
        if decl is None:
            raise Refused(f"no declaration of the thread index {name}")
        geometry = [f"blockIdx.{axis}", f"threadIdx.{axis}", f"blockDim.{axis}", f"gridDim.{axis}"]
        rest = src.text[src.span(src.body)[0]:src.span(decl)[0]] + src.text[src.span(decl)[1]:src.span(src.body)[1]]
        for gname in geometry:
            if gname in rest:
                raise Refused(f"the kernel uses {gname} beyond {name}'s declaration: its points would move")
        # declarations between the thread indices and the guard: those that depend on the outer index run per point
        per_point, names = [], {name}
        for s in stmts[:g]:
            if s in st.index_stmts:
                continue
            text = src.src(s)
            if any(_mentions(text, n) for n in names):
                if kind(s) != "DECL_STMT":
                    raise Refused(f"`{squash(text)}` depends on {name} and is not a declaration")
                per_point.append(s)
                names |= {c.spelling for c in s.get_children() if kind(c) == "VAR_DECL"}
        cond = src.src(children[0])
        late = [n for n in names - {name} if _mentions(cond, n)]
        if late:
            raise Refused(f"the guard reads {', '.join(sorted(late))}, computed per point from {name}")
        restrict = unrestricted_pointers(src, spec)
        return _Plan(st, a, name, decl, per_point, cond, children[1], restrict)

    def space(self, src, spec, launch):
        self._plan(src, spec, launch)
        return {"rows": ROWS}

    def apply(self, src, spec, launch, params):
        plan = self._plan(src, spec, launch)
        st, a, name, decl, per_point = plan.st, plan.axis, plan.name, plan.decl, plan.per_point
        cond, then, restrict = plan.cond, plan.then, plan.restrict
        rows = int(params.get("rows", self.defaults["rows"]))
        if rows < 2:
            raise Refused(f"rows {rows}: a thread needs at least 2 points to share loads")
        axis = AXES[a]
        d0, d1 = src.span(decl)
        dtext = src.text[d0:d1]
        eq = dtext.find("=")
        if eq < 0:
            raise Refused(f"the declaration of {name} has no initializer")
        ctype = dtext[:eq].rstrip()
        ctype = ctype[:len(ctype) - len(name)].strip() if ctype.endswith(name) else "const int"
        g0, g1 = src.span(st.guard)
        indent = re.match(r"[ \t]*", src.text[src.text.rfind("\n", 0, g0) + 1:g0]).group(0)
        point = [f"{ctype} {name} = mepgen_{axis}0 + mepgen_r;"]
        for s in per_point:
            s0, s1 = src.span(s)
            point.append(src.text[s0:s1] + (";" if not src.text[s0:s1].rstrip().endswith(";") else ""))
        then_text = src.text[slice(*src.span(then))]
        first = _substitute(cond, name, f"(mepgen_{axis}0)")
        last = _substitute(cond, name, f"(mepgen_{axis}0 + {rows - 1})")

        def loop(body: list[str]) -> list[str]:
            return ["#pragma unroll", f"for (int mepgen_r = 0; mepgen_r < {rows}; ++mepgen_r) {{",
                    *[f"    {ln}" for ln in point], *[f"    {ln}" for ln in body], "}"]

        shared = _shared_points(src, st, a, point, then, rows)
        fast = shared[0] if shared is not None else loop(then_text.splitlines())
        lines = [f"// mepgen stencil_rows: {rows} points per thread along {axis}; where the whole strip is inside the "
                 f"guard the points share their loads",
                 f"if (({first}) && ({last})) {{",
                 *[f"    {ln}" for ln in fast],
                 "} else {",
                 *[f"    {ln}" for ln in loop(f"if ({cond}) {then_text}".splitlines())],
                 "}"]
        edits = restrict_edits(src, restrict)
        start = f"(blockIdx.{axis} * blockDim.{axis} + threadIdx.{axis}) * {rows}"
        edits.append((d0, d1 + (1 if src.text[d1:d1 + 1] == ";" else 0), f"const int mepgen_{axis}0 = {start};"))
        for s in per_point:
            s0, s1 = src.span(s)
            edits.append((s0, s1 + (1 if src.text[s1:s1 + 1] == ";" else 0), ""))
        edits.append((g0, g1, ("\n" + indent).join(lines)))
        text = src.replace(sorted(edits))
        grid = list(launch["grid"])
        grid[a] = f"(({grid[a]}) + {rows - 1}) / {rows}"
        what = f"; __restrict__ on {', '.join(p.name for p in restrict)}" if restrict else ""
        how = (f"each element of `{st.array}` the strip reads is loaded once into a register ({shared[1]} loads "
               f"for {rows} points, {shared[2]} reads per point in the source)"
               if shared is not None else f"the compiler shares the points' loads of `{st.array}`")
        return Rewrite(text, f"stencil_rows: {rows} points per thread along {axis}; in strips inside the guard {how}"
                             f"{what}; grid.{axis} divided by {rows}",
                       {"grid": grid, "block": list(launch["block"]), "shared_mem": str(launch.get("shared_mem", "0"))})


def _num(v: int) -> str:
    return f"m{-v}" if v < 0 else str(v)


def _shared_points(src, st, a: int, point: list[str], then, rows: int) -> tuple[list[str], int, int] | None:
    """The fast path with its loads shared explicitly: every direct read of the array inside the guard (offsets
    proven by match_stencil) becomes a register loaded once per strip at the address the proven affine form gives,
    `(i + dx) + (j + dy) * S [+ (k + dz) * P]` with the outer index at the strip's row; the points follow as R
    copies of the guarded statement. Returns (lines, loads, reads per point); None when the guard's statement has
    no direct read (only helper calls)."""
    t0, t1 = src.span(then)
    direct = [rd for rd in st.reads if rd.offset is not None
              and t0 <= src.span(rd.cursor)[0] and src.span(rd.cursor)[1] <= t1]
    if not direct:
        return None
    axis = AXES[a]
    strides = ["1", *st.strides]
    ctype = re.sub(r"^\s*const\s+", "", st.ctype)

    def var(q: int, off: tuple) -> str:
        rest = [_num(off[d]) for d in range(st.ndim) if d != a]
        return f"mepgen_s_{_num(q)}_" + "_".join(rest)

    def address(q: int, off: tuple) -> str:
        terms = []
        for d in range(st.ndim):
            if d == a:
                base = f"mepgen_{axis}0 + {q}" if q > 0 else (f"mepgen_{axis}0 - {-q}" if q < 0 else f"mepgen_{axis}0")
            else:
                base = st.index[d] + (f" + {off[d]}" if off[d] > 0 else f" - {-off[d]}" if off[d] < 0 else "")
            terms.append(f"({base})" if d == 0 else f"({base}) * ({strides[d]})")
        return " + ".join(terms)

    loads = {}
    for p in range(rows):
        for rd in direct:
            q = p + rd.offset[a]
            loads.setdefault(var(q, rd.offset), address(q, rd.offset))
    lines = [f"// {len(loads)} loads shared by {rows} points ({len(direct)} reads per point in the source)"]
    lines += [f"const {ctype} {v} = {st.array}[{addr}];" for v, addr in sorted(loads.items())]
    text = src.text[t0:t1]
    for p in range(rows):
        body = text
        for rd in sorted(direct, key=lambda r: src.span(r.cursor)[0], reverse=True):
            s0, s1 = (x - t0 for x in src.span(rd.cursor))
            body = body[:s0] + var(p + rd.offset[a], rd.offset) + body[s1:]
        first = point[0].replace("mepgen_r", str(p))
        lines += ["{", f"    {first}", *[f"    {ln}" for ln in point[1:]], *[f"    {ln}" for ln in body.splitlines()], "}"]
    return lines, len(loads), len(direct)
