"""Column statistics with one thread per column -> RY row slices per column in a 2D block, partial sums
combined in shared memory in a fixed order (deterministic).

A kernel like analysis::column_mean runs only ncols threads, each walking every row: far too few threads
to cover memory latency. Splitting the row loop over `threadIdx.y` multiplies the threads by RY while a
warp still reads consecutive columns of one row (coalesced); thread y == 0 of each column adds the RY
partials in order 0..RY-1 and runs the original statements after the loop (e.g. the division by nrows)
on the total, so the result differs from the original only by the reordering of the float sum.

Applies to exactly: `[__shared__ T S[..];] [tid = threadIdx.x;] col = blockIdx.x*blockDim.x + tid;
[pure declarations] T acc = 0; for (int r = lo; r < hi; ++r) BODY; TAIL` where BODY is `acc += E;` or the
staging idiom `S[tid] = E; __syncthreads(); acc += S[tid]; __syncthreads();` (S used nowhere else; the
rewrite drops S, so a `S[BLOCK_SIZE]` sized by the block macro cannot be overrun), E is pure and reads
memory with `col` as a unit-stride term, and TAIL does not use the block geometry. The new block is
BX x RY threads; a `__launch_bounds__(BLOCK_SIZE)` is raised to BX*RY when the shape needs more (a bound
that also names a minimum of resident blocks is a cap instead); the grid is the original grid with the
block macro replaced by BX.

Row chunks across blocks (gridDim.y = G, partials added with atomicAdd) are offered only when the tail
is one `OUT[i] += f(acc)` with f linear (acc, acc*c, acc/c, c*acc), OUT float32 and its tolerance
rtol >= 1e-4 (an atomic float sum is nondeterministic). An assigned output (`mean[col] = acc / nrows`)
would need zeroing before the launch, which one kernel cannot guarantee: there the combine stays
deterministic within the block.
"""
from __future__ import annotations

import re

from .analysis import array_accesses, body_statements, canonical_loop, check_pure, is_global_index, squash, \
    unit_stride_in
from .block_expr import expression_block, substitute
from .base import Rewrite, Transformation
from .launch_facts import _bounds_value
from .source import KernelSource, Refused, kind, walk

_ZERO = {"0", "0.0", "0.0f", "0.f", "0.0F", "0u", "0.0L", "0ULL", "0LL"}
#: BX x RY block shapes, ordered by threads per column (a hill climb walks along the list)
SHAPES = ["32x4", "32x8", "16x16", "8x32", "32x16", "16x32", "32x32", "8x64", "8x128"]
#: row chunks across gridDim.y (atomic combine; only for `out[i] += f(acc)` tails with rtol >= 1e-4)
CHUNKS = [1, 8, 32, 128]
#: loads of a row slice in flight per thread (the slice loop's unroll): with RY slices a column strip still has
#: few warps per SM (column_mean's 4096 columns make 128 blocks of 32x32), so each warp must keep more loads
#: in flight to cover DRAM latency
UNROLLS = [8, 4, 16]      # 8 first: column_mean 32x32 at 4 / 8 / 16 ran 64.7% / 77.3% / 61.7% of peak (H200,
#                            bench/results/variant_profile_split_columns_unroll.md)
ATOMIC_RTOL = 1e-4
#: threads the first shape should give the launch: column_mean's 4096 columns at 32x32 (131072 threads) ran 77% of
#: an H200's peak at unroll 8 (bench/results/variant_profile_split_columns_unroll.md)
TARGET_THREADS = 131072


def _threads(shape: str) -> int:
    bx, ry = shape.split("x")
    return int(bx) * int(ry)


def _sub_token(expr: str, token: str, value: int) -> str:
    return substitute(expr, token, value)


