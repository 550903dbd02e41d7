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
BX x RY threads, within any `__launch_bounds__` (the attribute is kept); the grid is the original grid
with the block macro replaced by BX.

Atomics across blocks are not used: the outputs of such kernels are assigned (`mean[col] = ...`), and
an atomic sum would need them zeroed before the launch, which one kernel cannot guarantee.
"""
from __future__ import annotations

import re

from .analysis import array_accesses, body_statements, canonical_loop, check_pure, is_global_index, squash, \
    unit_stride_in
from .base import Rewrite, Transformation
from .source import KernelSource, Refused, kind, walk

_ZERO = {"0", "0.0", "0.0f", "0.f", "0.0F", "0u", "0.0L", "0ULL", "0LL"}
#: BX x RY block shapes, ordered by threads per column (a hill climb walks along the list)
SHAPES = ["32x4", "32x8", "16x16", "8x32", "32x16", "16x32", "32x32"]


def _threads(shape: str) -> int:
    bx, ry = shape.split("x")
    return int(bx) * int(ry)


def _sub_token(expr: str, token: str, value: int) -> str:
    return re.sub(rf"(?<![\w.]){re.escape(token)}(?![\w.])", str(value), expr)


class SplitColumns(Transformation):
    def __init__(self):
        super().__init__("split_columns", "row slices per column in a 2D block, shared-memory partial sums",
                         {"shape": "16x16"})

    # --- analysis ---------------------------------------------------------------------------------

    def _match(self, src: KernelSource, spec, launch):
        if len(launch["block"]) != 1:
            raise Refused("the launch is not 1D (one thread per column along x)")
        token = launch["block"][0].strip().strip("()").strip()
        if not (token.isidentifier() or token.isdigit()) or \
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
        return dict(token=token, shared=shared, staging=staging, acc=acc, loop=loop, addend=addend, tail=tail,
                    col=col)

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

    def space(self, src, spec, launch):
        self._match(src, spec, launch)
        cap = None
        if src.has_launch_bounds():
            from .warp_row import _bounds_value
            cap = _bounds_value(src, spec)
            if cap is None:
                raise Refused("__launch_bounds__ is not a compile-time value: the 2D block could exceed it")
        shapes = [x for x in SHAPES if cap is None or _threads(x) <= cap]
        if not shapes:
            raise Refused("__launch_bounds__ leaves no 2D block to try")
        return {"shape": shapes}

    def apply(self, src, spec, launch, params):
        m = self._match(src, spec, launch)
        bx, ry = (int(v) for v in str(params.get("shape", "16x16")).split("x"))
        if src.has_launch_bounds():
            from .warp_row import _bounds_value
            cap = _bounds_value(src, spec)
            if cap is not None and bx * ry > cap:
                raise Refused(f"{bx}x{ry} threads exceed __launch_bounds__({cap})")
        name, ctype = m["acc"]
        loop, ind = m["loop"], "    "
        part = "mepgen_part"
        new_loop = "\n".join([
            f"// mepgen split_columns: {ry} row slices per column, partials combined in a fixed order",
            f"{ind}__shared__ {ctype} {part}[{ry}][{bx}];",
            f"{ind}for (int {loop.var} = ({loop.lo}) + threadIdx.y; {loop.var} < {loop.hi}; {loop.var} += {ry}) {{",
            f"{ind * 2}{name} += {src.src(m['addend'])};",
            f"{ind}}}",
            f"{ind}{part}[threadIdx.y][threadIdx.x] = {name};",
            f"{ind}__syncthreads();",
            f"{ind}if (threadIdx.y == 0) {{",
            f"{ind * 2}for (int mepgen_s = 1; mepgen_s < {ry}; ++mepgen_s) {{",
            f"{ind * 3}{name} += {part}[mepgen_s][threadIdx.x];",
            f"{ind * 2}}}",
        ])
        s, e = src.span(loop.cursor)
        edits = [(s, e, new_loop)]
        tail = m["tail"]
        if tail:
            ts, te = src.span(tail[0])[0], src.span(tail[-1])[1]
            end = te + 1 if src.text[te:te + 1] == ";" else te
            edits.append((ts, end, src.text[ts:end] + f"\n{ind}}}"))
        else:
            edits[0] = (s, e, new_loop + f"\n{ind}}}")
        for stmt, _ in m["shared"]:
            a, b = src.span(stmt)
            b = b + 1 if src.text[b:b + 1] == ";" else b
            edits.append((a, b, "// (the staging array is replaced by the row-slice partials below)"))
        text = src.replace(edits)
        grid = [_sub_token(launch["grid"][0], m["token"], bx)] + list(launch["grid"][1:])
        return Rewrite(text, f"split columns: {ry} row slices per column ({bx}x{ry} blocks, {ry}x the threads), "
                             f"partial sums of `{name}` combined in shared memory in a fixed order "
                             f"(deterministic; only the float summation order changes)",
                       {"grid": grid, "block": [str(bx), str(ry)], "shared_mem": str(launch.get("shared_mem", "0"))})
