"""A thread per output that scans a long loop for its best element (a running maximum or minimum with the index
where it was found: nearest-neighbour matching, argmax over a product) -> RY slices of the loop per output in a
2D block, the slices' winners combined in shared memory in the loop's order.

A kernel like HeCBench's Match1 runs one thread per point, each scanning every point of the other set: few threads,
and each warp reads 32 different rows. With BX outputs x RY slices per block, a warp reads BX rows of the first
set and RY of the second, and the launch has RY times the threads. The scan is cut into RY contiguous ranges of
the counter; each slice runs the kernel's own loop body over its range from the kernel's own start values, then
thread y == 0 walks the slices in order with the kernel's own strict comparison (`score > best`): the first best
element in the loop's order wins, as in the original, and every value compared is computed exactly as before (the
same expressions in the same order), so the outputs are bit for bit the original's.

Applies to `v = global index; [declarations]; for (int j = LO; j < HI; j++) { [statements]; if (S > B) { B = S;
K = j; } } [tail]` (or `<`): no guard or early return (every thread must reach the combining barrier), no shared
memory or other block geometry, B and K declared before the loop and used in the loop only there, the statements
before the `if` write only locals of the loop body; a 1D launch whose block is a multiple of BX (the grid keeps the
original's threads exactly: the kernel has no guard).
"""
from __future__ import annotations

from .analysis import pure_call, body_statements, canonical_loop, check_pure, squash, strip, \
    thread_index_var, uses_block_geometry
from .base import Rewrite, Transformation, block_threads
from .source import Refused, kind, walk

SHAPES = ["8x32", "8x64", "16x16", "4x64", "8x16", "16x32"]


