"""Thread-per-row reduction -> a group of TPR lanes per row, combined with shuffles (and, for TPR of 64 or
256, the warps of a row added through shared memory: a matrix with few rows then still fills the GPU).

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

from ...spec import itemsize
from .affine import poly, refs_of
from .analysis import array_accesses, body_statements, element_type, guarded_thread, size_expr, squash, unit_stride_in
from .base import Rewrite, Transformation
from .launch_facts import _bounds_value
from .reduction import sum_group, sum_loop
from .source import KernelSource, Refused, kind, walk

_ZERO = {"0", "0.0", "0.0f", "0.f", "0.0F", "0u"}
LANES = 4


class WarpPerRow(Transformation):
    def __init__(self):
        super().__init__("warp_per_row", "a warp (or sub-warp) per row with shuffle reductions",
                         {"tpr": 32, "block": 256, "vec": 1})

    def _match(self, src: KernelSource, spec):
        g = guarded_thread(src, "row", "all lanes of a warp must reach the shuffles")
        row, row_decl, then, bound = g.var, g.decl, g.then, squash(g.bound)
        inner = body_statements(then)
        loops = [i for i, s in enumerate(inner) if kind(s) == "FOR_STMT"]
        if len(loops) != 1:
            raise Refused("the guarded block does not hold exactly one loop")
        k = loops[0]
        try:
            s = sum_loop(src, inner[k])
        except Refused as single:
            try:
                return self._match_group(src, spec, g, inner, k)
            except Refused:
                raise single from None
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
        size = size_expr(src, spec, bound) or self._bound_size(spec, bound)
        return dict(row=row, row_decl=row_decl, bound=bound, size=size, loop=s, init=init, decl=decl, after=after)

    def _match_group(self, src, spec, g, inner, k) -> dict:
        """Several sums in the row loop (`t[i] += A[i*n+j] * x[j]; y[i] += B[i*n+j] * x[j];`): each a partial
        sum per lane, each combined with shuffles. Starts: `t[i] = e;` right before the loop, else the element."""
        group = sum_group(src, inner[k])
        before, after = inner[:k], inner[k + 1:]
        inits = {}
        while before and kind(before[-1]) == "BINARY_OPERATOR" and src.operator(before[-1]) == "=":
            lhs, rhs = list(before[-1].get_children())
            t = squash(src.src(lhs))
            if t not in {squash(src.src(s.target)) for s in group} or t in inits or \
                    {s.target_base for s in group} & src.refs(rhs):
                break
            inits[t] = src.src(rhs)
            before = before[:-1]
        if before:
            raise Refused(f"statements before the loop: `{squash(src.src(before[0]))[:50]}`")
        row = g.var
        for s in group:
            if not any(unit_stride_in(src, idx, s.loop.var) and row in src.refs(idx)
                       for _, idx in array_accesses(src, s.addend)):
                raise Refused(f"the addend `{squash(src.src(s.addend))[:50]}` does not read along the row with unit "
                              f"stride")
        if group[0].loop.step != "1":
            raise Refused("the loop over the row does not step by 1")
        bound = squash(g.bound)
        size = size_expr(src, spec, bound) or self._bound_size(spec, bound)
        return dict(row=row, row_decl=g.decl, bound=bound, size=size, loop=group[0], group=group,
                    inits={squash(src.src(s.target)): inits.get(squash(src.src(s.target)), src.src(s.target))
                           for s in group}, init=None, decl=None, after=after)

    def _apply_group(self, src, m, tpr, block) -> Rewrite:
        group, loop, ind, lane = m["group"], m["group"][0].loop, "    ", "mepgen_lane"
        row_type = _decl_type(src.src(m["row_decl"]), m["row"])
        accs = [f"mepgen_part{n}" for n in range(len(group))]
        types = [element_type(src.param(s.target_base).type) for s in group]
        body = ["{", f"{ind}// mepgen warp_per_row: {tpr} lanes per row, {len(group)} partial sums combined with shuffles",
                f"{ind}const int {lane} = threadIdx.x % {tpr};",
                f"{ind}{row_type} {m['row']} = (blockIdx.x * blockDim.x + threadIdx.x) / {tpr};",
                *[f"{ind}{t} {a} = 0;" for t, a in zip(types, accs)],
                f"{ind}if ({m['row']} < {m['bound']}) {{",
                f"{ind * 2}for (int {loop.var} = ({loop.lo}) + {lane}; {loop.var} < {loop.hi}; {loop.var} += {tpr}) {{",
                *[f"{ind * 3}{a} += {src.src(s.addend)};" for a, s in zip(accs, group)],
                f"{ind * 2}}}", f"{ind}}}",
                f"{ind}for (int mepgen_off = {min(tpr, 32) // 2}; mepgen_off > 0; mepgen_off >>= 1) {{",
                *[f"{ind * 2}{a} += __shfl_down_sync(0xffffffffu, {a}, mepgen_off, {min(tpr, 32)});" for a in accs],
                f"{ind}}}"]
        for t, a in zip(types, accs):
            if tpr > 32:
                body += [line.replace("mepgen_warps", f"mepgen_warps_{a}") for line in
                         self._across_warps(t, a, tpr, block)]
        post = []
        for s, a in zip(group, accs):
            init = m["inits"][squash(src.src(s.target))]
            post.append(f"{src.src(s.target)} = {a if squash(init) in _ZERO else f'({init}) + {a}'};")
        post += [src.src(st) + ("" if src.src(st).rstrip().endswith(("}", ";")) else ";") for st in m["after"]]
        body += [f"{ind}if ({m['row']} < {m['bound']} && {lane} == 0) {{",
                 *[f"{ind * 2}{line}" for p in post for line in p.splitlines()], f"{ind}}}", "}"]
        start, end = src.span(src.body)
        grid = f"((long long)({m['size']}) * {tpr} + {block} - 1) / {block}"
        return Rewrite(src.replace([(start, end, "\n".join(body))]),
                       f"warp per row: {tpr} lanes share each row of the {len(group)} sums "
                       f"({', '.join(src.src(s.target) for s in group)}; coalesced reads, __shfl_down_sync sums); "
                       f"launch {block}-thread blocks, {tpr}x the threads",
                       {"grid": [grid], "block": [str(block)], "shared_mem": "0"})

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
        m = self._match(src, spec)
        blocks = [128, 256, 512]
        if src.has_launch_bounds():
            cap = _bounds_value(src, spec)
            blocks = [b for b in blocks if cap is None or b <= cap]
            if not blocks:
                raise Refused("__launch_bounds__ allows fewer than 128 threads per block")
        try:
            if m.get("group"):
                raise Refused("several sums")
            self._vector_plan(src, spec, m)
            vec = [1, 4]        # scalar first: on H200 it is the faster (bench/results/warp_row_variants.md)
        except Refused:
            vec = [1]
        return {"tpr": [32, 64, 128, 256, 16, 8, 4], "block": blocks, "vec": vec}

    def _vector_plan(self, src: KernelSource, spec, m) -> dict:
        """How `vec=4` loads the row: the accesses that walk it, their 128-bit loads, and the run-time guard."""
        loop = m["loop"].loop
        var = loop.var
        if m["loop"].guard is not None:
            raise Refused("vector loads: the sum is guarded (`if (...)`): each element is tested on its own")
        try:
            lo = poly(src, _init_expr(src, loop), {})
        except (Refused, ValueError) as e:
            raise Refused(f"vector loads: the row loop's start is not affine ({e})") from None
        if refs_of(lo) or lo.get((), 0) % LANES:
            raise Refused(f"vector loads: the row loop starts at `{squash(loop.lo)}`, not a constant multiple of {LANES}")
        walking, guards = [], set()
        for c in _subscripts(src, m["loop"].addend):
            base, index = list(c.get_children())
            name = squash(src.src(base))
            if var not in src.refs(index):
                continue
            p = src.param(name)
            sp = next((q for q in spec.params if q.name == name), None)
            if p is None or not p.pointer or sp is None or sp.role == "scalar":
                raise Refused(f"vector loads: `{squash(src.src(c))}` is not an element of a pointer parameter")
            if sp.dtype is None or itemsize(sp.dtype) != 4:
                raise Refused(f"vector loads: {name} is {sp.dtype}: 128-bit vectors of {LANES} need 4-byte elements")
            if re.search(rf"\.\s*{re.escape(var)}\b", src.src(index)):
                raise Refused(f"vector loads: a member named {var} in `{squash(src.src(index))}`")
            try:
                ip = poly(src, index, {})
            except (Refused, ValueError) as e:
                raise Refused(f"vector loads: `{squash(src.src(c))}`: {e}") from None
            if ip.get((var,)) != 1 or any(var in mono for mono in ip if mono != (var,)):
                raise Refused(f"vector loads: `{squash(src.src(c))}` does not step by one element with {var}")
            for mono, coef in ip.items():
                if mono == (var,) or not mono and coef % LANES == 0:
                    continue
                if not mono:
                    raise Refused(f"vector loads: `{squash(src.src(c))}` is offset by {coef}, not a multiple of {LANES}")
                known = [a for a in mono if self._value(spec, a) is not None]
                if not known:
                    if coef % LANES:
                        raise Refused(f"vector loads: `{squash(src.src(c))}`: the term {coef}*{'*'.join(mono)} "
                                      f"has no multiplier known to be a multiple of {LANES}")
                    continue
                value = coef
                for a in known:
                    value *= self._value(spec, a)
                if value % LANES:
                    raise Refused(f"vector loads: `{squash(src.src(c))}`: {'*'.join(known)} is not a multiple of "
                                  f"{LANES} for the MEP's sizes (the rows do not start 16-byte aligned)")
                if coef % LANES:
                    guards.add(f"((long long)({coef}) * {' * '.join(known)}) % {LANES} == 0")
            walking.append((c, name, src.src(index)))
        if not walking:
            raise Refused("vector loads: no array is read along the row")
        loads: dict[str, tuple[str, str, str]] = {}
        for c, name, index in walking:
            loads.setdefault(squash(src.src(c)), (f"mepgen_v{len(loads)}", name, index))
        return dict(loads=loads, guards=sorted(guards), pointers=sorted({n for _, n, _ in walking}))

    @staticmethod
    def _value(spec, atom: str) -> int | None:
        q = next((p for p in spec.params if p.name == atom), None)
        if q is not None:
            return spec.size(q.value) if q.role == "scalar" and q.value else None
        return spec.size(atom)

    def apply(self, src, spec, launch, params):
        m = self._match(src, spec)
        tpr, block = int(params.get("tpr", 32)), int(params.get("block", 256))
        if tpr not in (4, 8, 16, 32, 64, 128, 256) or block % tpr:
            raise Refused(f"{tpr} lanes per row do not tile a block of {block} threads")
        vec = int(params.get("vec", 1))
        if vec not in (1, LANES):
            raise Refused(f"vec must be 1 or {LANES}, not {vec}")
        if m.get("group"):
            if vec != 1:
                raise Refused("several sums in one row loop: no 128-bit loads")
            return self._apply_group(src, m, tpr, block)
        plan = self._vector_plan(src, spec, m) if vec == LANES else None
        s = m["loop"]
        acc, lane = "mepgen_part", "mepgen_lane"
        row_text = src.src(m["row_decl"]).rstrip().rstrip(";")
        row_type = _decl_type(row_text, m["row"])
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
        scalar = [f"for ({loop.ctype} {loop.var} = ({loop.lo}) + {lane}; {loop.var} < {loop.hi}; {loop.var} += {tpr}) {{",
                  f"{ind}{s.accumulate(src, acc)}",
                  "}"]
        inner = scalar if plan is None else self._vector_loop(src, m, plan, tpr, lane, acc, scalar)
        body = [
            "{",
            f"{ind}// mepgen warp_per_row: {tpr} lanes per row, partial sums combined with shuffles"
            + (f"; {LANES} elements per 128-bit load" if plan else ""),
            f"{ind}const int {lane} = threadIdx.x % {tpr};",
            f"{ind}{row_type} {m['row']} = (blockIdx.x * blockDim.x + threadIdx.x) / {tpr};",
            f"{ind}{s.ctype} {acc} = 0;",
            f"{ind}if ({m['row']} < {m['bound']}) {{",
            *[f"{ind * 2}{line}" for line in inner],
            f"{ind}}}",
            f"{ind}for (int mepgen_off = {min(tpr, 32) // 2}; mepgen_off > 0; mepgen_off >>= 1) {{",
            f"{ind * 2}{acc} += __shfl_down_sync(0xffffffffu, {acc}, mepgen_off, {min(tpr, 32)});",
            f"{ind}}}",
            *(self._across_warps(s.ctype, acc, tpr, block) if tpr > 32 else []),
            f"{ind}if ({m['row']} < {m['bound']} && {lane} == 0) {{",
            *[f"{ind * 2}{line}" for p in post for line in p.splitlines()],
            f"{ind}}}",
            "}",
        ]
        start, end = src.span(src.body)
        text = src.replace([(start, end, "\n".join(body))])
        grid = f"((long long)({m['size']}) * {tpr} + {block} - 1) / {block}"
        vec_note = "" if plan is None else \
            (f"; {', '.join(plan['pointers'])} read {LANES} elements per 128-bit load where the row start and "
             f"pointers are 16-byte aligned (checked at run time, scalar loop otherwise)")
        across = f", the {tpr // 32} warps of a row added through shared memory" if tpr > 32 else ""
        return Rewrite(text, f"warp per row: {tpr} lanes share each row of the `{src.src(s.target)} += ...` "
                             f"reduction (coalesced reads, __shfl_down_sync sum{across}){vec_note}; launch {block}-thread "
                             f"blocks, {tpr}x the threads",
                       {"grid": [grid], "block": [str(block)], "shared_mem": "0"})

    @staticmethod
    def _across_warps(ctype, acc, tpr, block) -> list[str]:
        """More than a warp per row: each warp's sum through shared memory, added by the row's first lane in
        warp order (every thread reaches the barrier: the kernel has no early return)."""
        ind = "    "
        return [f"{ind}__shared__ {ctype} mepgen_warps[{block} / 32];",     # the block is baked in: launch_config refuses
                f"{ind}if (threadIdx.x % 32 == 0) mepgen_warps[threadIdx.x / 32] = {acc};",
                f"{ind}__syncthreads();",
                f"{ind}if (threadIdx.x % {tpr} == 0) {{",
                f"{ind * 2}{acc} = 0;",
                f"{ind * 2}for (int mepgen_w = 0; mepgen_w < {tpr // 32}; ++mepgen_w) {acc} += "
                f"mepgen_warps[threadIdx.x / 32 + mepgen_w];",
                f"{ind}}}"]

    @staticmethod
    def _vector_loop(src, m, plan, tpr, lane, acc, scalar) -> list[str]:
        """The row loop with 128-bit loads behind a run-time alignment guard; `scalar` is the fallback."""
        s = m["loop"]
        loop, ind, q = s.loop, "    ", "mepgen_j4"
        etypes = {name: element_type(src.param(name).type) for _, name, _ in plan["loads"].values()}
        vtypes = {t: f"mepgen_vec{i}" for i, t in enumerate(sorted(set(etypes.values())))}
        aligned = [f"reinterpret_cast<unsigned long long>({n}) % 16 == 0" for n in plan["pointers"]]
        guard = " && ".join(aligned + plan["guards"])
        addend_s, addend_e = src.span(s.addend)
        edits = []
        for c in _subscripts(src, s.addend):
            key = squash(src.src(c))
            if key in plan["loads"]:
                a, b = src.span(c)
                edits.append((a - addend_s, b - addend_s, f"{plan['loads'][key][0]}.c[mepgen_k]"))
        addend = src.text[addend_s:addend_e]
        for a, b, new in sorted(edits, reverse=True):
            addend = addend[:a] + new + addend[b:]
        var = re.escape(loop.var)
        out = [f"struct __align__(16) {v} {{ {t} c[{LANES}]; }};" for t, v in vtypes.items()]
        out += [f"if ({guard}) {{",
                f"{ind}#pragma unroll 4",        # several 128-bit loads in flight per lane
                f"{ind}for (int {q} = ({loop.lo}) + {LANES} * {lane}; {q} + {LANES - 1} < {loop.hi}; "
                f"{q} += {LANES * tpr}) {{"]
        for v, name, index in plan["loads"].values():
            vt = vtypes[etypes[name]]
            at = re.sub(rf"\b{var}\b", q, index)
            out.append(f"{ind * 2}const {vt} {v} = *reinterpret_cast<const {vt}*>(&{name}[{at}]);")
        out += [f"{ind * 2}#pragma unroll",
                f"{ind * 2}for (int mepgen_k = 0; mepgen_k < {LANES}; ++mepgen_k) {{",
                f"{ind * 3}const int {loop.var} = {q} + mepgen_k;",
                f"{ind * 3}(void){loop.var};",
                f"{ind * 3}{acc} += {addend};",
                f"{ind * 2}}}",
                f"{ind}}}",
                f"{ind}for (int {loop.var} = ({loop.lo}) + (({loop.hi}) - ({loop.lo})) / {LANES} * {LANES} + {lane}; "
                f"{loop.var} < {loop.hi}; {loop.var} += {tpr}) {{",
                f"{ind * 2}{acc} += {src.src(s.addend)};",
                f"{ind}}}",
                "} else {",
                *[f"{ind}{line}" for line in scalar],
                "}"]
        return out


def _decl_type(decl: str, name: str) -> str:
    """The type of `TYPE name = ...` as written (`size_t` of `size_t i = ...`), `const int` where none is."""
    return re.split(rf"\b{re.escape(name)}\b", decl.rstrip().rstrip(";"), maxsplit=1)[0].strip() or "const int"


def _subscripts(src: KernelSource, expr) -> list:
    """The outermost `p[i]` cursors in `expr` (an index that itself reads memory is inside its access)."""
    out = []

    def visit(c):
        if kind(c) == "ARRAY_SUBSCRIPT_EXPR":
            out.append(c)
            return
        for k in c.get_children():
            visit(k)
    visit(expr)
    return out


def _init_expr(src: KernelSource, loop):
    """The cursor of the loop counter's start (`0` of `int j = 0`, or of `j = 0`)."""
    init = list(loop.cursor.get_children())[0]
    for c in walk(init):
        if kind(c) == "VAR_DECL" and list(c.get_children()):
            return list(c.get_children())[-1]
    kids = list(init.get_children())
    return kids[-1] if kids else init
