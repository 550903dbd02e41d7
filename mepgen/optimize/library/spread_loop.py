"""Each iteration of a thread's loop in a thread of its own, where the iterations are proven independent.

A kernel that gives each thread a row, a layer or a plane and walks it with a loop runs few threads, and its
neighbouring threads touch addresses a whole row (or more) apart. When no iteration of any thread touches an
element another iteration writes, the iterations may run in any order, so each gets a thread: the loop's counter
becomes the x index (neighbouring threads take neighbouring iterations: the accesses unit-stride in the counter
become coalesced) and the old thread index moves to y:

    t = blockIdx.x * blockDim.x + threadIdx.x;          t = blockIdx.y * blockDim.y + threadIdx.y;
    if (t < B) {                                        if (t < B) {
        int first = ..t..;                                  int first = ..t..;
        for (int i = LO; i < HI; ++i) BODY          ->      { int i = (LO) + (int)(blockIdx.x * blockDim.x + threadIdx.x);
    }                                                         if (i < HI) BODY }
                                                        }

The proof works on the access model: every subscript of a pointer parameter in the loop is read as
`row * W + col` (W: one width per array, the stride the kernel writes) with row and col linear in the thread index,
the counter and the kernel's parameters (locals seen through), and for every pair of accesses of which one writes,
Fourier-Motzkin elimination (dependence.py) shows that no two different iterations (t, i) != (t', i') inside the
guard's and the loop's bounds reach the same (row, col); that `0 <= col < W` holds for every access is proven the
same way (so equal flat indices mean equal rows and columns). In-place updates whose iterations permute disjoint
sets of elements (a matrix rotated by layers, a 4-cycle per iteration) pass; a loop that reads what an earlier
iteration wrote (a prefix sum along a row) or carries a local from one iteration to the next (a sum) does not.

Applies to `t = global index; if (t < B) { declarations; for (...) BODY }` on a 1D launch with step-1 loops whose
trip count `HI - LO` does not grow with t (the x grid covers its value at t = 0); the y grid keeps the original's
threads exactly (B's threads in blocks of `by` that divide the original block).
"""
from __future__ import annotations

from itertools import product

from .affine import local_constants, param_sizes, poly, text_poly
from .analysis import pure_call, body_statements, canonical_loop, guarded_thread, size_expr, \
    squash, strip
from .base import Rewrite, Transformation, block_threads
from .dependence import combine, feasible, linear, rename
from .restrict import unrestricted_pointers
from .source import Refused, kind, walk
from ...cexpr import split_top_level

GRID_Y_MAX = 65535


