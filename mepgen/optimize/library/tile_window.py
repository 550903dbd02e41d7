"""Shared-memory window for a 1-D windowed sum (a convolution, a moving average): each block stages the
inputs its outputs read, plus the window's span, once; every tap then reads shared memory.

One thread per output reading `x[i + t]` for t in [0, W) reads each input W times from neighbouring
threads. Those reads hit L1, but a warp's read at a tap offset that is not a multiple of 32 elements spans
two cache lines, so the load pipeline, not DRAM, sets the pace (a 15-tap filter on H200: 43% of peak
bandwidth). The window loads each input once per block, coalesced, then `__syncthreads()`; the taps read
consecutive shared-memory words (no bank conflicts). Each thread also computes R outputs, `block` apart,
so the span W-1 is loaded once per R*block outputs instead of once per block.

That still leaves W shared-memory reads per output, and a warp's shared read is one wavefront: the same
pipe the L1 uses, so a 15-tap filter stays near half of peak bandwidth. With `reuse=registers` (4-byte
elements, R of 4 or 8) a thread instead computes R *consecutive* outputs: it copies the R + W - 1 tile
elements they read into registers with 128-bit shared loads (the tile is 16-byte aligned and each thread's
first element a multiple of 4), then every tap reads a register: (R + W - 1) / 4 shared reads for R outputs
instead of R * W. The tap loops are unrolled so that every register index is a constant, and the pointer
parameters get `__restrict__` (restrict_ldg's aliasing rules). Where all R outputs are inside the guard a
fast path runs them without the per-output test, so loads of a filter in global memory are shared by the R
outputs. A thread's consecutive outputs would make each warp store strided, so when the guard writes one
output buffer once, `out[i] = ...` (and nothing else uses it), the outputs go through a shared tile
(128-bit writes) and are stored by consecutive threads, still only below the bound. Measured on H200
(`bench/results/variant_profile_window_registers.md`): conv1d_taps 58.7% of peak with the shared window,
64.7% with registers (256 x 8); kernels' conv1d 50.1% -> 67.0%.

`reuse=vector` (the default) drops the shared tile: a thread loads the R + W - 1 elements its R consecutive
outputs read with 128-bit reads straight from global memory (neighbouring threads' reads overlap and hit in L1)
and stores its outputs 16 bytes at a time when the store is `out[i] = ...` as above. There is no barrier, and a
15-tap filter issues 5 loads for 4 outputs instead of 60. The fast path runs only where the outputs are inside
the guard, the rounded-up read stays inside what the original reads (`i0 + n <= BOUND + span`) and both addresses
are 16-byte aligned, tested at run time; other threads run the original per output. Measured on H200
(`bench/results/window_stencil_variants.md`): a hand-written equivalent of conv1d_taps at 128 x 4 runs at 90% of
peak against 69% for registers (128 x 8).

Applies to exactly: `i = blockIdx.x*blockDim.x + threadIdx.x; if (i < BOUND) {...}` where every read of
the windowed array (an `in` buffer the kernel never writes) inside the guard is `x[i + OFFSET]`, OFFSET
a sum of non-negative constants and counters of for loops with constant bounds (literals or macros), so
the largest offset is proven. The block must be a macro or literal the grid is derived from, and the
kernel must not use blockDim/gridDim beyond its index, shared memory, barriers or early returns. A tile
element is loaded only where the original could read (`g < BOUND + span`), never past it.
"""
from __future__ import annotations

import re

from .affine import poly
from .analysis import array_stores, canonical_loop, element_type, guarded_thread, only_use, size_expr, squash
from .base import Rewrite, Transformation
from ...cexpr import with_block
from .launch_config import _token
from .launch_facts import _bounds_value
from .restrict import restrict_edits, unrestricted_pointers
from .source import KernelSource, Refused, kind, walk

BYTES = {"float": 4, "int": 4, "unsigned int": 4, "double": 8}
MAX_SHARED = 48 * 1024
BLOCKS, PER_THREAD = [256, 128, 512], [4, 2, 8, 1]     # in the order a person would try them
REUSE = ["vector", "registers", "shared"]
VECTOR = {"float": "float4", "int": "int4", "unsigned int": "uint4"}   # 4-byte elements, 4 per 128-bit read


