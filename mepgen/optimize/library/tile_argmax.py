"""A best-element scan over inner products (nearest-neighbour matching, the closest centroid, a maximum inner
product search) -> a register-tiled product with the scan as its epilogue.

The shape: `i = global index; [if (i < BOUND)] { B = B0; K = K0; for (j = LO; j < HI; j++) { T s = S0;
for (d = DLO; d < DHI; d++) { [T t = f(X[i, d], Y[j, d]);] s += g(...); } if (s > B) { B = s; K = j; } } TAIL }`
(or `<`). A thread per output reads a whole row of Y per candidate j; HeCBench's Match1 is this kernel. The rewrite
computes the scores of a TM x TN tile of (i, j) pairs per block from TM x BK and TN x BK slices of X and Y staged in
shared memory, RM x RN scores per thread in registers (tile_matmul's scheme, with its `layout` and `prefetch`; first
128 x 128 tiles of 8 x 8 where the original block allows), then scans each of its RN candidates of
each of its RM rows in ascending j with the kernel's own strict comparison. The TN/RN threads that share a row then
hold the first best element of their own subsets of j; one of them combines them: the greater value wins, and of
equal values the smaller j, which is the first best element over all j (what the original's strict comparison
keeps), with the value found there. A thread whose subset never beat B0 takes no part, so B0, K0 stay where nothing
beats B0. Each score is accumulated over d in the original's order by the same statements, and steps past DHI are
skipped (not zero-filled), so every compared value is the original's, bit for bit (up to the same FMA contraction).
The block's TM rows are the original's threads in order: the original block must be a multiple of TM (the grid
then keeps exactly its rows); a guard on i skips the rows it excluded.
"""
from __future__ import annotations

from .analysis import pure_call, body_statements, canonical_loop, check_pure, size_expr, squash, \
    strip, thread_index_var, uses_block_geometry
from .affine import local_constants, poly
from .base import Rewrite, Transformation, block_threads
from .matmul_match import spec_role
from .source import Refused, kind, walk
from .split_argmax import SplitArgmax
from .register_tile import LAYOUTS, canonical_type, check_shared, col_of, layout_param, prefetch_param, quad, \
    register_loads, row_of, shared_tiles, slice_coords, slices_bytes, staged_slices, type_bytes
from .tile_matmul import _decl_type as declared_type, _renamed
from .stencil_match import _conjuncts


