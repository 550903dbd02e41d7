"""Thread-per-row reduction -> a group of TPR lanes (up to a warp) per row, combined with shuffles.

One thread walking a contiguous row reads memory with a stride of a whole row between neighbouring
threads (uncoalesced); TPR lanes walking the row together read consecutive elements, then
`__shfl_down_sync` sums their partials. The kernel needs TPR times the threads: the rewrite sets the grid.

Applies to exactly: `row = blockIdx.x*blockDim.x + threadIdx.x; if (row < BOUND) { [init] for (j...)
ACC += ADDEND; [statements using the sum] }` where the addend reads the row contiguously (the loop
counter is a unit-stride term of an index that also names the row, or the loop bounds depend on the
row as in CSR). Refuses when the rows are already read coalesced across threads (column-major),
with shared memory, barriers or early returns, or when the row bound is not a launch size.
"""
from __future__ import annotations

import re

from .analysis import array_accesses, body_statements, squash, thread_index_var, unit_stride_in, uses_block_geometry
from .base import Rewrite, Transformation, block_threads
from .reduction import sum_loop
from .source import KernelSource, Refused, kind

_ZERO = {"0", "0.0", "0.0f", "0.f", "0.0F", "0u"}


class WarpPerRow(Transformation):
    def __init__(self):
        super().__init__("warp_per_row", "a warp (or sub-warp) per row with shuffle reductions",
                         {"tpr": 32, "block": 256})

    def _match(self, src: KernelSource, spec):
        row, row_decl = thread_index_var(src)
        stmts = body_statements(src.body)
        rest = [s for s in stmts if s is not row_decl and src.span(s) != src.span(row_decl)]
        if len(rest) != 1 or kind(rest[0]) != "IF_STMT":
            raise Refused("the kernel is not `row = global index; if (row < bound) {...}`")
        kids = list(rest[0].get_children())
        if len(kids) != 2:
            raise Refused("the row guard has an else branch")
        cond, then = kids
        if kind(cond) != "BINARY_OPERATOR" or src.operator(cond) != "<" or \
                squash(src.src(list(cond.get_children())[0])) != row:
            raise Refused(f"the row guard is not `{row} < bound`")
        bound = squash(src.src(list(cond.get_children())[1]))
        if "__syncthreads" in src.calls() or src.shared_arrays():
            raise Refused("the kernel uses shared memory or barriers")
        if src.nodes("RETURN_STMT"):
            raise Refused("the kernel returns early (all lanes of a warp must reach the shuffles)")
        geometry = uses_block_geometry(src, skip=[row_decl])
        if geometry:
            raise Refused(f"the kernel uses {geometry[0]} beyond its row index")
        inner = body_statements(then)
        loops = [i for i, s in enumerate(inner) if kind(s) == "FOR_STMT"]
        if len(loops) != 1:
            raise Refused("the guarded block does not hold exactly one loop")
        k = loops[0]
        s = sum_loop(src, inner[k])
        before, after = inner[:k], inner[k + 1:]
        init, decl = None, None
        if s.global_target:
            if before and kind(before[-1]) == "BINARY_OPERATOR" and src.operator(before[-1]) == "=" and \
                    squash(src.src(list(before[-1].get_children())[0])) == squash(src.src(s.target)):
                init = src.src(list(before[-1].get_children())[1])
                before = before[:-1]
            else:
                init = src.src(s.target)        # accumulates onto the value already there
        else:
            if before and kind(before[-1]) == "DECL_STMT":
                var = list(before[-1].get_children())
                if len(var) == 1 and var[0].spelling == s.target_base and list(var[0].get_children()):
                    init, decl = src.src(list(var[0].get_children())[-1]), var[0]
                    before = before[:-1]
            if decl is None:
                raise Refused(f"the accumulator {s.target_base} is not declared right before the loop")
        if before:
            raise Refused(f"statements before the loop: `{squash(src.src(before[0]))[:50]}`")
        contiguous = any(unit_stride_in(src, idx, s.loop.var) and row in src.refs(idx)
                         for _, idx in array_accesses(src, s.addend))
        bounds_on_row = re.search(rf"\b{re.escape(row)}\b", s.loop.lo + " " + s.loop.hi) is not None
        contiguous = contiguous or (bounds_on_row and
                                    any(unit_stride_in(src, idx, s.loop.var) for _, idx in array_accesses(src, s.addend)))
        if not contiguous:
            raise Refused("the addend does not read along the row with unit stride: neighbouring threads already "
                          "read neighbouring elements (coalesced); a warp per row would break that")
        if s.loop.step != "1":
            raise Refused("the loop over the row does not step by 1")
        size = self._bound_size(spec, bound)
        return dict(row=row, row_decl=row_decl, bound=bound, size=size, loop=s, init=init, decl=decl, after=after)

    @staticmethod
    def _bound_size(spec, bound: str) -> str:
        try:
            p = spec.param(bound)
            if p.role == "scalar" and p.value:
                return p.value
        except KeyError:
            pass
        if spec.size(bound) is not None:
            return bound
        raise Refused(f"the row bound `{bound}` is neither a scalar parameter with a value nor a size expression")

    def space(self, src, spec, launch):
        self._match(src, spec)
        blocks = [128, 256, 512]
        if src.has_launch_bounds():
            cap = _bounds_value(src, spec)
            blocks = [b for b in blocks if cap is None or b <= cap]
            if not blocks:
                raise Refused("__launch_bounds__ allows fewer than 128 threads per block")
        return {"tpr": [32, 16, 8, 4], "block": blocks}

    def apply(self, src, spec, launch, params):
        m = self._match(src, spec)
        tpr, block = int(params.get("tpr", 32)), int(params.get("block", 256))
        s = m["loop"]
        acc, lane = "mepgen_part", "mepgen_lane"
        row_text = src.src(m["row_decl"]).rstrip().rstrip(";")
        row_type = row_text.split(m["row"])[0].strip() or "const int"
        loop = s.loop
        ind = "    "
        post = []
        if s.global_target:
            total = acc if squash(m["init"]) in _ZERO else f"({m['init']}) + {acc}"
            post.append(f"{src.src(s.target)} = {total};")
        else:
            total = acc if squash(m["init"]) in _ZERO else f"({m['init']}) + {acc}"
            post.append(f"{s.ctype} {s.target_base} = {total};")
        post += [src.src(st) + ("" if src.src(st).rstrip().endswith(("}", ";")) else ";") for st in m["after"]]
        body = [
            "{",
            f"{ind}// mepgen warp_per_row: {tpr} lanes per row, partial sums combined with shuffles",
            f"{ind}const int {lane} = threadIdx.x % {tpr};",
            f"{ind}{row_type} {m['row']} = (blockIdx.x * blockDim.x + threadIdx.x) / {tpr};",
            f"{ind}{s.ctype} {acc} = 0;",
            f"{ind}if ({m['row']} < {m['bound']}) {{",
            f"{ind * 2}for (int {loop.var} = ({loop.lo}) + {lane}; {loop.var} < {loop.hi}; {loop.var} += {tpr}) {{",
            f"{ind * 3}{acc} += {src.src(s.addend)};",
            f"{ind * 2}}}",
            f"{ind}}}",
            f"{ind}for (int mepgen_off = {tpr // 2}; mepgen_off > 0; mepgen_off >>= 1) {{",
            f"{ind * 2}{acc} += __shfl_down_sync(0xffffffffu, {acc}, mepgen_off, {tpr});",
            f"{ind}}}",
            f"{ind}if ({m['row']} < {m['bound']} && {lane} == 0) {{",
            *[f"{ind * 2}{line}" for p in post for line in p.splitlines()],
            f"{ind}}}",
            "}",
        ]
        start, end = src.span(src.body)
        text = src.replace([(start, end, "\n".join(body))])
        grid = f"((long long)({m['size']}) * {tpr} + {block} - 1) / {block}"
        return Rewrite(text, f"warp per row: {tpr} lanes share each row of the `{src.src(s.target)} += ...` "
                             f"reduction (coalesced reads, __shfl_down_sync sum); launch {block}-thread blocks, "
                             f"{tpr}x the threads",
                       {"grid": [grid], "block": [str(block)], "shared_mem": "0"})


def _bounds_value(src: KernelSource, spec) -> int | None:
    head = src.head
    i = head.find("__launch_bounds__")
    if i < 0:
        return None
    j = head.find("(", i)
    depth, k = 0, j
    for k in range(j, len(head)):
        depth += {"(": 1, ")": -1}.get(head[k], 0)
        if depth == 0:
            break
    first = head[j + 1:k].split(",")[0]
    return spec.size(first.strip())