class TileWindow(Transformation):
    def __init__(self):
        super().__init__("tile_window", "shared-memory window (input + span) for 1-D windowed sums",
                         {"block": 128, "per_thread": 4, "reuse": "vector"})

    def _match(self, src: KernelSource, spec, launch):
        g = guarded_thread(src, "thread", "every thread must reach the barrier")
        i, i_decl, guard, bound = g.var, g.decl, g.guard, g.bound
        counters = self._counters(src, spec, guard)
        windows = {}
        for c in walk(guard):
            if kind(c) != "ARRAY_SUBSCRIPT_EXPR":
                continue
            base, index = list(c.get_children())
            name = squash(src.src(base))
            p = src.param(name)
            sp = next((q for q in spec.params if q.name == name), None)
            if p is None or not p.pointer or sp is None or sp.role != "in" or i not in src.refs(index):
                continue
            windows.setdefault(name, []).append((c, self._offset(src, index, i, counters)))
        if not windows:
            raise Refused(f"no input array is read at `{i} + offset` inside the guard")
        name, reads = max(windows.items(), key=lambda kv: len(kv[1]))
        if max(hi for _, (_, hi, _) in reads) - min(lo for _, (lo, _, _) in reads) < 2:
            raise Refused(f"{name} is read at fewer than 3 offsets per thread: too small a window to share")
        for c in walk(src.body):       # every use of the array must be one of the proven reads
            if kind(c) == "DECL_REF_EXPR" and c.spelling == name and \
                    not any(src.span(r)[0] <= src.span(c)[0] < src.span(r)[1] for r, _ in reads):
                raise Refused(f"{name} is used other than as {name}[{i} + offset]")
        token = _token(launch["block"][0]) if len(launch["block"]) == 1 else ""
        if not (token.isidentifier() or token.isdigit()):
            raise Refused(f"the block `{launch['block']}` is not one macro or literal")
        if not re.search(rf"(?<![\w.]){re.escape(token)}(?![\w.])", launch["grid"][0]) or len(launch["grid"]) != 1:
            raise Refused(f"the grid `{launch['grid']}` is not derived from the block `{token}`")
        if token.isidentifier() and re.search(rf"\b{re.escape(token)}\b", src.head + src.src(src.body)):
            raise Refused(f"the kernel bakes the block size {token} in")
        span_num = max(hi for _, (_, hi, _) in reads)
        span_txt = max(((hi, txt) for _, (_, hi, txt) in reads), key=lambda t: t[0])[1]
        ctype = element_type(src.param(name).type)
        if ctype not in BYTES:
            raise Refused(f"{name} holds {ctype}: the window supports {', '.join(BYTES)}")
        return dict(i=i, i_decl=i_decl, guard=guard, bound=bound, array=name, reads=reads, span=span_num,
                    span_txt=span_txt, ctype=ctype, token=token)

    @staticmethod
    def _counters(src, spec, guard) -> dict[str, tuple[int, int, str]]:
        """For loops inside the guard with constant bounds: counter -> (lo, hi - 1, text of hi - 1)."""
        out = {}
        for c in walk(guard):
            if kind(c) != "FOR_STMT":
                continue
            try:
                loop = canonical_loop(src, c)
            except Refused:
                continue
            lo, hi = spec.size(size_expr(src, spec, loop.lo)), spec.size(size_expr(src, spec, loop.hi))
            if loop.step == "1" and lo is not None and hi is not None and lo >= 0:
                out[loop.var] = (lo, hi - 1, f"(({squash(loop.hi)}) - 1)")
        return out

    @staticmethod
    def _offset(src, index, i, counters) -> tuple[int, int, str]:
        """The (smallest, largest, largest as C text) offset of `x[i + ...]`; Refused unless proven."""
        try:
            p = poly(src, index, {})
        except (Refused, ValueError) as e:
            raise Refused(f"the window index `{squash(src.src(index))}` is not affine ({e})") from None
        if p.get((i,)) != 1 or any(i in m for m in p if m != (i,)):
            raise Refused(f"`{squash(src.src(index))}` does not move by one element per thread")
        lo = hi = 0
        txt = []
        for mono, coef in p.items():
            if mono == (i,):
                continue
            if not mono:
                lo, hi = lo + coef, hi + coef
                txt.append(str(coef))
            elif len(mono) == 1 and mono[0] in counters and coef > 0:
                a, b, t = counters[mono[0]]
                lo, hi = lo + coef * a, hi + coef * b
                txt.append(t if coef == 1 else f"{coef} * {t}")
            else:
                raise Refused(f"`{squash(src.src(index))}`: the term {'*'.join(mono)} is not a counter of a loop "
                              "with constant bounds")
        if lo < 0:
            raise Refused(f"`{squash(src.src(index))}` reads before {i} (offset {lo}): only forward windows are tiled")
        return lo, hi, " + ".join(txt) or "0"

    @staticmethod
    def _legal(src, spec, m) -> list[tuple[int, int, str]]:
        """(block, outputs per thread, reuse) triples whose window fits shared memory and the launch bounds;
        registers and vector only for 4-byte elements and 4 or 8 outputs per thread (whole 128-bit reads)."""
        item = BYTES[m["ctype"]]
        legal = [(b, r, u) for b in BLOCKS for r in PER_THREAD for u in REUSE
                 if (u == "vector" or ((2 if u == "registers" else 1) * b * r + m["span"] + 3) * item <= MAX_SHARED)
                 and (u == "shared" or (m["ctype"] in VECTOR and r % 4 == 0))]
        if src.has_launch_bounds():
            cap = _bounds_value(src, spec)
            legal = [(b, r, u) for b, r, u in legal if cap is not None and b <= cap]
        if not legal:
            raise Refused("no block fits the window in shared memory and the launch bounds")
        return legal

    def space(self, src, spec, launch):
        legal = self._legal(src, spec, self._match(src, spec, launch))
        return {"block": sorted({b for b, _, _ in legal}, key=BLOCKS.index),
                "per_thread": sorted({r for _, r, _ in legal}, key=PER_THREAD.index),
                "reuse": sorted({u for _, _, u in legal}, key=REUSE.index)}

    def apply(self, src, spec, launch, params):
        m = self._match(src, spec, launch)
        b, r = int(params.get("block", 256)), int(params.get("per_thread", 4))
        u = str(params.get("reuse", "shared"))
        if (b, r, u) not in self._legal(src, spec, m):
            raise Refused(f"block {b} x {r} outputs per thread with {u} reuse is not legal here")
        if u == "registers":
            return self._registers(src, spec, launch, m, b, r)
        if u == "vector":
            return self._vector(src, spec, launch, m, b, r)
        i, arr, win = m["i"], m["array"], "mepgen_win"
        i_type = _index_type(src, m)
        size = f"{b * r} + {m['span_txt']}"
        guard_s, guard_e = src.span(m["guard"])
        edits = []
        for c, _ in m["reads"]:
            s, e = src.span(c)
            index = src.src(list(c.get_children())[1])
            edits.append((s - guard_s, e - guard_s, f"{win}[({index}) - mepgen_base]"))
        guard = src.text[guard_s:guard_e]
        for a, z, new in sorted(edits, reverse=True):
            guard = guard[:a] + new + guard[z:]
        column = guard_s - (src.text.rfind("\n", 0, guard_s) + 1)
        ind = "    "
        body = ["{",
                f"{ind}// mepgen tile_window: {arr} staged in shared memory ({b * r} outputs per block + the window's "
                f"span), {r} outputs per thread",
                f"{ind}__shared__ {m['ctype']} {win}[{size}];",
                f"{ind}const long long mepgen_base = (long long)blockIdx.x * {b * r};",
                f"{ind}for (int mepgen_e = threadIdx.x; mepgen_e < {size}; mepgen_e += {b}) {{",
                f"{ind * 2}if (mepgen_base + mepgen_e < (long long)({m['bound']}) + {m['span_txt']}) {{",
                f"{ind * 3}{win}[mepgen_e] = {arr}[mepgen_base + mepgen_e];",
                f"{ind * 2}}}",
                f"{ind}}}",
                f"{ind}__syncthreads();",
                f"{ind}#pragma unroll",
                f"{ind}for (int mepgen_r = 0; mepgen_r < {r}; ++mepgen_r) {{",
                f"{ind * 2}{i_type} {i} = (int)(mepgen_base + mepgen_r * {b} + threadIdx.x);",
                *[f"{ind * 2}{line}" for line in _dedent(guard, column).splitlines()],
                f"{ind}}}",
                "}"]
        start, end = src.span(src.body)
        text = src.replace([(start, end, "\n".join(body))])
        grid = [with_block(launch["grid"][0], m["token"], b * r)]
        return Rewrite(text, f"tile_window: every read of {arr}[{i} + offset] served from a shared-memory window "
                             f"({b * r} outputs + span {m['span']} loaded once per block, coalesced), {r} outputs "
                             f"per thread; launch {b}-thread blocks",
                       {"grid": grid, "block": [str(b)], "shared_mem": str(launch.get("shared_mem", "0"))})

    def _register_body(self, src, spec, m) -> tuple[list[str], tuple | None]:
        """The guard's body for one of a thread's consecutive outputs: reads of the window from the register
        copy `mepgen_reg` (index mepgen_r + offset), the staged store (if any) into `mepgen_o[mepgen_r]`, tap
        loops unrolled; dedented to the guard's column. Also the coalescible store (or None)."""
        i, arr, reg = m["i"], m["array"], "mepgen_reg"
        then = list(m["guard"].get_children())[1]
        then_s, then_e = src.span(then)
        edits = []                                  # offsets into the guard's body
        for c, _ in m["reads"]:
            s, e = src.span(c)
            if not then_s <= s < then_e:
                raise Refused(f"{arr} is read in the guard's condition: registers need the reads inside it")
            index = src.src(list(c.get_children())[1])
            edits.append((s - then_s, e - then_s, f"{reg}[mepgen_r + (({index}) - ({i}))]"))
        store = _coalescible_store(src, spec, m)
        if store is not None:
            s, e = src.span(store[0])
            edits.append((s - then_s, e - then_s, "mepgen_o[mepgen_r]"))
        counters = self._counters(src, spec, m["guard"])
        for c in walk(then):                        # tap loops fully unrolled: every register index a constant
            if kind(c) != "FOR_STMT" or src.has_pragma(c):
                continue
            try:
                var = canonical_loop(src, c).var
            except Refused:
                continue
            if var in counters:
                s = src.span(c)[0]
                before = src.text[src.text.rfind("\n", 0, s) + 1:s]
                indent = before if not before.strip() else ""
                edits.append((s - then_s, s - then_s, f"#pragma unroll\n{indent}"))
        body_text = src.text[then_s:then_e]
        for a, z, new in sorted(edits, reverse=True):
            body_text = body_text[:a] + new + body_text[z:]
        g0 = src.span(m["guard"])[0]
        column = g0 - (src.text.rfind("\n", 0, g0) + 1)
        return _dedent(body_text, column).splitlines(), store

    def _registers(self, src, spec, launch, m, b: int, r: int) -> Rewrite:
        """R consecutive outputs per thread from a register copy of the tile elements they read."""
        i, arr, win, reg = m["i"], m["array"], "mepgen_win", "mepgen_reg"
        i_type = _index_type(src, m)
        ctype, vec = m["ctype"], VECTOR[m["ctype"]]
        size = f"({b * r} + {m['span_txt']} + 3) / 4 * 4"
        nreg = f"({r} + {m['span_txt']} + 3) / 4 * 4"
        cond = list(m["guard"].get_children())[0]
        body_lines, store = self._register_body(src, spec, m)
        ind = "    "
        lanes = ", ".join(f"mepgen_v.{c}" for c in "xyzw")

        def outputs(lines: list[str]) -> list[str]:
            """The thread's R outputs, each running `lines` with the thread index at that output."""
            return [f"{ind * 2}#pragma unroll", f"{ind * 2}for (int mepgen_r = 0; mepgen_r < {r}; ++mepgen_r) {{",
                    f"{ind * 3}{i_type} {i} = (int)(mepgen_i0 + mepgen_r);",
                    *[f"{ind * 3}{line}" for line in lines], f"{ind * 2}}}"]

        body = ["{",
                f"{ind}// mepgen tile_window: {arr} staged in shared memory ({b * r} outputs per block + the window's "
                f"span); each thread computes {r} consecutive outputs from a register copy of the elements they read",
                f"{ind}__shared__ __align__(16) {ctype} {win}[{size}];",
                f"{ind}const long long mepgen_base = (long long)blockIdx.x * {b * r};",
                f"{ind}for (int mepgen_e = threadIdx.x; mepgen_e < {size}; mepgen_e += {b}) {{",
                f"{ind * 2}{win}[mepgen_e] = mepgen_base + mepgen_e < (long long)({m['bound']}) + {m['span_txt']}",
                f"{ind * 2}    ? {arr}[mepgen_base + mepgen_e] : ({ctype})0;",
                f"{ind}}}",
                f"{ind}__syncthreads();",
                f"{ind}{ctype} {reg}[{nreg}];",
                f"{ind}#pragma unroll",
                f"{ind}for (int mepgen_q = 0; mepgen_q < ({nreg}) / 4; ++mepgen_q) {{",
                f"{ind * 2}const {vec} mepgen_v = reinterpret_cast<const {vec}*>({win})[threadIdx.x * {r // 4} + mepgen_q];",
                f"{ind * 2}const {ctype} mepgen_l[4] = {{{lanes}}};",
                f"{ind * 2}#pragma unroll",
                f"{ind * 2}for (int mepgen_c = 0; mepgen_c < 4; ++mepgen_c) {reg}[4 * mepgen_q + mepgen_c] = mepgen_l[mepgen_c];",
                f"{ind}}}",
                *([f"{ind}{store[2]} mepgen_o[{r}] = {{}};"] if store is not None else []),
                f"{ind}const long long mepgen_i0 = mepgen_base + threadIdx.x * {r};",
                f"{ind}if (mepgen_i0 + {r - 1} < (long long)({m['bound']})) {{   // all {r} outputs inside the guard",
                *outputs(body_lines),
                f"{ind}}} else {{",
                *outputs([f"if ({src.src(cond)}) " + body_lines[0], *body_lines[1:]]),
                f"{ind}}}",
                *(self._store_back(store, m, b, r, ind) if store is not None else []),
                "}"]
        text, grid, what = _restricted_body(src, spec, launch, m, body, b * r)
        if store is not None:
            what += f"; {store[1]}[{i}] written back through shared memory, coalesced"
        return Rewrite(text, f"tile_window: every read of {arr}[{i} + offset] served from registers: {arr} staged in "
                             f"shared memory ({b * r} outputs + span {m['span']} loaded once per block, coalesced), "
                             f"each thread computing {r} consecutive outputs from the {r} + {m['span']} elements they "
                             f"read, copied with 128-bit shared loads{what}; launch {b}-thread blocks",
                       {"grid": grid, "block": [str(b)], "shared_mem": str(launch.get("shared_mem", "0"))})

    def _vector(self, src, spec, launch, m, b: int, r: int) -> Rewrite:
        """R consecutive outputs per thread from 128-bit loads straight from global memory: no shared tile, no
        barrier. Neighbouring threads' loads overlap (the window's span) and hit in L1; the load count per output
        falls from W to (R + W - 1) / (4 R)."""
        i, arr, reg = m["i"], m["array"], "mepgen_reg"
        i_type = _index_type(src, m)
        ctype, vec = m["ctype"], VECTOR[m["ctype"]]
        nreg = f"({r} + {m['span_txt']} + 3) / 4 * 4"
        body_lines, store = self._register_body(src, spec, m)
        g0, g1 = src.span(m["guard"])
        column = g0 - (src.text.rfind("\n", 0, g0) + 1)
        original = _dedent(src.text[g0:g1], column).splitlines()
        ind = "    "
        lanes = ", ".join(f"mepgen_v.{c}" for c in "xyzw")
        aligned = [f"(reinterpret_cast<unsigned long long>({arr} + mepgen_i0) & 15) == 0"]
        if store is not None:
            aligned.append(f"(reinterpret_cast<unsigned long long>({store[1]} + mepgen_i0) & 15) == 0")
        fast = [f"mepgen_i0 + {r - 1} < (long long)({m['bound']})",
                f"mepgen_i0 + ({nreg}) <= (long long)({m['bound']}) + {m['span_txt']}", *aligned]
        body = ["{",
                f"{ind}// mepgen tile_window: each thread computes {r} consecutive outputs from a register copy of the "
                f"{r} + span elements of {arr} they read, loaded with 128-bit reads straight from global memory",
                f"{ind}const long long mepgen_i0 = ((long long)blockIdx.x * {b} + threadIdx.x) * {r};",
                f"{ind}if ({' && '.join(fast)}) {{",
                f"{ind * 2}// all {r} outputs inside the guard, every element read inside what the original reads, "
                f"aligned",
                f"{ind * 2}{ctype} {reg}[{nreg}];",
                f"{ind * 2}#pragma unroll",
                f"{ind * 2}for (int mepgen_q = 0; mepgen_q < ({nreg}) / 4; ++mepgen_q) {{",
                f"{ind * 3}const {vec} mepgen_v = reinterpret_cast<const {vec}*>({arr} + mepgen_i0)[mepgen_q];",
                f"{ind * 3}const {ctype} mepgen_l[4] = {{{lanes}}};",
                f"{ind * 3}#pragma unroll",
                f"{ind * 3}for (int mepgen_c = 0; mepgen_c < 4; ++mepgen_c) {reg}[4 * mepgen_q + mepgen_c] = "
                f"mepgen_l[mepgen_c];",
                f"{ind * 2}}}",
                *([f"{ind * 2}{store[2]} mepgen_o[{r}];"] if store is not None else []),
                f"{ind * 2}#pragma unroll",
                f"{ind * 2}for (int mepgen_r = 0; mepgen_r < {r}; ++mepgen_r) {{",
                f"{ind * 3}{i_type} {i} = (int)(mepgen_i0 + mepgen_r);",
                *[f"{ind * 3}{line}" for line in body_lines],
                f"{ind * 2}}}"]
        if store is not None:
            svec = VECTOR[store[2]]
            body += [f"{ind * 2}#pragma unroll",
                     f"{ind * 2}for (int mepgen_q = 0; mepgen_q < {r // 4}; ++mepgen_q) {{",
                     f"{ind * 3}reinterpret_cast<{svec}*>({store[1]} + mepgen_i0)[mepgen_q] = make_{svec}("
                     f"mepgen_o[4 * mepgen_q], mepgen_o[4 * mepgen_q + 1], mepgen_o[4 * mepgen_q + 2], "
                     f"mepgen_o[4 * mepgen_q + 3]);",
                     f"{ind * 2}}}"]
        body += [f"{ind}}} else {{",
                 f"{ind * 2}for (int mepgen_r = 0; mepgen_r < {r}; ++mepgen_r) {{",
                 f"{ind * 3}{i_type} {i} = (int)(mepgen_i0 + mepgen_r);",
                 *[f"{ind * 3}{line}" for line in original],
                 f"{ind * 2}}}",
                 f"{ind}}}",
                 "}"]
        text, grid, what = _restricted_body(src, spec, launch, m, body, b * r)
        if store is not None:
            what += f"; {store[1]}[{i}] stored {r // 4 * 16} bytes at a time"
        return Rewrite(text, f"tile_window: every read of {arr}[{i} + offset] served from registers: each thread "
                             f"computes {r} consecutive outputs from the {r} + {m['span']} elements they read, loaded "
                             f"with 128-bit reads from global memory (no shared tile; neighbouring threads' reads "
                             f"overlap in L1); a fast path where the thread's outputs are inside the guard and its "
                             f"addresses 16-byte aligned, the original per output elsewhere{what}; launch {b}-thread "
                             f"blocks",
                       {"grid": grid, "block": [str(b)], "shared_mem": str(launch.get("shared_mem", "0"))})

    @staticmethod
    def _store_back(store, m, b: int, r: int, ind: str) -> list[str]:
        """The R outputs of each thread through a shared tile (128-bit writes), then
        written to global memory by consecutive threads, only where the original wrote (below the bound)."""
        _, out, ctype = store
        vec = VECTOR[ctype]
        put = [f"{ind}#pragma unroll",
               f"{ind}for (int mepgen_q = 0; mepgen_q < {r // 4}; ++mepgen_q) {{",
               f"{ind * 2}reinterpret_cast<{vec}*>(mepgen_otile)[threadIdx.x * {r // 4} + mepgen_q] = "
               f"make_{vec}(mepgen_o[4 * mepgen_q], mepgen_o[4 * mepgen_q + 1], mepgen_o[4 * mepgen_q + 2], "
               f"mepgen_o[4 * mepgen_q + 3]);",
               f"{ind}}}"]
        return [f"{ind}__shared__ __align__(16) {ctype} mepgen_otile[{b * r}];", *put,
                f"{ind}__syncthreads();",
                f"{ind}for (int mepgen_e = threadIdx.x; mepgen_e < {b * r}; mepgen_e += {b}) {{",
                f"{ind * 2}if (mepgen_base + mepgen_e < (long long)({m['bound']})) {{",
                f"{ind * 3}{out}[mepgen_base + mepgen_e] = mepgen_otile[mepgen_e];",
                f"{ind * 2}}}",
                f"{ind}}}"]


