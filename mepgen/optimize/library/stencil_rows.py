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

With `vec=4` (the default; `vec` absent in a recorded chain replays as 1) each thread's points are R rows of 4
consecutive x: a row's x0..x0+3 are one 128-bit load, its x0-1 and x0+4 scalars, so the load instructions per
point fall again (smooth9 at 4 x 4: 6 vector + 12 scalar loads for 16 points). Where the guard's statement is
the kernel's only use of an output array, `out[E] = value;` with E proven at the reads' strides, a row's four
values are stored 16 bytes at a time at the proven address (scalar stores four apart made the first version
slower than rows alone: bench/results/library_optimize_vector_2026-11-23.md). The fast path needs the guard's
bounds on the other axes over the whole strip, one of the four columns inside x's bounds, the first row's
address 16-byte aligned and every stride a multiple of 4 elements, all tested at run time; columns outside x's
bounds are masked inside it (their scalars not loaded, their points not run, their stores not made). A 3D
domain 256 wide has one border thread in each of a row's two warps: sent to a per-point path, it made every
warp run both (diffuse7 65% of peak at 4 x 4); masked, diffuse7 runs at 72% at 2 x 4, as the best hand-written
march (bench/results/stencil_rows_x_edges_2026-11-23.md, window_stencil_variants.md).

Applies to exactly what match_stencil recognises (stencil_match.py), with nothing after the guard, no
`return`, no shared memory or barriers, and the outer axis's thread index used nowhere but its declaration.
`__restrict__` is added to the pointer parameters under the same aliasing rules as restrict_ldg. The grid's
outer dimension is divided by R (rounded up); the guard masks the points past the end, as before.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from .analysis import array_stores, body_statements, only_use, squash
from .base import Rewrite, Transformation
from .restrict import restrict_edits, unrestricted_pointers
from .source import Refused, kind, walk
from .affine import local_constants, poly, text
from .stencil_match import decompose, match_stencil

ROWS = [2, 4, 8]
VEC = [4, 1]
AXES = "xyz"
VECTOR = {"float": "float4", "int": "int4", "unsigned int": "uint4"}   # 4-byte elements, 4 per 128-bit read


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
    xdecl: object = None            # with vec > 1: the declaration of the x thread index


def _mentions(text: str, name: str) -> bool:
    return re.search(rf"(?<![\w.]){re.escape(name)}(?!\w)", text) is not None


def _substitute(text: str, name: str, value: str) -> str:
    return re.sub(rf"(?<![\w.]){re.escape(name)}(?!\w)", lambda _m: value, text)