class TileArgmax(Transformation):
    def __init__(self):
        super().__init__("tile_argmax", "a best-element scan over inner products as a register-tiled product",
                         {"tile": 64, "rm": 4, "rn": 4, "bk": 16, "layout": "quads", "prefetch": 1})

    def first_point(self, src, spec, launch):
        """128 x 128 tiles of 8 x 8 scores per thread where the original block is a multiple of 128 rows (the
        fastest of eight shapes on Match1, 52x against 39x for 64 x 64 of 4 x 4, packed; 76.9x in quads; H100), else
        the defaults."""
        threads = block_threads(spec, launch)
        count = _candidates(src, spec, self._match(src, spec, launch)["scan"])
        if threads is not None and threads % 128 == 0 and (count is None or count >= 256):
            return {**self.defaults, "tile": 128, "rm": 8, "rn": 8}
        return self.defaults

    def space(self, src, spec, launch):
        m = self._match(src, spec, launch)
        threads = block_threads(spec, launch)
        count = _candidates(src, spec, m["scan"])
        if count is not None and count < 32:
            raise Refused(f"{count} candidates over {m['scan'].var}: a tile of 32 or more would mostly compute nothing")
        tiles = [t for t in (128, 64, 32) if threads is not None and threads % t == 0 and (count is None or t <= 2 * count)]
        if not tiles:
            raise Refused(f"the original block (`{launch['block'][0]}`) is not a multiple of 32, 64 or 128 threads")
        return {"tile": tiles, "rm": [8, 4, 2], "rn": [8, 4, 2], "bk": [16, 8, 32], "layout": list(LAYOUTS),
                "prefetch": [1, 0]}

    def _match(self, src, spec, launch) -> dict:
        if len(launch["grid"]) != 1 or len(launch["block"]) != 1:
            raise Refused("the launch is not 1D")
        if "__syncthreads" in src.calls() or src.shared_arrays():
            raise Refused("the kernel uses shared memory or barriers")
        if src.nodes("RETURN_STMT"):
            raise Refused("the kernel returns early")
        row, decl = thread_index_var(src)
        if uses_block_geometry(src, skip=[decl]):
            raise Refused(f"the kernel uses the block geometry beyond its index {row}")
        params = src.invariants()
        stmts = [s for s in body_statements(src.body) if src.span(s) != src.span(decl)]
        guard = None
        if len(stmts) == 1 and kind(stmts[0]) == "IF_STMT" and len(list(stmts[0].get_children())) == 2:
            cond, then = list(stmts[0].get_children())
            for t in _conjuncts(src, cond):
                kids = list(t.get_children()) if kind(t) == "BINARY_OPERATOR" else []
                if len(kids) != 2 or src.operator(t) != "<" or squash(src.src(kids[0])) != row or \
                        src.refs(kids[1]) - params:
                    raise Refused(f"the guard term `{squash(src.src(t))}` is not `{row} < bound`")
            guard, stmts = cond, body_statements(then)
        loops = [n for n, s in enumerate(stmts) if kind(s) == "FOR_STMT"]
        if len(loops) != 1:
            raise Refused("not exactly one loop over the candidates at the top level of the kernel")
        k = loops[0]
        pre, scan, tail = stmts[:k], canonical_loop(src, stmts[k]), stmts[k + 1:]
        if squash(scan.step) != "1":
            raise Refused(f"the loop over {scan.var} does not step by 1")
        body = body_statements(scan.body)
        best, at, op, score = SplitArgmax()._update(src, body[-1] if body else None, scan.var)
        inits, types = {}, {}
        for s in pre:
            if kind(s) != "DECL_STMT":
                raise Refused(f"`{squash(src.src(s))[:50]}` before the loop is not a declaration")
            check_pure(src, s, "a declaration before the loop")
            for c in s.get_children():
                if kind(c) != "VAR_DECL":
                    continue
                kids = [x for x in c.get_children() if kind(x) not in ("TYPE_REF", "NAMESPACE_REF")]
                inits[c.spelling] = kids[-1] if kids else None
                types[c.spelling] = c.type.spelling.replace("const ", "")
        for name in (best, at):
            if inits.get(name) is None:
                raise Refused(f"{name} is not declared with an initial value before the loop")
            if src.refs(inits[name]) - params:
                raise Refused(f"the initial value of {name} depends on "
                              f"{', '.join(sorted(src.refs(inits[name]) - params))}")
        dropped = set(inits) - {best, at}
        for s in tail:
            if src.refs(s) & (dropped | {scan.var}):
                raise Refused(f"the code after the loop reads {', '.join(sorted(src.refs(s) & (dropped | {scan.var})))}")
        for c in walk(scan.cursor):
            if kind(c) == "DECL_REF_EXPR" and c.spelling in (best, at) and not _in_update(src, c, body[-1]):
                raise Refused(f"the loop reads {c.spelling} outside its update")
        acc, acc_type, s0, dloop, steps = self._score(src, body, score, params, row, scan.var)
        reads = self._operands(src, spec, steps, dloop, row, scan.var, params, acc)
        for t in (scan, dloop):
            init_stmt, cond_stmt = list(t.cursor.get_children())[:2]
            refs = src.refs(init_stmt) | src.refs(list(cond_stmt.get_children())[1])
            if refs - params - {t.var}:
                raise Refused(f"the bounds of the loop over {t.var} depend on {', '.join(sorted(refs - params - {t.var}))}")
        return {"row": row, "decl": decl, "guard": guard, "scan": scan, "best": best, "at": at, "op": op,
                "inits": inits, "types": types, "tail": tail, "acc": acc, "acc_type": acc_type, "s0": s0,
                "dloop": dloop, "steps": steps, "reads": reads}

    def _score(self, src, body, score, params, row, j):
        """`T s = S0; [T v = ...;] for (d ...) { [locals;] s += g; } [v = s;]` before the update, S0 constant, the
        compared value s or a copy v of it of the same type: (s, T, S0, Loop, steps)."""
        if kind(strip(score)) != "DECL_REF_EXPR":
            raise Refused("the compared value is not a variable holding a sum")
        fors = [n for n, st in enumerate(body[:-1]) if kind(st) == "FOR_STMT"]
        if len(fors) != 1:
            raise Refused(f"the loop over {j} does not hold exactly one loop (the sum) before its update")
        f = fors[0]
        inits, types = {}, {}
        for st in body[:f]:
            if kind(st) != "DECL_STMT":
                raise Refused(f"`{squash(src.src(st))[:50]}` before the sum is not a declaration")
            for d in st.get_children():
                kids = [x for x in d.get_children() if kind(x) not in ("TYPE_REF", "NAMESPACE_REF")]
                if kind(d) != "VAR_DECL" or not kids:
                    raise Refused(f"`{squash(src.src(st))[:50]}` before the sum declares no value")
                if src.refs(kids[-1]) - params:
                    raise Refused(f"the initial value of {d.spelling} depends on "
                                  f"{', '.join(sorted(src.refs(kids[-1]) - params))}")
                inits[d.spelling], types[d.spelling] = kids[-1], d.type.spelling.replace("const ", "")
        dloop = canonical_loop(src, body[f])
        if squash(dloop.step) != "1":
            raise Refused(f"the loop over {dloop.var} does not step by 1")
        steps = body_statements(dloop.body)
        last = steps[-1] if steps else None
        if last is None or kind(last) != "COMPOUND_ASSIGNMENT_OPERATOR" or src.operator(last) != "+=" or \
                kind(strip(list(last.get_children())[0])) != "DECL_REF_EXPR":
            raise Refused(f"the loop over {dloop.var} does not end with `sum += ...`")
        acc = strip(list(last.get_children())[0]).spelling
        if acc not in inits:
            raise Refused(f"the sum {acc} is not declared with an initial value before its loop")
        copies = {acc}
        for st in body[f + 1:-1]:           # `v = s;`: the compared value may be a copy of the sum
            kids = list(st.get_children())
            if kind(st) == "DECL_STMT" and len(kids) == 1 and kind(kids[0]) == "VAR_DECL":
                init = [x for x in kids[0].get_children() if kind(x) not in ("TYPE_REF", "NAMESPACE_REF")]
                t = kids[0].type.spelling.replace("const ", "")
                if init and kind(strip(init[-1])) == "DECL_REF_EXPR" and strip(init[-1]).spelling in copies and \
                        t == types[acc]:
                    copies.add(kids[0].spelling)            # `T v = s;`
                    continue
                if init and not src.refs(init[-1]) - params:
                    types[kids[0].spelling] = t             # `T v = 0;` (set from the sum below)
                    continue
            if kind(st) != "BINARY_OPERATOR" or src.operator(st) != "=" or len(kids) != 2 or \
                    kind(strip(kids[0])) != "DECL_REF_EXPR" or kind(strip(kids[1])) != "DECL_REF_EXPR" or \
                    strip(kids[1]).spelling not in copies or types.get(strip(kids[0]).spelling) != types[acc]:
                raise Refused(f"`{squash(src.src(st))[:50]}` after the sum is not a copy of it of the same type")
            copies.add(strip(kids[0]).spelling)
        if strip(score).spelling not in copies:
            raise Refused(f"the compared value {strip(score).spelling} is not the sum {acc} or a copy of it")
        for s in steps[:-1]:
            if kind(s) != "DECL_STMT":
                raise Refused(f"`{squash(src.src(s))[:50]}` in the sum is neither a local declaration nor the sum")
        for s in steps:
            check_pure(src, s if s is not last else list(last.get_children())[1], "the sum's step")
            if copies & src.refs(s if s is not last else list(last.get_children())[1]):
                raise Refused(f"the sum's step reads {acc}")
            for c in walk(s):
                if kind(c) == "CALL_EXPR" and not pure_call(src, c):
                    raise Refused(f"the sum calls `{c.spelling}`, which may have side effects")
        return acc, types[acc], src.src(inits[acc]), dloop, steps

    def _operands(self, src, spec, steps, dloop, row, j, params, acc) -> dict:
        """The array reads of the sum: exactly two distinct elements, one of a row-side input (indexed by the row and
        d), one of a candidate-side input (j and d). -> squashed read text -> ("row"|"col", cursor of one of them)."""
        reads, locals_, spans = {}, set(), []
        for s in steps:
            for c in walk(s):
                if kind(c) == "VAR_DECL":
                    locals_.add(c.spelling)
                if kind(c) == "ARRAY_SUBSCRIPT_EXPR" and not any(a <= src.span(c)[0] < b for a, b in spans):
                    reads.setdefault(squash(src.src(c)), c)
                    spans.append(src.span(c))
        if len(reads) != 2:
            raise Refused(f"the sum reads {len(reads)} distinct array elements, not one of each factor")
        env = local_constants(src, src.body, {row, j, dloop.var})
        out = {}
        for text, x in reads.items():
            base, idx = list(x.get_children())
            name = squash(src.src(base))
            if src.param(name) is None or spec_role(spec, name) != "in" or _written(src, name):
                raise Refused(f"the factor {name} is not a read-only input buffer")
            extra = src.refs(idx) - params - {row, j, dloop.var}
            if extra:
                raise Refused(f"the index of `{text}` uses {', '.join(sorted(extra))}")
            p = poly(src, idx, env)
            atoms = {a for m in p for a in m}
            sides = [v for v in (row, j) if v in atoms]
            if dloop.var not in atoms or len(sides) != 1:
                raise Refused(f"`{text}` is not indexed by {dloop.var} and exactly one of {row}, {j}")
            out[text] = ("row" if sides[0] == row else "col", x, "k" if p.get((dloop.var,)) == 1 else "m")
        if sorted(v[0] for v in out.values()) != ["col", "row"]:
            raise Refused(f"both reads follow the same index: not a product of {row}'s and {j}'s rows")
        for s in steps:         # nothing but the two reads, locals, parameters and functions
            for c in walk(s):
                if kind(c) == "DECL_REF_EXPR" and c.spelling not in locals_ | params and \
                        not any(a <= src.span(c)[0] < b for a, b in spans) and \
                        c.spelling != acc and \
                        not (c.referenced is not None and kind(c.referenced) in ("FUNCTION_DECL", "FUNCTION_TEMPLATE")):
                    raise Refused(f"the sum's step uses {c.spelling} outside its two reads")
        return out

    def apply(self, src, spec, launch, params):
        m = self._match(src, spec, launch)
        t, rm, rn, bk = (int(params.get(k, d)) for k, d in (("tile", 64), ("rm", 4), ("rn", 4), ("bk", 16)))
        layout = layout_param(params)
        prefetch = prefetch_param(params)
        threads = block_threads(spec, launch)
        if threads is None or threads % t or t % rm or t % rn or bk not in (8, 16, 32):
            raise Refused(f"tile {t}, rm {rm}, rn {rn}, bk {bk} is not a legal shape for the original block")
        tx, ty = t // rn, t // rm
        if not 64 <= tx * ty <= 1024:
            raise Refused(f"a {tx}x{ty} block is not a legal shape")
        nt, i = tx * ty, "    "
        if prefetch and (t * bk) % nt:
            raise Refused(f"a {t}x{bk} slice does not divide among {nt} threads: no prefetch")
        T0, B0t, A0t = (canonical_type(src, m[k], t0) for k, t0 in (("acc", m["acc_type"]),
                                                                       ("best", m["types"][m["best"]]),
                                                                       ("at", m["types"][m["at"]])))
        check_shared(slices_bytes(T0, bk, t, layout) + t * tx * (type_bytes(B0t) + type_bytes(A0t) + 1),
                     f"a {t}x{bk} tile with {t}x{tx} partial bests")
        row, j, d = m["row"], m["scan"].var, m["dloop"].var
        T, BT, AT = m["acc_type"], m["types"][m["best"]], m["types"][m["at"]]
        jt = m["scan"].ctype
        g = quad(T0)
        jlo, jhi, dlo, dhi = m["scan"].lo, m["scan"].hi, m["dloop"].lo, m["dloop"].hi
        rtype = _decl_type(src, m["decl"], row)
        terms = _conjuncts(src, m["guard"]) if m["guard"] is not None else []
        bound = " && ".join(f"({squash(src.src(c))})" for c in terms)
        staged_bound = " && ".join(f"({squash(_renamed(src, c, {row: 'mepgen_gr'}))})" for c in terms)
        B0, K0 = src.src(m["inits"][m["best"]]), src.src(m["inits"][m["at"]])
        L = ["{", f"{i}// mepgen tile_argmax: {t} rows x {t} candidates per step, {bk}-deep slices of both factors in "
             f"shared memory, {rm}x{rn} scores per thread; the scan as the epilogue",
             *shared_tiles(T, bk, t, layout, i),
             f"{i}__shared__ {BT} mepgen_sb[{t}][{tx}];", f"{i}__shared__ {AT} mepgen_sk[{t}][{tx}];",
             f"{i}__shared__ bool mepgen_sh[{t}][{tx}];",
             f"{i}const int mepgen_tid = (int)threadIdx.y * {tx} + (int)threadIdx.x;",
             f"{i}const {rtype} mepgen_r0 = ({rtype})blockIdx.x * {t};",
             f"{i}{BT} mepgen_best[{rm}];", f"{i}{AT} mepgen_at[{rm}];", f"{i}bool mepgen_hit[{rm}];",
             f"{i}#pragma unroll",
             f"{i}for (int mepgen_q = 0; mepgen_q < {rm}; ++mepgen_q) {{ mepgen_best[mepgen_q] = {B0}; "
             f"mepgen_at[mepgen_q] = {K0}; mepgen_hit[mepgen_q] = false; }}",
             f"{i}for ({jt} mepgen_c0 = {jlo}; mepgen_c0 < {jhi}; mepgen_c0 += {t}) {{",
             f"{i * 2}{T} mepgen_acc[{rm}][{rn}];", f"{i * 2}#pragma unroll",
             f"{i * 2}for (int mepgen_q = 0; mepgen_q < {rm}; ++mepgen_q)", f"{i * 3}#pragma unroll",
             f"{i * 3}for (int mepgen_w = 0; mepgen_w < {rn}; ++mepgen_w) mepgen_acc[mepgen_q][mepgen_w] = {m['s0']};",
             ]
        names = {row: "mepgen_gr", j: "mepgen_gc", d: "mepgen_gk"}
        slices = []
        for text, (side, x, fast) in sorted(m["reads"].items(), key=lambda kv: kv[1][0] != "row"):
            tile, tv, base = ("mepgen_As", "mepgen_gr", "mepgen_r0") if side == "row" else \
                ("mepgen_Bs", "mepgen_gc", "mepgen_c0")
            ok = [f"mepgen_gk < {dhi}"] + ([staged_bound] if side == "row" and bound else []) + \
                ([f"mepgen_gc < {jhi}"] if side == "col" else [])
            slices.append((tile, tv, base, slice_coords(fast == "k", t, bk), " && ".join(ok),
                           _renamed(src, x, names), rtype if side == "row" else jt))
        pre, top, bottom = staged_slices(slices, dlo, dhi, bk, t, nt, T, i, prefetch, depth=2)
        L += pre + [f"{i * 2}for (int mepgen_k0 = {dlo}; mepgen_k0 < {dhi}; mepgen_k0 += {bk}) {{"] + top
        step = _step(src, m, {k: ("mepgen_a[mepgen_q]" if v[0] == "row" else "mepgen_b[mepgen_w]")
                              for k, v in m["reads"].items()}, "mepgen_acc[mepgen_q][mepgen_w]")
        L += [f"{i * 3}#pragma unroll",
              f"{i * 3}for (int mepgen_kk = 0; mepgen_kk < {bk}; ++mepgen_kk) {{",
              f"{i * 4}if ((({dhi}) - ({dlo})) % {bk} != 0 && mepgen_k0 + mepgen_kk >= {dhi}) break;",
              *register_loads(T, rm, rn, tx, ty, layout, i * 4, g),
              f"{i * 4}#pragma unroll", f"{i * 4}for (int mepgen_q = 0; mepgen_q < {rm}; ++mepgen_q)",
              f"{i * 5}#pragma unroll", f"{i * 5}for (int mepgen_w = 0; mepgen_w < {rn}; ++mepgen_w) {{ {step} }}",
              f"{i * 3}}}", *bottom, f"{i * 2}}}",
              f"{i * 2}#pragma unroll", f"{i * 2}for (int mepgen_q = 0; mepgen_q < {rm}; ++mepgen_q)",
              f"{i * 3}#pragma unroll", f"{i * 3}for (int mepgen_w = 0; mepgen_w < {rn}; ++mepgen_w) {{",
              f"{i * 4}const {jt} mepgen_j = mepgen_c0 + {col_of('mepgen_w', rn, tx, layout, g)};",
              f"{i * 4}if (mepgen_j < {jhi} && mepgen_acc[mepgen_q][mepgen_w] {m['op']} mepgen_best[mepgen_q]) {{",
              f"{i * 5}mepgen_best[mepgen_q] = mepgen_acc[mepgen_q][mepgen_w]; mepgen_at[mepgen_q] = mepgen_j; "
              f"mepgen_hit[mepgen_q] = true;", f"{i * 4}}}", f"{i * 3}}}", f"{i}}}",
              f"{i}#pragma unroll", f"{i}for (int mepgen_q = 0; mepgen_q < {rm}; ++mepgen_q) {{",
              f"{i * 2}mepgen_sb[{row_of('mepgen_q', rm, ty, layout, g)}][threadIdx.x] = mepgen_best[mepgen_q];",
              f"{i * 2}mepgen_sk[{row_of('mepgen_q', rm, ty, layout, g)}][threadIdx.x] = mepgen_at[mepgen_q];",
              f"{i * 2}mepgen_sh[{row_of('mepgen_q', rm, ty, layout, g)}][threadIdx.x] = mepgen_hit[mepgen_q];", f"{i}}}",
              f"{i}__syncthreads();",
              f"{i}if (threadIdx.x == 0) {{",
              f"{i * 2}for (int mepgen_q = 0; mepgen_q < {rm}; ++mepgen_q) {{",
              f"{i * 3}const int mepgen_r = {row_of('mepgen_q', rm, ty, layout, g)};",
              f"{i * 3}const {rtype} {row} = mepgen_r0 + mepgen_r;"]
        if bound:
            L.append(f"{i * 3}if (!({bound})) continue;")
        b, a = m["best"], m["at"]
        L += [f"{i * 3}{BT} {b} = {B0};", f"{i * 3}{AT} {a} = {K0};", f"{i * 3}bool mepgen_got = false;",
              f"{i * 3}for (int mepgen_s = 0; mepgen_s < {tx}; ++mepgen_s) {{",
              f"{i * 4}if (mepgen_sh[mepgen_r][mepgen_s] && (!mepgen_got || mepgen_sb[mepgen_r][mepgen_s] {m['op']} {b} ||",
              f"{i * 4}        (mepgen_sb[mepgen_r][mepgen_s] == {b} && mepgen_sk[mepgen_r][mepgen_s] < {a}))) {{",
              f"{i * 5}{b} = mepgen_sb[mepgen_r][mepgen_s]; {a} = mepgen_sk[mepgen_r][mepgen_s]; mepgen_got = true;",
              f"{i * 4}}}", f"{i * 3}}}"]
        for st in m["tail"]:
            line = src.src(st).strip()
            L.append(i * 3 + line + ("" if line.endswith(("}", ";")) else ";"))
        L += [f"{i * 2}}}", f"{i}}}", "}"]
        text = src.replace([(*src.span(src.body), "\n".join(L))])
        grid = f"({launch['grid'][0]}) * (({launch['block'][0]}) / {t})"
        return Rewrite(text, f"tile_argmax: the scores {m['acc']} of {t} rows x {t} candidates {j} per block from "
                             f"{t}x{bk} shared slices of both factors, {rm}x{rn} per thread in registers, scanned in "
                             f"ascending {j} with the kernel's own `{m['op']}`; the threads of a row combined (greater "
                             f"wins, the smaller {j} on ties: the first best, as before); launch {tx}x{ty} blocks",
                       {"grid": [grid], "block": [str(tx), str(ty)], "shared_mem": launch["shared_mem"]})