def _restricted_body(src, spec, launch, m, body: list[str], per_block: int) -> tuple[str, list[str], str]:
    """The kernel with `body` as its body and `__restrict__` where restrict_ldg's rules allow; the grid for
    `per_block` outputs per block; the explanation's note on the pointers restricted."""
    try:
        restrict = unrestricted_pointers(src, spec)
    except Refused:
        restrict = []
    start, end = src.span(src.body)
    text = src.replace(sorted(restrict_edits(src, restrict) + [(start, end, "\n".join(body))]))
    what = f"; __restrict__ on {', '.join(p.name for p in restrict)}" if restrict else ""
    return text, [with_block(launch["grid"][0], m["token"], per_block)], what


def _index_type(src, m) -> str:
    """The declared type of the thread index (`const int` when it cannot be read off its declaration)."""
    i_text = src.src(m["i_decl"]).rstrip().rstrip(";")
    found = re.match(rf"^(.*?)\b{re.escape(m['i'])}\b", i_text, re.S)
    return (found.group(1).strip() if found else "") or "const int"


def _coalescible_store(src, spec, m):
    """(the `out[i]` cursor, out, its element type) when the guard's body writes an output buffer exactly once,
    as a statement of its own `out[i] = ...` (so every output below the bound is written), and the kernel
    uses that buffer nowhere else; None otherwise (the outputs are then stored where they are computed)."""
    roles = {q.name: q.role for q in spec.params}
    found = [(lhs, name, ctype) for lhs, name, ctype in array_stores(src, list(m["guard"].get_children())[1])
             if roles.get(name) in ("out", "inout") and squash(src.src(list(lhs.get_children())[1])) == m["i"]]
    if len(found) != 1 or not only_use(src, found[0][1]) or found[0][2] not in VECTOR:
        return None     # 4-byte outputs: the tile fits where _legal counted it
    return found[0]


def _dedent(text: str, column: int) -> str:
    """A statement cut out at `column`: its later lines lose that indentation (where they have it)."""
    lines = text.splitlines()
    return "\n".join([lines[0]] + [ln[column:] if ln[:column].strip() == "" else ln for ln in lines[1:]])