class StencilRows(Transformation):
    def __init__(self):
        super().__init__("stencil_rows", "R points per thread along the outer axis, loads shared in registers",
                         {"rows": 2, "vec": 4})

    def _plan(self, src, spec, launch, vec: int = 1) -> _Plan:
        st = match_stencil(src, spec)
        if st.conditional:
            raise Refused(f"{st.conditional} read(s) of {st.array} run only under a condition: a strip's shared "
                          f"loads would read them unconditionally, beyond the array's edge")
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
        _only_in_declaration(src, axis, name, decl)
        xdecl, names = None, {name}
        if vec > 1:
            xname = st.index[0]
            xdecl = next((d for d in st.index_stmts if _mentions(src.src(d), xname)), None)
            if xdecl is None:
                raise Refused(f"no declaration of the thread index {xname}")
            _only_in_declaration(src, "x", xname, xdecl)
            if re.sub(r"^\s*const\s+", "", st.ctype).strip() not in VECTOR:
                raise Refused(f"{st.array} holds {st.ctype}: 128-bit loads need 4-byte elements")
            names.add(xname)
        # declarations between the thread indices and the guard: those that depend on a point's indices run per point
        per_point = []
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
        late = [n for n in names - {name, st.index[0]} if _mentions(cond, n)]
        if late:
            raise Refused(f"the guard reads {', '.join(sorted(late))}, computed per point from {name}")
        if vec > 1 and not _direct_reads(src, st, children[1]):
            raise Refused(f"{st.array} is read only through helpers: nothing to load 128 bits at a time")
        if vec > 1:      # a helper's reads stay scalar beside the 128-bit rows: the compiler no longer shares them
            helper = next((c for c in walk(children[1]) if kind(c) == "CALL_EXPR" and
                           any(st.array in src.refs(a) for a in c.get_arguments())), None)
            if helper is not None:
                raise Refused(f"{st.array} is also read inside {helper.spelling}(): those loads cannot share the "
                              f"128-bit rows (heat::diffuse_step's lap5 measured 41% of peak at vec 4, 57% at 1)")
        restrict = unrestricted_pointers(src, spec)
        return _Plan(st, a, name, decl, per_point, cond, children[1], restrict, xdecl)

    def space(self, src, spec, launch):
        self._plan(src, spec, launch)
        try:
            self._plan(src, spec, launch, 4)
            return {"rows": ROWS, "vec": VEC}
        except Refused:
            return {"rows": ROWS, "vec": [1]}

    def apply(self, src, spec, launch, params):
        rows = int(params.get("rows", self.defaults["rows"]))
        vec = int(params.get("vec", 1))          # a chain recorded before `vec` replays as it was measured
        if rows < 2:
            raise Refused(f"rows {rows}: a thread needs at least 2 points to share loads")
        if vec not in (1, 4):
            raise Refused(f"vec {vec}: a thread takes 1 or 4 consecutive points along x")
        plan = self._plan(src, spec, launch, vec)
        st, a, name, decl, per_point = plan.st, plan.axis, plan.name, plan.decl, plan.per_point
        cond, then, restrict = plan.cond, plan.then, plan.restrict
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
        xname = st.index[0]
        if vec > 1:
            point.append(f"{_declared_type(src, plan.xdecl, xname)} {xname} = mepgen_x0 + mepgen_c;")
        for s in per_point:
            s0, s1 = src.span(s)
            point.append(src.text[s0:s1] + (";" if not src.text[s0:s1].rstrip().endswith(";") else ""))
        then_text = src.text[slice(*src.span(then))]
        corners = [_substitute(cond, name, f"(mepgen_{axis}0)"),
                   _substitute(cond, name, f"(mepgen_{axis}0 + {rows - 1})")]

        def loop(body: list[str]) -> list[str]:
            head = ["#pragma unroll", f"for (int mepgen_r = 0; mepgen_r < {rows}; ++mepgen_r) {{"]
            if vec > 1:
                head += ["#pragma unroll", f"for (int mepgen_c = 0; mepgen_c < {vec}; ++mepgen_c) {{"]
            return [*head, *[f"    {ln}" for ln in point], *[f"    {ln}" for ln in body],
                    *(["}"] if vec > 1 else []), "}"]

        # with vec = 4 every point's own guard: the loads and stores go under the guards of the points using them
        shared = _shared_points(src, st, a, point, then, rows, vec, x_edges=vec > 1)
        fast = shared[0] if shared is not None else loop(then_text.splitlines())
        shape = f"{rows} x {vec} points per thread ({vec} consecutive along x)" if vec > 1 else \
            f"{rows} points per thread along {axis}"
        if vec > 1:      # x's borders inside the fast path: else each row's border thread sends its warp down both
            corners = [_bound(st, a, f"mepgen_{axis}0"), _bound(st, a, f"mepgen_{axis}0 + {rows - 1}"),
                       *[_bound(st, d, st.index[d]) for d in range(1, st.ndim) if d != a],
                       f"(mepgen_x0 + {vec - 1}) >= {st.lo[0]} && (mepgen_x0) < ({st.hi[0]})", *shared[3]]
            head = f"// mepgen stencil_rows: {shape}; where the strip is inside the guard but for x's bounds and " \
                   f"16-byte aligned the points share their loads, the columns outside x's bounds masked"
        else:
            head = f"// mepgen stencil_rows: {shape}; where the whole strip is inside the guard the points share " \
                   f"their loads"
        lines = [head,
                 f"if ({' && '.join(f'({c})' for c in corners)}) {{",
                 *[f"    {ln}" for ln in fast],
                 "} else {",
                 *[f"    {ln}" for ln in loop(f"if ({cond}) {then_text}".splitlines())],
                 "}"]
        edits = restrict_edits(src, restrict)
        org = st.origin or [0] * st.ndim       # an index spelled `global + c` keeps its c
        start = f"(blockIdx.{axis} * blockDim.{axis} + threadIdx.{axis}) * {rows}" + (f" + {org[a]}" if org[a] else "")
        edits.append((d0, d1 + (1 if src.text[d1:d1 + 1] == ";" else 0), f"const int mepgen_{axis}0 = {start};"))
        if vec > 1:
            x0, x1 = src.span(plan.xdecl)
            edits.append((x0, x1 + (1 if src.text[x1:x1 + 1] == ";" else 0),
                          f"const int mepgen_x0 = (blockIdx.x * blockDim.x + threadIdx.x) * {vec}"
                          + (f" + {org[0]};" if org[0] else ";")))
        for s in per_point:
            s0, s1 = src.span(s)
            edits.append((s0, s1 + (1 if src.text[s1:s1 + 1] == ";" else 0), ""))
        edits.append((g0, g1, ("\n" + indent).join(lines)))
        text = src.replace(sorted(edits))
        grid = list(launch["grid"])
        grid[a] = f"(({grid[a]}) + {rows - 1}) / {rows}"
        if vec > 1:
            grid[0] = f"(({grid[0]}) + {vec - 1}) / {vec}"
        what = f"; __restrict__ on {', '.join(p.name for p in restrict)}" if restrict else ""
        how = (f"each element of `{st.array}` the strip reads is loaded once into a register ({shared[1]} loads "
               f"for {rows * vec} points, {shared[2]} reads per point in the source"
               + (", rows of 4 as 128-bit loads where the addresses are 16-byte aligned"
                  + ("; the 4 points of a row stored 16 bytes at a time" if shared[4] else "") + ")" if vec > 1 else ")")
               if shared is not None else f"the compiler shares the points' loads of `{st.array}`")
        grids = f"grid.{axis} divided by {rows}" + (f", grid.x by {vec}" if vec > 1 else "")
        return Rewrite(text, f"stencil_rows: {shape}; in strips inside the guard {how}{what}; {grids}",
                       {"grid": grid, "block": list(launch["block"]), "shared_mem": str(launch.get("shared_mem", "0"))})