def _candidates(src, spec, scan) -> int | None:
    """How many values the scan's counter takes at the MEP's sizes (None: unknown)."""
    lo, hi = size_expr(src, spec, scan.lo), size_expr(src, spec, scan.hi)
    return spec.size(f"({hi}) - ({lo})") if lo is not None and hi is not None else None


def _step(src, m, reads: dict[str, str], acc: str) -> str:
    """The sum's statements for one (row, candidate) pair with the two reads replaced by staged values and the
    accumulator by its register."""
    out = []
    for s in m["steps"]:
        s0, e0 = src.span(s)
        edits = []
        for c in walk(s):
            if kind(c) == "ARRAY_SUBSCRIPT_EXPR" and squash(src.src(c)) in reads:
                edits.append((*src.span(c), reads[squash(src.src(c))]))
            elif kind(c) == "DECL_REF_EXPR" and c.spelling == m["acc"]:
                edits.append((*src.span(c), acc))
        text, pos = [], s0
        for a, b, new in sorted(edits):
            if a < pos:
                continue
            text += [src.text[pos:a], new]
            pos = b
        line = " ".join(("".join(text) + src.text[pos:e0]).split())
        out.append(line if line.endswith(";") else line + ";")
    return " ".join(out)


def _in_update(src, c, update) -> bool:
    a, b = src.span(update)
    return a <= src.span(c)[0] < b


def _written(src, name: str) -> bool:
    for w in src.writes():
        kids = list(w.get_children())
        if kids and name in {n.spelling for n in walk(kids[0]) if kind(n) == "DECL_REF_EXPR"}:
            return True
    return False


def _decl_type(src, stmt, name) -> str:
    """The declared type of `name` without const (the rewrite declares its own row values of that type)."""
    t = declared_type(src, stmt, name)
    if "auto" in t.split():             # `const auto i = ...`: the type the compiler deduced
        t = next((c.type.spelling for c in stmt.get_children() if kind(c) == "VAR_DECL" and c.spelling == name), "int")
    t = " ".join(w for w in t.split() if w != "const")
    return t or "int"