class SplitColumns(Transformation):
    def __init__(self):
        super().__init__("split_columns", "row slices per column in a 2D block, shared-memory partial sums",
                         {"shape": "16x16", "unroll": 8})

    # --- analysis ---------------------------------------------------------------------------------

    def _match(self, src: KernelSource, spec, launch):
        if len(launch["block"]) != 1:
            raise Refused("the launch is not 1D (one thread per column along x)")
        token = launch["block"][0].strip().strip("()").strip()
        expr = expression_block(launch["block"][0], launch["grid"][0], spec, src.head + src.src(src.body))
        if expr is not None:        # `N < BS ? N : BS` that the grid divides by: replaced there as a whole
            token = expr
        elif not (token.isidentifier() or token.isdigit()) or \
                not re.search(rf"(?<![\w.]){re.escape(token)}(?![\w.])", launch["grid"][0]):
            raise Refused(f"the grid `{launch['grid'][0]}` is not derived from the block size `{token}`")
        if src.nodes("RETURN_STMT"):
            raise Refused("the kernel returns early (every thread must reach the combining barrier)")
        stmts = body_statements(src.body)
        shared, tid, col, acc, decls, i = [], None, None, None, [], 0
        while i < len(stmts) and kind(stmts[i]) == "DECL_STMT":
            vars_ = list(stmts[i].get_children())
            if len(vars_) != 1 or kind(vars_[0]) != "VAR_DECL":
                raise Refused(f"a declaration of several variables: `{squash(src.src(stmts[i]))[:50]}`")
            v = vars_[0]
            init = [k for k in v.get_children() if kind(k) not in ("TYPE_REF", "NAMESPACE_REF", "TEMPLATE_REF")]
            text = squash(src.src(init[-1])) if init else ""
            if v in src.shared_arrays() or "__shared__" in src.src(stmts[i]):
                shared.append((stmts[i], v))
            elif text == "threadIdx.x" and col is None:
                tid = v.spelling
            elif col is None and is_global_index(re.sub(rf"\b{tid}\b", "threadIdx.x", text) if tid else text):
                col = v.spelling
            elif col is not None and init and squash(src.src(init[-1])) in _ZERO and \
                    i + 1 < len(stmts) and kind(stmts[i + 1]) == "FOR_STMT":
                acc = (v.spelling, v.type.spelling.replace("const ", ""))
            elif init and not any(g in text for g in ("threadIdx", "blockIdx", "blockDim", "gridDim")):
                check_pure(src, init[-1], f"the declaration of {v.spelling}")
                decls.append(v.spelling)
            else:
                raise Refused(f"an unexpected declaration before the row loop: `{squash(src.src(stmts[i]))[:60]}`")
            i += 1
        if col is None:
            raise Refused("no `col = blockIdx.x * blockDim.x + threadIdx.x` column index at the top of the kernel")
        guard = None
        if acc is None and i == len(stmts) - 1 and kind(stmts[i]) == "IF_STMT":
            guard, stmts, i, acc = self._guarded(src, stmts[i], col)
        if acc is None or i >= len(stmts) or kind(stmts[i]) != "FOR_STMT":
            raise Refused("no accumulator declared with zero right before a row loop")
        loop = canonical_loop(src, stmts[i])
        if loop.step != "1":
            raise Refused("the row loop does not step by 1")
        tail = stmts[i + 1:]
        lane = {"threadIdx.x"} | ({tid} if tid else set())
        addend, staging = self._addend(src, loop, acc[0], lane, [v for _, v in shared])
        if len(shared) > (1 if staging else 0):
            raise Refused("the kernel uses shared memory beyond staging the row loop's reads")
        if "__syncthreads" in [c.spelling for t in tail for c in walk(t) if kind(c) == "CALL_EXPR"]:
            raise Refused("the statements after the row loop use barriers")
        if not any(unit_stride_in(src, idx, col) for _, idx in array_accesses(src, addend)):
            raise Refused(f"the addend `{squash(src.src(addend))[:50]}` does not read along `{col}` with unit "
                          f"stride: row slices would not read coalesced")
        if acc[0] in src.refs(addend):
            raise Refused(f"the addend reads the accumulator {acc[0]}")
        geometry = [src.src(c) for t in tail for c in walk(t) if kind(c) == "MEMBER_REF_EXPR" and
                    src.src(c).split(".")[0] in ("threadIdx", "blockIdx", "blockDim", "gridDim")]
        geometry += [src.src(c) for c in walk(addend) if kind(c) == "MEMBER_REF_EXPR" and
                     src.src(c).split(".")[0] in ("threadIdx", "blockIdx", "blockDim", "gridDim")]
        if geometry:
            raise Refused(f"the kernel uses {geometry[0]} beyond its column index")
        body, (b0, _) = src.src(src.body), src.span(src.body)
        for stmt, _ in shared:                      # the staging array the rewrite drops
            x, y = src.span(stmt)
            body = body[:x - b0] + " " * (y - x) + body[y - b0:]
        if token.isidentifier() and re.search(rf"\b{re.escape(token)}\b", body):
            raise Refused(f"the kernel bakes the block size {token} in beyond the staging array it replaces")
        outs = {n.spelling for t in tail for w in src.writes(t) for n in walk(list(w.get_children())[0])
                if kind(n) == "DECL_REF_EXPR" and src.param(n.spelling) is not None}
        if not outs:
            raise Refused("the statements after the row loop write no output parameter")
        for name in outs:
            tol = spec.verify.tolerance.get(name)
            if "float" in acc[1] or "double" in acc[1]:
                if tol is None or (tol.rtol <= 0 and tol.atol <= 0):
                    raise Refused(f"{name} must match exactly: reordering the float sum over rows could change it")
        if guard is not None and (shared or staging):
            raise Refused("a guarded column loop that stages through shared memory")
        return dict(token=token, shared=shared, staging=staging, acc=acc, loop=loop, addend=addend, tail=tail,
                    col=col, guard=guard)

    @staticmethod
    def _guarded(src, if_stmt, col):
        """`if (col < BOUND) { T acc = 0; for (...) acc += E; TAIL }` (what scalar_replace makes of
        `y[col] = 0; for (...) y[col] += E;`): the guard, the statements inside (nested blocks flattened),
        the index of the loop and the accumulator."""
        kids = list(if_stmt.get_children())
        if len(kids) != 2:
            raise Refused("the column guard has an else branch")
        cond, then = kids
        if kind(cond) != "BINARY_OPERATOR" or src.operator(cond) != "<" or \
                squash(src.src(list(cond.get_children())[0])) != col:
            raise Refused(f"the statement after the declarations is not a `{col} < bound` guard")

        def flat(c):
            if kind(c) == "COMPOUND_STMT":
                return [x for k in c.get_children() for x in flat(k)]
            return [c]
        inner = flat(then)
        if len(inner) < 2 or kind(inner[0]) != "DECL_STMT" or kind(inner[1]) != "FOR_STMT":
            raise Refused("no accumulator declared with zero right before a row loop inside the column guard")
        v = list(inner[0].get_children())
        init = [k for k in v[0].get_children() if kind(k) not in ("TYPE_REF", "NAMESPACE_REF")] if len(v) == 1 else []
        if not init or squash(src.src(init[-1])).strip("()") not in _ZERO:
            raise Refused("no accumulator declared with zero right before a row loop inside the column guard")
        acc = (v[0].spelling, v[0].type.spelling.replace("const ", ""))
        return dict(cursor=if_stmt, bound=src.src(list(cond.get_children())[1]), decl=inner[0]), inner, 1, acc

    def _addend(self, src, loop, acc, lane, shared_vars):
        """The value added per row, and whether the loop stages it through a shared array first."""
        body = body_statements(loop.body)
        if len(body) == 1:
            return self._accumulated(src, body[0], acc), False
        if len(body) != 4:
            raise Refused("the row loop does more than accumulate one value (other side effects)")
        store, sync1, add, sync2 = body
        if not (kind(sync1) == kind(sync2) == "CALL_EXPR" and sync1.spelling == sync2.spelling == "__syncthreads"):
            raise Refused("the row loop does more than accumulate one value (other side effects)")
        if kind(store) != "BINARY_OPERATOR" or src.operator(store) != "=":
            raise Refused("the row loop does more than accumulate one value (other side effects)")
        target, value = list(store.get_children())
        m = re.fullmatch(r"(\w+)\s*\[\s*([\w.]+)\s*\]", squash(src.src(target)))
        names = {v.spelling for v in shared_vars}
        if not m or m.group(1) not in names or m.group(2) not in lane:
            raise Refused(f"the row loop stores `{squash(src.src(target))}`, not its lane of a shared array")
        staged = self._accumulated(src, add, acc)
        if not re.fullmatch(rf"{m.group(1)}\s*\[\s*[\w.]+\s*\]", squash(src.src(staged))) or \
                squash(src.src(staged)).split("[")[1].strip(" ]") not in lane:
            raise Refused("the row loop accumulates something other than the value it staged")
        uses = [c for c in src.nodes("DECL_REF_EXPR") if c.spelling == m.group(1)]
        if len(uses) != 2:
            raise Refused(f"the shared array {m.group(1)} is used beyond staging the row loop's reads")
        check_pure(src, value, "the staged value")
        return value, True

    def _accumulated(self, src, stmt, acc):
        if kind(stmt) != "COMPOUND_ASSIGNMENT_OPERATOR" or src.operator(stmt) != "+=":
            raise Refused("the row loop does more than accumulate one value (other side effects)")
        target, value = list(stmt.get_children())
        if squash(src.src(target)) != acc:
            raise Refused(f"the row loop accumulates into `{squash(src.src(target))}`, not the local {acc}")
        check_pure(src, value, "the addend")
        return value

    # --- interface ----------------------------------------------------------------------------------

    @staticmethod
    def _bounds(src, spec):
        """(cap, offsets of the bound's first argument) when the kernel has __launch_bounds__, else None.
        A bound without a second argument may be raised to the new block size (the rewrite says so)."""
        if not src.has_launch_bounds():
            return None
        cap = _bounds_value(src, spec)
        head, at = src.head, src.fn.extent.start.offset
        i = head.index("(", head.index("__launch_bounds__"))
        depth, j = 0, i
        for j in range(i, len(head)):
            depth += {"(": 1, ")": -1}.get(head[j], 0)
            if depth == 0:
                break
        args = head[i + 1:j]
        raisable = cap is not None and "," not in args
        return cap, raisable, (at + i + 1, at + j)

    def _atomic(self, src, spec, m):
        """The `OUT[i] += f(acc)` statement an atomicAdd may replace, or why row chunks across blocks
        (combined with atomics) are not allowed."""
        tail, acc = m["tail"], m["acc"][0]
        stmts = tail
        if len(tail) == 1 and kind(tail[0]) == "IF_STMT" and len(list(tail[0].get_children())) == 2:
            stmts = body_statements(list(tail[0].get_children())[1])
        if len(stmts) != 1 or kind(stmts[0]) != "COMPOUND_ASSIGNMENT_OPERATOR" or src.operator(stmts[0]) != "+=":
            return None, ("the output is assigned, not accumulated (`out[i] += ...`): an atomic sum across "
                          "blocks would need it zeroed before the launch")
        target, value = list(stmts[0].get_children())
        out = re.match(r"(\w+)\s*\[", squash(src.src(target)))
        p = None
        try:
            p = spec.param(out.group(1)) if out else None
        except KeyError:
            pass
        if p is None or p.dtype != "float32":
            return None, f"`{squash(src.src(target))}` is not a float32 output (no atomicAdd for it here)"
        tol = spec.verify.tolerance.get(p.name)
        if tol is None or tol.rtol < ATOMIC_RTOL:
            return None, (f"{p.name}'s tolerance (rtol {tol.rtol if tol else 0:g}) is below {ATOMIC_RTOL:g}: "
                          f"an atomic (nondeterministic) float sum may not pass")
        v = squash(src.src(value))
        linear = re.fullmatch(rf"{acc}|{acc}\s*[*/]\s*(.+)|(.+?)\s*\*\s*{acc}", v)
        rest = [g for g in (linear.groups() if linear else ()) if g]
        if not linear or any(re.search(rf"\b({acc}|{p.name})\b", g) for g in rest):
            return None, f"`{v}` is not linear in {acc} (acc, acc * c, acc / c, c * acc): partial sums cannot be added"
        return stmts[0], ""

    def space(self, src, spec, launch):
        m = self._match(src, spec, launch)
        bounds = self._bounds(src, spec)
        if bounds is not None and bounds[0] is None:
            raise Refused("__launch_bounds__ is not a compile-time value: the 2D block could exceed it")
        shapes = [x for x in SHAPES if bounds is None or bounds[1] or _threads(x) <= bounds[0]]
        if not shapes:
            raise Refused("__launch_bounds__ (with a minimum of blocks) leaves no 2D block to try")
        stmt, _ = self._atomic(src, spec, m)
        return {"shape": shapes, "unroll": UNROLLS, **({"chunks": CHUNKS} if stmt is not None else {})}

    def first_point(self, src, spec, launch):
        """The shape tried first: the widest (coalescing) whose row slices give the launch at least TARGET_THREADS
        threads (few columns need many slices: 2048 columns in 16x16 blocks are 128 blocks of 256 threads, too few
        loads in flight for a GPU's memory); the most slices when none does. The defaults where the number of
        columns has no value for the MEP's sizes."""
        shapes = self.space(src, spec, launch)["shape"]
        cols = spec.size(f"({launch['grid'][0]}) * ({launch['block'][0]})")
        if cols is None:
            return self.defaults
        enough = [x for x in shapes if cols * int(x.split("x")[1]) >= TARGET_THREADS]
        best = max(enough, key=lambda x: (int(x.split("x")[0]), -int(x.split("x")[1]))) if enough else \
            max(shapes, key=lambda x: (int(x.split("x")[1]), int(x.split("x")[0])))
        return {**self.defaults, "shape": best}

    def apply(self, src, spec, launch, params):
        m = self._match(src, spec, launch)
        bx, ry = (int(v) for v in str(params.get("shape", "16x16")).split("x"))
        chunks = int(params.get("chunks", 1))
        unroll = int(params.get("unroll", self.defaults["unroll"]))
        if unroll < 1:
            raise Refused(f"unroll {unroll}: the row-slice loop needs a positive unroll")
        edits, note = [], ""
        bounds = self._bounds(src, spec)
        if bounds is not None and bounds[0] is not None and bx * ry > bounds[0]:
            if not bounds[1]:
                raise Refused(f"{bx}x{ry} threads exceed __launch_bounds__({bounds[0]}), which names a minimum "
                              f"of resident blocks")
            edits.append((*bounds[2], str(bx * ry)))
            note = f", __launch_bounds__ raised to {bx * ry}"
        atomic = None
        if chunks > 1:
            atomic, why = self._atomic(src, spec, m)
            if atomic is None:
                raise Refused(f"no row chunks across blocks: {why}")
        name, ctype = m["acc"]
        loop, ind = m["loop"], "    "
        if m["guard"] is not None:
            return self._apply_guarded(src, m, launch, bx, ry, edits, note, unroll)
        part = "mepgen_part"
        lo, hi = f"({loop.lo})", loop.hi
        chunk = []
        if atomic is not None:
            chunk = [f"{ind}const int mepgen_per = (({loop.hi}) - ({loop.lo}) + {chunks} - 1) / {chunks};",
                     f"{ind}const int mepgen_r0 = ({loop.lo}) + (int)blockIdx.y * mepgen_per;",
                     f"{ind}const int mepgen_r1 = mepgen_r0 + mepgen_per < ({loop.hi}) ? mepgen_r0 + mepgen_per : "
                     f"({loop.hi});"]
            lo, hi = "mepgen_r0", "mepgen_r1"
        new_loop = "\n".join([
            f"// mepgen split_columns: {ry} row slices per column, partials combined in a fixed order",
            f"{ind}__shared__ {ctype} {part}[{ry}][{bx}];",
            *chunk,
            *_row_slices(src, m, ry, lo, hi, None, unroll),
        ])
        s, e = src.span(loop.cursor)
        tail = m["tail"]
        if tail:
            edits.append((s, e, new_loop))
            ts, te = src.span(tail[0])[0], src.span(tail[-1])[1]
            end = te + 1 if src.text[te:te + 1] == ";" else te
            tail_text = src.text[ts:end]
            if atomic is not None:                  # `OUT[i] += f(acc)` -> atomicAdd(&OUT[i], f(acc))
                a0, a1 = src.span(atomic)
                target, value = list(atomic.get_children())
                tail_text = tail_text[:a0 - ts] + f"atomicAdd(&{src.src(target)}, {src.src(value)})" + \
                    tail_text[a1 - ts:]
            edits.append((ts, end, tail_text + f"\n{ind}}}"))
        else:
            edits.append((s, e, new_loop + f"\n{ind}}}"))
        for stmt, _ in m["shared"]:
            a, b = src.span(stmt)
            b = b + 1 if src.text[b:b + 1] == ";" else b
            edits.append((a, b, "// (the staging array is replaced by the row-slice partials below)"))
        text = src.replace(edits)
        grid = [_sub_token(launch["grid"][0], m["token"], bx)] + ([str(chunks)] if atomic is not None else [])
        how = (f"and {chunks} row chunks across blocks added with atomicAdd (nondeterministic float sum, "
               f"within rtol >= {ATOMIC_RTOL:g})" if atomic is not None else
               "in a fixed order (deterministic; only the float summation order changes)")
        return Rewrite(text, f"split columns: {ry} row slices per column ({bx}x{ry} blocks, {ry * chunks}x the "
                             f"threads, {unroll} loads in flight per slice), partial sums of `{name}` combined in "
                             f"shared memory {how}{note}",
                       {"grid": grid, "block": [str(bx), str(ry)], "shared_mem": str(launch.get("shared_mem", "0"))})

    def _apply_guarded(self, src, m, launch, bx, ry, edits, note, unroll: int) -> Rewrite:
        """The column guard's form: the accumulator hoisted so that every thread reaches the barrier, the row
        slices and the output statements guarded, the combine in the same fixed order."""
        name, ctype = m["acc"]
        loop, g, ind, part = m["loop"], m["guard"], "    ", "mepgen_part"
        init = [k for k in list(g["decl"].get_children())[0].get_children()
                if kind(k) not in ("TYPE_REF", "NAMESPACE_REF")][-1]
        tail = m["tail"]
        tail_text = ""
        if tail:
            ts, te = src.span(tail[0])[0], src.span(tail[-1])[1]
            te = te + 1 if src.text[te:te + 1] == ";" else te
            tail_text = src.text[ts:te]
        block = "\n".join([
            f"// mepgen split_columns: {ry} row slices per column, partials combined in a fixed order",
            f"{ind}{ctype} {name} = {src.src(init)};",
            f"{ind}__shared__ {ctype} {part}[{ry}][{bx}];",
            *_row_slices(src, m, ry, f"({loop.lo})", loop.hi, f"{m['col']} < {g['bound']}", unroll),
            f"{ind * 2}if ({m['col']} < {g['bound']}) {{",
            *[f"{ind * 3}{line.strip()}" for line in tail_text.splitlines() if line.strip()],
            f"{ind * 2}}}",
            f"{ind}}}"])
        edits.append((*src.span(g["cursor"]), block))
        text = src.replace(edits)
        grid = [_sub_token(launch["grid"][0], m["token"], bx)]
        return Rewrite(text, f"split columns: {ry} row slices per column ({bx}x{ry} blocks, {ry}x the threads, "
                             f"{unroll} loads in flight per slice), partial sums of `{name}` combined in shared "
                             f"memory in a fixed order (deterministic; "
                             f"only the float summation order changes), the column guard kept around the row "
                             f"slices and the output{note}",
                       {"grid": grid, "block": [str(bx), str(ry)], "shared_mem": str(launch.get("shared_mem", "0"))})