def _num(v: int) -> str:
    return f"m{-v}" if v < 0 else str(v)


def _only_in_declaration(src, axis: str, name: str, decl) -> None:
    """Refused when the kernel uses axis's geometry (blockIdx, threadIdx, blockDim, gridDim) beyond the
    declaration of its thread index: the thread's points would move."""
    rest = src.text[src.span(src.body)[0]:src.span(decl)[0]] + src.text[src.span(decl)[1]:src.span(src.body)[1]]
    for gname in (f"blockIdx.{axis}", f"threadIdx.{axis}", f"blockDim.{axis}", f"gridDim.{axis}"):
        if gname in rest:
            raise Refused(f"the kernel uses {gname} beyond {name}'s declaration: its points would move")


def _bound(st, d: int, at: str) -> str:
    """The guard's two bounds on axis d (match_stencil proved the guard their conjunction) at the coordinate `at`."""
    return f"({at}) >= {st.lo[d]} && ({at}) < ({st.hi[d]})"


def _declared_type(src, decl, name: str) -> str:
    text = src.src(decl)
    eq = text.find("=")
    head = text[:eq].rstrip() if eq >= 0 else ""
    return head[:len(head) - len(name)].strip() if head.endswith(name) and head[:-len(name)].strip() else "const int"


def _direct_reads(src, st, then) -> list:
    """The reads of the array inside the guard's statement whose offsets match_stencil proved."""
    t0, t1 = src.span(then)
    return [rd for rd in st.reads if rd.offset is not None
            and t0 <= src.span(rd.cursor)[0] and src.span(rd.cursor)[1] <= t1]