class SpreadLoop(Transformation):
    def __init__(self):
        super().__init__("spread_loop", "each independent iteration of a thread's loop in a thread of its own",
                         {"bx": 128, "by": 2})

    # --- the kernel's shape --------------------------------------------------------------------------

    def _match(self, src, spec, launch):
        if len(launch["grid"]) != 1 or len(launch["block"]) != 1:
            raise Refused("the launch is not 1D")
        g = guarded_thread(src, "thread", "every thread must reach its guard")
        stmts = body_statements(g.then)
        loops = [s for s in stmts if kind(s) == "FOR_STMT"]
        if len(loops) != 1 or stmts[-1] is not loops[0] and src.span(stmts[-1]) != src.span(loops[0]):
            raise Refused("the guarded block is not declarations followed by one loop")
        loop = canonical_loop(src, loops[0])
        if squash(loop.step) != "1":
            raise Refused(f"the loop over {loop.var} does not step by 1")
        for s in stmts[:-1]:
            if kind(s) != "DECL_STMT" or any(kind(c) in ("ARRAY_SUBSCRIPT_EXPR", "CALL_EXPR") or
                                             kind(c) == "UNARY_OPERATOR" and squash(src.src(c)).startswith("*")
                                             for c in walk(s)):
                raise Refused(f"`{squash(src.src(s))[:50]}` before the loop is not a declaration free of memory "
                              "accesses and calls (each iteration's thread would repeat it)")
        self._no_carried_locals(src, loop)
        for c in walk(loop.body):
            if kind(c) == "CALL_EXPR" and not pure_call(src, c):
                raise Refused(f"the loop calls `{c.spelling}`, which may have side effects")
            if kind(c) in ("RETURN_STMT", "BREAK_STMT", "CONTINUE_STMT", "GOTO_STMT"):
                raise Refused("the loop leaves an iteration early (return, break, continue or goto)")
        unrestricted_pointers(src, spec)          # distinct buffers: only accesses of one array can meet
        return g, loop

    def _no_carried_locals(self, src, loop) -> None:
        """No iteration hands a value to the next through a variable: every variable the loop assigns is declared
        inside its body (a fresh one per iteration)."""
        b0, b1 = src.span(loop.body)
        for w in src.writes(loop.body):
            kids = list(w.get_children())
            target = strip(kids[0]) if kids else None
            if target is not None and kind(target) == "ARRAY_SUBSCRIPT_EXPR":
                continue
            decl = target.referenced if target is not None and kind(target) == "DECL_REF_EXPR" else None
            if decl is None or not b0 <= decl.extent.start.offset < b1:
                raise Refused(f"`{squash(src.src(w))[:50]}` carries a value from one iteration of the loop over "
                              f"{loop.var} to the next")

    # --- the proof ------------------------------------------------------------------------------------

    def _linear(self, src, p: dict, what: str, allowed: set[str]) -> dict:
        form = linear(p)
        if form is None:
            raise Refused(f"{what} multiplies two variables: not linear")
        for name in form:
            if name and name not in allowed:
                raise Refused(f"{what} depends on `{name}`, which is neither the thread index, the loop counter "
                              "nor a value the same for every thread")
        return form

    def _domain(self, src, g, loop, env, allowed) -> list[dict]:
        """The constraints (`form <= 0`) of one iteration (t, i): 0 <= t < B and LO <= i < HI."""
        t, i = g.var, loop.var
        parts = split_top_level(squash(g.bound), "/")
        if len(parts) == 2 and parts[1].isdigit() and int(parts[1]) > 0:     # t < X / c  =>  c t + c - X <= 0
            c = int(parts[1])
            x = self._linear(src, text_poly(src, src.expand(parts[0]), env), f"the guard `{g.bound}`", allowed)
            upper = combine((c, {t: 1}), (1, {"": c}), (-1, x))
        elif len(parts) == 1:
            b = self._linear(src, text_poly(src, src.expand(g.bound), env), f"the guard `{g.bound}`", allowed)
            upper = combine((1, {t: 1, "": 1}), (-1, b))
        else:
            raise Refused(f"the guard `{squash(g.bound)}` is not linear")
        lo = self._linear(src, text_poly(src, src.expand(loop.lo), env), f"the loop's start `{loop.lo}`", allowed)
        hi = self._linear(src, text_poly(src, src.expand(loop.hi), env), f"the loop's bound `{loop.hi}`", allowed)
        return [{t: -1}, upper, combine((-1, {i: 1}), (1, lo)), combine((1, {i: 1, "": 1}), (-1, hi))]

    def _split(self, src, index, env, allowed, width_names) -> tuple[str | None, dict, dict]:
        """`index` as (W, row, col) with index = row * W + col, W an identifier the kernel multiplies by (a
        parameter or a size), row and col linear; (None, {}, index) when no term has such a factor."""
        terms = []

        def flatten(c, sign):
            c = strip(c)
            if kind(c) == "BINARY_OPERATOR" and src.operator(c) in ("+", "-"):
                a, b = list(c.get_children())
                flatten(a, sign)
                flatten(b, sign if src.operator(c) == "+" else -sign)
            else:
                terms.append((sign, c))
        flatten(index, 1)
        row, col, width = {}, {}, None
        for sign, c in terms:
            factors = list(c.get_children()) if kind(c) == "BINARY_OPERATOR" and src.operator(c) == "*" else []
            names = [squash(src.expand(src.src(f))) for f in factors]
            w = next((n for n in names if n in width_names), None)
            if w is not None and (width is None or w == width):
                width = w
                other = factors[1 - names.index(w)]
                row = combine((1, row), (sign, self._linear(src, poly(src, other, env), "a row index", allowed)))
            else:
                col = combine((1, col), (sign, self._linear(src, poly(src, c, env), "an index", allowed)))
        return width, row, col

    def _prove(self, src, spec, g, loop) -> int:
        """The number of access pairs shown never to meet in two different iterations; Refused where one may."""
        env = local_constants(src, src.body, keep={g.var, loop.var})
        for w in src.writes():
            kids = list(w.get_children())
            target = strip(kids[0]) if kids else None
            if target is not None and kind(target) == "DECL_REF_EXPR" and target.spelling in src.invariants():
                raise Refused(f"the kernel assigns its parameter {target.spelling}")
        uniform = src.invariants() | set(spec.sizes)
        allowed = uniform | {g.var, loop.var}
        widths = {n for n in uniform if not (src.param(n) and src.param(n).pointer)}
        dom = self._domain(src, g, loop, env, allowed)
        for a, v in param_sizes(spec).items():     # nc = NC where the launch passes NC: a bound and a row width
            if a in allowed:
                dom += [combine((1, {a: 1}), (-1, {v: 1})), combine((1, {v: 1}), (-1, {a: 1}))]
        pointers = {p.name for p in src.params if p.pointer}
        writes = {src.span(strip(list(w.get_children())[0])) for w in src.writes(loop.body) if list(w.get_children())}
        accesses: dict[str, list] = {}
        for c in walk(loop.body):
            if kind(c) != "ARRAY_SUBSCRIPT_EXPR":
                continue
            base, index = list(c.get_children())
            name = squash(src.src(base))
            if name not in pointers:
                raise Refused(f"`{squash(src.src(c))[:40]}` is not an element of a pointer parameter")
            accesses.setdefault(name, []).append((self._split(src, index, env, allowed, widths),
                                                  src.span(c) in writes))
        subscripted = sum(len(v) for v in accesses.values())
        uses = sum(1 for c in walk(loop.body) if kind(c) == "DECL_REF_EXPR" and c.spelling in pointers)
        if uses != subscripted:
            raise Refused("the loop uses a pointer parameter other than by subscript (pointer arithmetic or a call)")
        if not any(w for acc in accesses.values() for _, w in acc):
            raise Refused(f"the loop over {loop.var} writes no memory")
        t, i = g.var, loop.var
        other = {t: t + "'", i: i + "'"}
        dom2 = [rename(f, other) for f in dom]
        pairs = 0
        for name, acc in accesses.items():
            widths_used = {w for (w, _, _), _ in acc if w is not None}
            if len(widths_used) > 1:
                raise Refused(f"{name} is indexed with two row widths ({', '.join(sorted(widths_used))})")
            width = next(iter(widths_used), None)
            for (w, row, col), _ in acc:
                if width is not None:      # 0 <= col < W: equal flat indices are equal (row, col)
                    if w is None:
                        raise Refused(f"{name} is indexed both by rows of {width} and flat")
                    if feasible(dom + [combine((1, col), (1, {"": 1}))]) or \
                            feasible(dom + [combine((1, {width: 1}), (-1, col))]):
                        raise Refused(f"a column index of {name} may leave [0, {width}): rows cannot be told apart")
            for (a, wa), (b, wb) in product(acc, acc):
                if not (wa or wb):
                    continue
                same = [combine((1, a[1]), (-1, rename(b[1], other))), combine((1, a[2]), (-1, rename(b[2], other)))]
                for v in (t, i):          # two different iterations: t < t' or t > t' or i < i' or i > i'
                    for s in (1, -1):
                        if feasible(dom + dom2 + [combine((s, {v: 1}), (-s, {other[v]: 1}), (1, {"": 1}))], same):
                            raise Refused(f"two iterations may touch the same element of {name} (one writes it): "
                                          "the iterations are not proven independent")
                pairs += 1
        return pairs

    def _trip(self, src, spec, g, loop) -> str:
        """The loop's largest trip count over the threads, as an expression over the MEP's sizes."""
        env = local_constants(src, src.body, keep={g.var, loop.var})
        uniform = src.invariants() | set(spec.sizes)
        allowed = uniform | {g.var}
        lo = self._linear(src, text_poly(src, src.expand(loop.lo), env), "the loop's start", allowed)
        hi = self._linear(src, text_poly(src, src.expand(loop.hi), env), "the loop's bound", allowed)
        trip = combine((1, hi), (-1, lo))
        if trip.get(g.var, 0) > 0:
            raise Refused(f"the loop's trip count grows with {g.var}: no x extent known before the launch")
        out = ""
        for n, v in sorted(trip.items(), key=lambda kv: kv[0] == ""):    # the constant last: `(N) - 1`
            if n == g.var:
                continue
            if v.denominator != 1:
                raise Refused(f"the loop's trip count has a fractional coefficient on `{n}`")
            value = size_expr(src, spec, n) if n else None
            if n and value is None:
                raise Refused(f"the loop's trip count uses `{n}`, which has no value for the MEP's sizes")
            k = int(v)
            term = str(abs(k)) if not n else f"({value})" if abs(k) == 1 else f"{abs(k)} * ({value})"
            out = (f"{out} {'-' if k < 0 else '+'} " if out else "-" if k < 0 else "") + term
        return out or "0"

    # --- the transformation ---------------------------------------------------------------------------

    def space(self, src, spec, launch):
        g, loop = self._match(src, spec, launch)
        self._prove(src, spec, g, loop)
        self._trip(src, spec, g, loop)
        threads = block_threads(spec, launch)
        if threads is None:
            raise Refused(f"the block `{launch['block'][0]}` has no value for the MEP's sizes")
        by = [b for b in (1, 2, 4, 8) if threads % b == 0]
        return {"bx": [32, 64, 128, 256], "by": by}

    def apply(self, src, spec, launch, params):
        g, loop = self._match(src, spec, launch)
        pairs = self._prove(src, spec, g, loop)
        trip = self._trip(src, spec, g, loop)
        bx, by = int(params.get("bx", 128)), int(params.get("by", 2))
        threads = block_threads(spec, launch)
        if threads is None or threads % by or bx * by > 1024 or bx % 32:
            raise Refused(f"a {bx}x{by} block does not keep the original's {threads} threads per block along y")
        grid_y = f"({launch['grid'][0]}) * (({launch['block'][0]}) / {by})"
        rows = spec.size(grid_y)
        if rows is None or rows > GRID_Y_MAX:
            raise Refused(f"grid.y would be {rows}: beyond CUDA's {GRID_Y_MAX}")
        var_decl = next(c for c in walk(g.decl) if kind(c) == "VAR_DECL")
        init = list(var_decl.get_children())[-1]
        loop_decl = next(c for c in walk(list(loop.cursor.get_children())[0]) if kind(c) == "VAR_DECL")
        ctype = loop_decl.type.spelling.replace("const ", "")
        body = src.src(loop.body)
        if kind(loop.body) != "COMPOUND_STMT":       # a single statement's extent ends before its `;`
            body = f"{{ {body.rstrip().rstrip(';')}; }}"
        new_loop = (f"{{ {ctype} {loop.var} = ({loop.lo}) + ({ctype})(blockIdx.x * blockDim.x + threadIdx.x);\n"
                    f"      if ({loop.var} < {loop.hi}) {body} }}")
        text = src.replace([(*src.span(init), "blockIdx.y * blockDim.y + threadIdx.y"),
                            (*src.span(loop.cursor), new_loop)])
        grid_x = f"({trip} + {bx} - 1) / {bx}"
        return Rewrite(text, f"spread_loop: each iteration of the loop over {loop.var} in a thread of its own "
                             f"(x: {loop.var}, y: {g.var}; {bx}x{by} blocks); the iterations are proven "
                             f"independent ({pairs} access pair(s) never meet in two iterations)",
                       {"grid": [grid_x, grid_y], "block": [str(bx), str(by)], "shared_mem": launch["shared_mem"]})