class SplitArgmax(Transformation):
    def __init__(self):
        super().__init__("split_argmax", "slices of a best-element scan per output, combined in the loop's order",
                         {"shape": "8x32"})

    def _match(self, src, spec, launch):
        if len(launch["grid"]) != 1 or len(launch["block"]) != 1:
            raise Refused("the launch is not 1D")
        var, decl = thread_index_var(src)
        if "__syncthreads" in src.calls() or src.shared_arrays():
            raise Refused("the kernel uses shared memory or barriers")
        if src.nodes("RETURN_STMT"):
            raise Refused("the kernel returns early (every thread must reach the combining barrier)")
        if uses_block_geometry(src, skip=[decl]):
            raise Refused(f"the kernel uses the block geometry beyond its index {var}")
        stmts = [s for s in body_statements(src.body) if src.span(s) != src.span(decl)]
        loops = [n for n, s in enumerate(stmts) if kind(s) == "FOR_STMT"]
        if len(loops) != 1:
            raise Refused("not exactly one loop at the top level of the kernel (a guard around it: every thread must "
                          "reach the combining barrier)")
        k = loops[0]
        pre, loop, tail = stmts[:k], canonical_loop(src, stmts[k]), stmts[k + 1:]
        if squash(loop.step) != "1":
            raise Refused(f"the loop over {loop.var} does not step by 1")
        for s in pre:
            if kind(s) != "DECL_STMT":
                raise Refused(f"`{squash(src.src(s))[:50]}` before the loop is not a declaration")
            check_pure(src, s, "a declaration before the loop")
        body = body_statements(loop.body)
        last = body[-1] if body else None
        best, at, op, score = self._update(src, last, loop.var)
        declared = {c.spelling for s in pre for c in walk(s) if kind(c) == "VAR_DECL"}
        if best not in declared or at not in declared:
            raise Refused(f"{best} and {at} are not declared before the loop")
        b0, b1 = src.span(loop.body)
        for s in body[:-1]:
            for w in src.writes(s):
                t = strip(list(w.get_children())[0]) if list(w.get_children()) else None
                d = t.referenced if t is not None and kind(t) == "DECL_REF_EXPR" else None
                if d is None or not b0 <= d.extent.start.offset < b1:
                    raise Refused(f"`{squash(src.src(w))[:50]}` writes outside the loop body's own locals")
            for c in walk(s):
                if kind(c) == "CALL_EXPR" and not pure_call(src, c):
                    raise Refused(f"the loop calls `{c.spelling}`, which may have side effects")
                if kind(c) in ("BREAK_STMT", "CONTINUE_STMT", "GOTO_STMT"):
                    raise Refused("the loop leaves an iteration early")
                if kind(c) == "DECL_REF_EXPR" and c.spelling in (best, at):
                    raise Refused(f"the loop reads {c.spelling} outside its update")
        init, cond = list(stmts[k].get_children())[:2]
        check_pure(src, cond, "the loop's bound")
        if {best, at} & (src.refs(score) | src.refs(init) | src.refs(cond)):
            raise Refused(f"the compared value or the loop's bounds read {best} or {at}")
        types = {}
        for s in pre:
            for c in walk(s):
                if kind(c) == "VAR_DECL" and c.spelling in (best, at):
                    types[c.spelling] = c.type.spelling.replace("const ", "")
        return decl, loop, stmts[k], tail, best, at, op, types

    def _update(self, src, last, counter: str):
        """`if (S > B) { B = S; K = j; }` (or `<`): (B, K, op, S's cursor)."""
        kids = list(last.get_children()) if last is not None and kind(last) == "IF_STMT" else []
        if len(kids) != 2:
            raise Refused("the loop does not end with `if (value > best) { best = value; at = counter; }`")
        cond, then = kids
        if kind(cond) != "BINARY_OPERATOR" or src.operator(cond) not in (">", "<"):
            raise Refused("the loop's last comparison is not a strict `>` or `<`")
        score, best = (strip(c) for c in cond.get_children())
        if kind(best) != "DECL_REF_EXPR":
            raise Refused("the comparison's right side is not the running best")
        sets = {}
        for s in body_statements(then):
            parts = list(s.get_children())
            if kind(s) != "BINARY_OPERATOR" or src.operator(s) != "=" or kind(strip(parts[0])) != "DECL_REF_EXPR":
                raise Refused("the update holds more than `best = value; at = counter;`")
            sets[strip(parts[0]).spelling] = squash(src.src(parts[1]))
        if len(sets) != 2 or sets.get(best.spelling) != squash(src.src(score)):
            raise Refused("the update does not set the best to the compared value")
        at = next(n for n in sets if n != best.spelling)
        if sets[at] != counter:
            raise Refused(f"the update does not record the counter {counter}")
        check_pure(src, score, "the compared value")
        return best.spelling, at, src.operator(cond), score

    def space(self, src, spec, launch):
        self._match(src, spec, launch)
        threads = block_threads(spec, launch)
        if threads is None:
            raise Refused(f"the block `{launch['block'][0]}` has no value for the MEP's sizes")
        shapes = [s for s in SHAPES if threads % int(s.split("x")[0]) == 0]
        if not shapes:
            raise Refused(f"no block width divides the original's {threads} threads per block")
        return {"shape": shapes}

    def apply(self, src, spec, launch, params):
        decl, loop, loop_stmt, tail, best, at, op, types = self._match(src, spec, launch)
        bx, ry = (int(v) for v in str(params.get("shape", "8x32")).split("x"))
        threads = block_threads(spec, launch)
        if threads is None or threads % bx or bx * ry > 1024:
            raise Refused(f"a {bx}x{ry} block does not keep the original's threads along x")
        ctype = next(c for c in walk(list(loop.cursor.get_children())[0]) if kind(c) == "VAR_DECL").type.spelling
        ctype = ctype.replace("const ", "")
        j, lo, hi = loop.var, loop.lo, loop.hi
        s0, s1 = src.span(loop_stmt)
        body = src.src(loop.body)
        if kind(loop.body) != "COMPOUND_STMT":
            body = f"{{ {body.rstrip().rstrip(';')}; }}"
        new_loop = (f"{{ const {ctype} mepgen_chunk = (({hi}) - ({lo}) + {ry} - 1) / {ry};\n"
                    f"    for ({ctype} {j} = ({lo}) + ({ctype})threadIdx.y * mepgen_chunk; {j} < {hi} && "
                    f"{j} < ({lo}) + ({ctype})(threadIdx.y + 1) * mepgen_chunk; {j}++) {body} }}\n"
                    f"  mepgen_best[threadIdx.y][threadIdx.x] = {best};\n"
                    f"  mepgen_at[threadIdx.y][threadIdx.x] = {at};\n"
                    f"  __syncthreads();\n"
                    f"  if (threadIdx.y == 0) {{\n"
                    f"    for (int mepgen_s = 1; mepgen_s < {ry}; ++mepgen_s)\n"
                    f"      if (mepgen_best[mepgen_s][threadIdx.x] {op} {best}) {{ {best} = "
                    f"mepgen_best[mepgen_s][threadIdx.x]; {at} = mepgen_at[mepgen_s][threadIdx.x]; }}\n")
        edits = [(s0, s1, new_loop)]
        if tail:
            t1 = src.span(tail[-1])[1]
            t1 = t1 + 1 if src.text[t1:t1 + 1] == ";" else t1
            edits.append((t1, t1, "\n  }"))
        else:
            edits[0] = (s0, s1, new_loop + "  }")
        d1 = src.span(decl)[1]
        d1 = d1 + 1 if src.text[d1:d1 + 1] == ";" else d1
        edits.append((d1, d1, f"\n  __shared__ {types[best]} mepgen_best[{ry}][{bx}];\n"
                              f"  __shared__ {types[at]} mepgen_at[{ry}][{bx}];"))
        grid = f"({launch['grid'][0]}) * (({launch['block'][0]}) / {bx})"
        return Rewrite(src.replace(edits),
                       f"split_argmax: {ry} slices of the loop over {j} per output ({bx}x{ry} blocks, {ry}x the "
                       f"threads), each slice's best ({best}, {at}) combined in the loop's order with the kernel's own "
                       f"`{op}` (the first best wins, as before; every compared value computed as before)",
                       {"grid": [grid], "block": [str(bx), str(ry)], "shared_mem": launch["shared_mem"]})