def _shared_points(src, st, a: int, point: list[str], then, rows: int, vec: int = 1, x_edges: bool = False):
    """The fast path with its loads shared explicitly: every direct read of the array inside the guard (offsets
    proven by match_stencil) becomes a register loaded once per strip at the address the proven affine form gives,
    `(i + dx) + (j + dy) * S [+ (k + dz) * P]` with the outer index at the strip's row; the points follow as R
    copies of the guarded statement. With vec = 4 the thread's points are R rows of 4 consecutive x, `i` is
    `mepgen_x0 + c`, and a row whose four elements x0..x0+3 are all read is one 128-bit load (the elements
    around it stay scalar). With `x_edges` the lines also serve the strips at x's borders: the caller's test has
    the guard's bounds on every other axis hold for the whole strip and at least one of the four columns inside
    x's bounds, so each column is inside or outside as a whole (the guard is a conjunction of a lower and an
    upper bound per axis, match_stencil proved). A column's points run their statement only if it is inside;
    a scalar the inside columns do not read is not loaded; a row's 16 bytes are loaded whole (aligned, in a
    row the inside columns read: rows are whole multiples of 4 elements, tested), and stored whole only when
    all four columns are inside, else column by column. No warp then runs a second, per-point path for the
    one thread at x's border that each row of a narrow domain has. Returns (lines, loads, reads per point, alignment conditions the fast
    path needs, whether stores are vectorized); None when the guard's statement has no direct read (only helper
    calls)."""
    direct = _direct_reads(src, st, then)
    if not direct:
        return None
    t0, t1 = src.span(then)
    store = _single_store(src, st, then, direct) if vec > 1 else None
    axis = AXES[a]
    strides = ["1", *st.strides]
    ctype = re.sub(r"^\s*const\s+", "", st.ctype)

    def var(q: int, off: tuple, c: int = 0) -> str:
        rest = [_num(off[d] + (c if d == 0 else 0)) for d in range(st.ndim) if d != a]
        return f"mepgen_s_{_num(q)}_" + "_".join(rest)

    def shift(base: str, v: int) -> str:
        return base + (f" + {v}" if v > 0 else f" - {-v}" if v < 0 else "")

    def address(q: int, off: tuple, c: int = 0) -> str:
        terms = []
        for d in range(st.ndim):
            if d == a:
                base = shift(f"mepgen_{axis}0", q)
            elif d == 0 and vec > 1:
                base = shift("mepgen_x0", off[0] + c)
            else:
                base = shift(st.index[d], off[d])
            terms.append(f"({base})" if d == 0 else f"({base}) * ({strides[d]})")
        return " + ".join(terms)

    loads, rows_of = {}, {}            # var -> address; (q, other offsets) -> {x position: var}
    readers = {}                       # var -> the points (row, column) that read it
    for p in range(rows):
        for c in range(vec):
            for rd in direct:
                q, off = p + rd.offset[a], rd.offset
                v = var(q, off, c)
                loads.setdefault(v, address(q, off, c))
                if (p, c) not in readers.setdefault(v, []):
                    readers[v].append((p, c))
                row = (q, tuple(off[d] for d in range(st.ndim) if d not in (0, a)))
                rows_of.setdefault(row, {})[off[0] + c] = v
    def inside(cols) -> str:            # some of these columns is inside x's bounds
        return " || ".join(f"mepgen_in_x{c}" for c in sorted(cols))

    def scalar(v: str) -> str:
        load, cols = f"{st.array}[{loads[v]}]", {c for _p, c in readers[v]}
        return f"({inside(cols)}) ? {load} : ({ctype})0" if x_edges and len(cols) < vec else load

    lines, vectors, scalars = [], [], dict(loads)
    if vec > 1:
        lanes, vt = "xyzw", VECTOR[ctype]
        for (q, rest), xs in sorted(rows_of.items()):
            if not all(x in xs for x in range(4)):
                continue
            vname = f"mepgen_v_{_num(q)}" + "".join(f"_{_num(o)}" for o in rest)
            vectors.append(vname)
            load = f"*reinterpret_cast<const {vt}*>(&{st.array}[{loads[xs[0]]}])"
            lines.append(f"const {vt} {vname} = {load};")
            for x in range(4):
                lines.append(f"const {ctype} {xs[x]} = {vname}.{lanes[x]};")
                scalars.pop(xs[x])
    count = len(vectors) + len(scalars)
    head = [f"// {count} loads shared by {rows * vec} points ({len(direct)} reads per point in the source)"]
    if x_edges:
        head += [f"const bool mepgen_in_x{c} = {_bound(st, 0, shift('mepgen_x0', c))};" for c in range(vec)]
    lines = head + [f"const {ctype} {v} = {scalar(v)};" for v in sorted(scalars)] + lines
    aligned = []
    if vectors:      # every vector row is the first one moved by whole strides: the first and the strides aligned
        aligned = [f"(reinterpret_cast<unsigned long long>(&{st.array}[{address(0, (0,) * st.ndim)}]) & 15) == 0"]
        aligned += [f"({strides[d]}) % 4 == 0" for d in range(1, st.ndim)]
    text = src.text[t0:t1]
    if store is not None:
        out, etype, soff = store[1], store[2], store[3]
        lines += [f"{etype} mepgen_o_{p}_{c} = 0;" for p in range(rows) for c in range(vec)]
        aligned.append(f"(reinterpret_cast<unsigned long long>(&{out}[{address(soff[a], soff)}]) & 15) == 0")
    for p in range(rows):
        for c in range(vec):
            edits = [(*src.span(rd.cursor), var(p + rd.offset[a], rd.offset, c)) for rd in direct]
            if store is not None:       # the value to a register: stored 16 bytes per row below
                edits.append((*src.span(store[0]), f"mepgen_o_{p}_{c}"))
            body = text
            for s0, s1, new in sorted(edits, key=lambda e: (e[0], e[1]), reverse=True):
                body = body[:s0 - t0] + new + body[s1 - t0:]
            decls = [ln.replace("mepgen_r", str(p)).replace("mepgen_c", str(c)) for ln in point[:2 if vec > 1 else 1]]
            rest_decls = point[2 if vec > 1 else 1:]
            lines += [f"if (mepgen_in_x{c}) {{" if x_edges else "{", *[f"    {ln}" for ln in decls],
                      *[f"    {ln}" for ln in rest_decls], *[f"    {ln}" for ln in body.splitlines()], "}"]
    if store is not None:               # each row's four values, 16 bytes at a time (after all rows: fewer registers)
        vt = VECTOR[etype]
        for p in range(rows):
            os_ = ", ".join(f"mepgen_o_{p}_{c}" for c in range(vec))
            vstore = f"*reinterpret_cast<{vt}*>(&{out}[{address(p + soff[a], soff)}]) = make_{vt}({os_});"
            if not x_edges:
                lines.append(vstore)
                continue
            lines += [f"if ({' && '.join(f'mepgen_in_x{c}' for c in range(vec))}) {{", f"    {vstore}", "} else {",
                      *[f"    if (mepgen_in_x{c}) {out}[{address(p + soff[a], soff, c)}] = mepgen_o_{p}_{c};"
                        for c in range(vec)], "}"]
    return lines, count, len(direct), aligned, store is not None


def _single_store(src, st, then, direct):
    """(its `out[...]` target, out, element type, offsets) when the guard's statement holds, as a statement of its
    own, the kernel's only use of an output array, `out[E] = value;` with 4-byte elements, E proven
    `(i + dx) + (j + dy) * S [+ (k + dz) * P]` with the reads' strides. Each point then stores once and nothing
    reads `out`, so a row's four points may store after all are computed, 16 bytes at a time at the proven
    address (the fast path tests that address's alignment). None otherwise."""
    found = [f for f in array_stores(src, then) if f[1] != st.array]
    if len(found) != 1 or found[0][2] not in VECTOR or not only_use(src, found[0][1]):
        return None
    lhs, name, etype = found[0]
    l0, l1 = src.span(lhs)
    if any(l0 <= src.span(rd.cursor)[0] < l1 for rd in direct):
        return None
    try:
        env = local_constants(src, src.body, set(st.index))
        off, strides = decompose(poly(src, list(lhs.get_children())[1], env), st.index, "the store")
    except (Refused, ValueError):
        return None
    if [text({m: 1}) for m in strides] != list(st.strides):
        return None
    return lhs, name, etype, off