def _row_slices(src, m, ry: int, lo: str, hi: str, guard: str | None, unroll: int) -> list[str]:
    """Each thread's slice of the rows (`threadIdx.y`, step RY, unrolled `unroll` times; under `guard` when
    given), its partial in shared memory, and the start of the fixed-order combine by thread y == 0 (its `if`
    left open)."""
    name, loop, ind, part = m["acc"][0], m["loop"], "    ", "mepgen_part"
    pad = ind if guard else ""
    lines = [f"{ind}if ({guard}) {{"] if guard else []
    lines += [f"{pad}{ind}#pragma unroll {unroll}",
              f"{pad}{ind}for (int {loop.var} = {lo} + threadIdx.y; {loop.var} < {hi}; {loop.var} += {ry}) {{",
              f"{pad}{ind * 2}{name} += {src.src(m['addend'])};",
              f"{pad}{ind}}}"]
    lines += [f"{ind}}}"] if guard else []
    return lines + [f"{ind}{part}[threadIdx.y][threadIdx.x] = {name};",
                    f"{ind}__syncthreads();",
                    f"{ind}if (threadIdx.y == 0) {{",
                    f"{ind * 2}for (int mepgen_s = 1; mepgen_s < {ry}; ++mepgen_s) {{",
                    f"{ind * 3}{name} += {part}[mepgen_s][threadIdx.x];",
                    f"{ind * 2}}}"]
