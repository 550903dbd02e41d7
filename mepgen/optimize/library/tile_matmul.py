"""Shared-memory + register tiling of a one-thread-per-output matrix product.

A naive product reads every element of A and B from global memory once per output that uses it (N
times); a block computing a TILE x TILE output tile stages TILE x BK slices of both factors in shared
memory (loaded cooperatively, coalesced along whichever index is contiguous in memory, so the
transposed variant `A[p*M + row]` loads as well as `A[row*K + p]`), then each thread accumulates RM
outputs of one column in registers, reusing each B value RM times; with RN > 1, an RM x RN block of
outputs, loading RM values of A and RN of B from shared memory per step for RM*RN FMAs: the register
tiling that brings a product near the FP32 roofline. The block of outputs is in 16-byte groups per thread
(`layout` quads, first: consecutive threads read consecutive 16-byte groups), contiguous per thread (packed) or
strided by the thread counts (one value per read), and
the next slice can be loaded into registers while the current one is used (`prefetch`, first:
staged_slices). Sizes not divisible by the tile are
handled by zero-filling out-of-range tile elements (adding 0*x leaves a sum unchanged) and by the
original guard around the epilogue. The triangular (rank-k update) variant skips the blocks that lie
entirely outside the triangle. The accumulation order over p is the original's, so the sums are the
same up to the compiler's FMA contraction. Launch: TILE/RN x TILE/RM threads, one block per output tile.
"""
from __future__ import annotations

import math
import re

from .base import Rewrite, Transformation
from .matmul_match import bound_sizes, match_matmul
from .source import Refused, kind, walk


class TileMatmul(Transformation):
    def __init__(self):
        super().__init__("tile_matmul", "shared-memory and register tiling of matrix products",
                         {"tile": 64, "rm": 4, "rn": 4, "bk": 16, "layout": "quads", "prefetch": 1})

    def space(self, src, spec, launch):
        bound_sizes(spec, match_matmul(src, spec), src)
        cap = _thread_cap(src, spec)
        shapes = [(t, rm, rn) for t in (64, 128, 32, 16) for rm in (4, 8, 2, 1) for rn in (4, 8, 1, 2)
                  if _legal(t, rm, cap, rn)]
        if not shapes:
            raise Refused("__launch_bounds__ leaves no legal tile shape")
        return {"tile": sorted({x[0] for x in shapes}, key=(64, 128, 32, 16).index),
                "rm": sorted({x[1] for x in shapes}, key=(4, 8, 2, 1).index),
                "rn": sorted({x[2] for x in shapes}, key=(4, 8, 1, 2).index), "bk": [16, 8, 32],
                "layout": list(LAYOUTS), "prefetch": [1, 0]}

    def first_point(self, src, spec, launch):
        """8 x 4 outputs per thread in 64 x 64 tiles for a plain multiply-add product whose output is at least 256 in
        both dimensions at the MEP's sizes: 12 shared-memory reads per 32 FMAs instead of 8 per 16 (qkv's matmul on
        H100 through the evaluator: 35.1x against 30.0x at 4 x 4, bench/results/library_speedup_corpus_2026-11-27b.md).
        A generalized step (`sqrtf(a * b)`, `powf(fabsf(a - b), p)`) keeps 4 x 4: its special functions, not the
        shared-memory reads, bound it (hellinger 2.78x at 4 x 4, 2.70x at 8 x 4; minkowski 5.72x, 5.39x)."""
        m = match_matmul(src, spec)
        sizes = bound_sizes(spec, m, src)
        extents = [spec.size(sizes[side]) for side in ("row", "col")]
        if m.addend is None and all(e is not None and e >= 256 for e in extents) and \
                _legal(64, 8, _thread_cap(src, spec), 4):
            return {**self.defaults, "rm": 8}
        return self.defaults

    def apply(self, src, spec, launch, params):
        m = match_matmul(src, spec)
        sizes = bound_sizes(spec, m, src)
        t, rm, bk = int(params.get("tile", 32)), int(params.get("rm", 4)), int(params.get("bk", 16))
        rn = int(params.get("rn", 1))
        layout = _layout(params) if rn > 1 else "strided"
        prefetch = _prefetch(params, rn > 1)
        cap = _thread_cap(src, spec)
        if not _legal(t, rm, cap, rn) or bk not in (8, 16, 32):
            raise Refused(f"tile {t}, rm {rm}, rn {rn}, bk {bk} is not a legal shape here")
        tx, ty = t // rn, t // rm
        nt = tx * ty
        if prefetch and (t * bk) % nt:
            raise Refused(f"a {t}x{bk} slice does not divide among {nt} threads: no prefetch")
        check_shared(slices_bytes(canonical_type(src, m.acc, m.acc_type), bk, t, layout),
                     f"a {t}x{bk} tile of {m.acc_type}")
        T = m.acc_type
        g = quad(canonical_type(src, m.acc, T))
        lo, hi = m.loop.lo, m.loop.hi
        names = {m.row: "mepgen_gr", m.col: "mepgen_gc", m.loop.var: "mepgen_gk"}
        i = "    "
        per_thread = f"{rm}x{rn}" if rn > 1 else f"{rm}"
        body = ["{"] + ([i + src.src(m.col_stmt).strip()] if rn == 1 else []) + [
                f"{i}// mepgen tile_matmul: {t}x{t} output tile per block, {bk}-deep slices of both factors "
                f"in shared memory, {per_thread} outputs per thread in registers"]
        if m.triangle == "lower":
            body.append(f"{i}if (blockIdx.x > blockIdx.y) return;   // the whole tile lies above the diagonal")
        elif m.triangle == "upper":
            body.append(f"{i}if (blockIdx.x < blockIdx.y) return;   // the whole tile lies below the diagonal")
        body += [*shared_tiles(T, bk, t, layout, i),
                 f"{i}const int mepgen_tid = (int)threadIdx.y * {tx} + (int)threadIdx.x;",
                 f"{i}const int mepgen_r0 = (int)blockIdx.y * {t};",
                 f"{i}const int mepgen_c0 = (int)blockIdx.x * {t};",
                 *(_per_output_init(src, m, T, rm, rn, tx, ty, i, layout, g) if m.init_per_output else
                   [f"{i}{T} mepgen_acc[{rm}];", f"{i}#pragma unroll",
                    f"{i}for (int mepgen_q = 0; mepgen_q < {rm}; ++mepgen_q) mepgen_acc[mepgen_q] = {m.init};"]
                   if rn == 1 else
                   [f"{i}{T} mepgen_acc[{rm}][{rn}];", f"{i}#pragma unroll",
                    f"{i}for (int mepgen_q = 0; mepgen_q < {rm}; ++mepgen_q)",
                    f"{i * 2}for (int mepgen_w = 0; mepgen_w < {rn}; ++mepgen_w) mepgen_acc[mepgen_q][mepgen_w] = {m.init};"])]
        slices = []
        for op in m.operands:
            tile, tv, base = ("mepgen_As", "mepgen_gr", "mepgen_r0") if op.side == "row" else \
                ("mepgen_Bs", "mepgen_gc", "mepgen_c0")
            bound = m.bounds[op.side]
            slices.append((tile, tv, base, slice_coords(op.fast == "k", t, bk), f"{tv} < {bound} && mepgen_gk < {hi}",
                           _renamed(src, op.cursor, names), "int"))
        pre, top, bottom = staged_slices(slices, lo, hi, bk, t, nt, T, i, prefetch)
        body += pre + [f"{i}for (int mepgen_k0 = {lo}; mepgen_k0 < {hi}; mepgen_k0 += {bk}) {{"] + top[:-1] \
            if rn == 1 else pre + [f"{i}for (int mepgen_k0 = {lo}; mepgen_k0 < {hi}; mepgen_k0 += {bk}) {{"] + top
        a_first = m.operands[0].side == "row"
        prod = "mepgen_As[mepgen_kk][(int)threadIdx.y + mepgen_q * %d] * mepgen_b" % ty if a_first else \
            "mepgen_b * mepgen_As[mepgen_kk][(int)threadIdx.y + mepgen_q * %d]" % ty
        prod = _addend(src, m, "mepgen_As[mepgen_kk][(int)threadIdx.y + mepgen_q * %d]" % ty, "mepgen_b") or prod
        if rn > 1:
            body += _register_tile(m, src, T, bk, rm, rn, tx, ty, a_first, i, layout, bottom, g)
            body += [f"{i * 2}}}", f"{i}}}", "}"]
            return self._rewrite(src, m, sizes, body, t, bk, tx, ty, per_thread)
        body += [f"{i * 2}__syncthreads();", f"{i * 2}#pragma unroll",
                 f"{i * 2}for (int mepgen_kk = 0; mepgen_kk < {bk}; ++mepgen_kk) {{",
                 *_in_range(m, i * 3),
                 f"{i * 3}const {T} mepgen_b = mepgen_Bs[mepgen_kk][threadIdx.x];",
                 f"{i * 3}#pragma unroll",
                 f"{i * 3}for (int mepgen_q = 0; mepgen_q < {rm}; ++mepgen_q) mepgen_acc[mepgen_q] += {prod};",
                 f"{i * 2}}}", f"{i * 2}__syncthreads();", f"{i}}}",
                 f"{i}#pragma unroll", f"{i}for (int mepgen_q = 0; mepgen_q < {rm}; ++mepgen_q) {{",
                 f"{i * 2}{_decl_type(src, m.row_stmt, m.row)} {m.row} = mepgen_r0 + (int)threadIdx.y + mepgen_q * {ty};",
                 f"{i * 2}if ({src.src(list(m.guard.get_children())[0])}) {{"]
        for st in m.after:
            line = _renamed(src, st, {m.acc: "mepgen_acc[mepgen_q]"})
            body.append(i * 3 + line + ("" if line.rstrip().endswith(("}", ";")) else ";"))
        body += [f"{i * 2}}}", f"{i}}}", "}"]
        return self._rewrite(src, m, sizes, body, t, bk, tx, ty, per_thread)

    def _rewrite(self, src, m, sizes, body, t, bk, tx, ty, per_thread):
        text = src.replace([(*src.span(src.body), "\n".join(body))])
        shape = {"lower": " (lower triangle: tiles above the diagonal skipped)",
                 "upper": " (upper triangle: tiles below the diagonal skipped)"}.get(m.triangle, "")
        trans = [src.src(list(o.cursor.get_children())[0]).strip() for o in m.operands
                 if (o.side, o.fast) in (("row", "row"), ("col", "k"))]     # stored the other way round
        grid = [f"({sizes['col']} + {t} - 1) / {t}", f"({sizes['row']} + {t} - 1) / {t}"]
        return Rewrite(text, f"tile_matmul: {m.acc} = sum over {m.loop.var} staged through {t}x{bk} shared tiles "
                             f"of both factors{shape}{' (transposed ' + ', '.join(trans) + ')' if trans else ''}; "
                             f"{per_thread} outputs per thread in registers; launch {tx}x{ty} blocks",
                       {"grid": grid, "block": [str(tx), str(ty)], "shared_mem": "0"})


#: where a thread's RM x RN outputs lie in the block's tile: "strided" (rows threadIdx.y + q * TY, columns
#: threadIdx.x + w * TX: one value per shared-memory read), "packed" (rows threadIdx.y * RM + q, columns
#: threadIdx.x * RN + w: contiguous, read 16 bytes at a time from 16-byte aligned rows, fewer shared-memory
#: instructions per FMA; 1.15x faster than strided on qkv's matmul and 1.07x on Match1, H100,
#: bench/results/library_speedup_corpus_2026-11-27.md) or "quads" (groups of G = 16 bytes of consecutive rows or
#: columns, the thread's groups TY * G or TX * G apart: the 16-byte reads of a warp's consecutive threads are
#: consecutive, where packed 8-wide rows put two threads of each quarter warp on the same banks; first: the same
#: as packed at 4 x 4, faster at 8 wide, H100 through the evaluator: qkv's matmul 30.0x -> 35.1x at 128 x 128 of
#: 8 x 8 and 33.5x -> 35.1x at 64 x 64 of 8 x 4, Match1 73.4x -> 76.9x at 128 x 128 of 8 x 8,
#: bench/results/library_speedup_corpus_2026-11-27b.md). Either way each output is summed over k in the original
#: order.
LAYOUTS = ("quads", "packed", "strided")


def _prefetch(params, register_tile: bool = True) -> bool:
    """`prefetch` 1: the next step's slices are loaded into registers during the current step (staged_slices);
    only with a register tile (RN > 1). First: faster on every shape measured (H100: Match1 52x -> 73x at 128 x 128
    tiles of 8 x 8, qkv's matmul 26.5x -> 33.5x at 64 x 64 of 8 x 4, hellinger 2.69x -> 2.79x;
    bench/results/library_speedup_corpus_2026-11-27.md)."""
    v = int(params.get("prefetch", 0))
    if v not in (0, 1):
        raise Refused(f"prefetch {v} is not 0 or 1")
    return bool(v) and register_tile


def slice_coords(k_fast: bool, t: int, bk: int) -> list[str]:
    """Element mepgen_e of a t x bk slice: consecutive threads along k where the factor is contiguous in k (`A[row *
    K + k]`), else along the tile's rows or columns (`A[k * M + row]`): coalesced global reads either way."""
    if k_fast:
        return [f"const int mepgen_kk = mepgen_e % {bk};", f"const int mepgen_m = mepgen_e / {bk};"]
    return [f"const int mepgen_m = mepgen_e % {t};", f"const int mepgen_kk = mepgen_e / {t};"]


def _layout(params) -> str:
    layout = str(params.get("layout", "strided"))
    if layout not in LAYOUTS:
        raise Refused(f"layout {layout!r} is not one of {', '.join(LAYOUTS)}")
    return layout


MAX_SHARED = 48 * 1024      # static __shared__ per block


def type_bytes(ctype: str) -> int:
    """The size of an element type for the shared-memory budget; 8 where it is not one of the common ones."""
    t = " ".join(w for w in ctype.split() if w not in ("const", "volatile"))
    return {"float": 4, "int": 4, "unsigned": 4, "unsigned int": 4, "double": 8, "bool": 1, "char": 1,
            "signed char": 1, "unsigned char": 1, "short": 2, "unsigned short": 2, "__half": 2, "half": 2,
            "__nv_bfloat16": 2, "nv_bfloat16": 2}.get(t, 8)


def canonical_type(src, name: str, spelled: str) -> str:
    """The type of the kernel's local or parameter `name` after typedefs and macros (`real` -> `float`), for sizes;
    `spelled` where it is not found."""
    for c in walk(src.fn):
        if kind(c) in ("VAR_DECL", "PARM_DECL") and c.spelling == name:
            return c.type.get_canonical().spelling
    return spelled


def check_shared(bytes_: int, what: str) -> None:
    if bytes_ > MAX_SHARED:
        raise Refused(f"{what} needs {bytes_} bytes of shared memory, over the {MAX_SHARED} a block may declare")


def slices_bytes(T: str, bk: int, t: int, layout: str) -> int:
    return 2 * bk * (t + (1 if layout == "strided" else 4)) * type_bytes(T)


def shared_tiles(T: str, bk: int, t: int, layout: str, i: str) -> list[str]:
    """The two staged slices: rows padded by 1 against bank conflicts (strided), or by 4 elements with 16-byte
    alignment (packed, quads: vector reads need aligned rows)."""
    if layout != "strided":
        return [f"{i}__shared__ __align__(16) {T} mepgen_As[{bk}][{t + 4}];",
                f"{i}__shared__ __align__(16) {T} mepgen_Bs[{bk}][{t + 4}];"]
    return [f"{i}__shared__ {T} mepgen_As[{bk}][{t + 1}];", f"{i}__shared__ {T} mepgen_Bs[{bk}][{t + 1}];"]


def quad(T: str) -> int:
    """Elements per 16-byte group of the quads layout."""
    return max(1, 16 // type_bytes(T))


def _place(idx: str, thread: str, per: int, count: int, layout: str, g: int) -> str:
    """Where the thread's idx-th of `per` rows (columns) lies among the block tile's `count * per`. A quad is g
    elements, or fewer where `per` is not a multiple of g (2 outputs per thread: pairs; 1: strided)."""
    if layout == "packed":
        return f"(int)threadIdx.{thread} * {per} + {idx}"
    if layout == "quads":
        g = math.gcd(g, per)
        if g == 1:
            return f"(int)threadIdx.{thread} + {idx} * {count}"
        return f"({idx}) / {g} * {count * g} + (int)threadIdx.{thread} * {g} + ({idx}) % {g}"
    return f"(int)threadIdx.{thread} + {idx} * {count}"


def row_of(q: str, rm: int, ty: int, layout: str, g: int = 4) -> str:
    """The block-tile row of the thread's q-th row of outputs (g: quad(T), for the quads layout)."""
    return _place(q, "y", rm, ty, layout, g)


def col_of(w: str, rn: int, tx: int, layout: str, g: int = 4) -> str:
    return _place(w, "x", rn, tx, layout, g)


def register_loads(T: str, rm: int, rn: int, tx: int, ty: int, layout: str, i: str, g: int = 4) -> list[str]:
    """`mepgen_a[RM]`, `mepgen_b[RN]` declared and read from the staged slices at step mepgen_kk (g: quad() of the
    element type after typedefs, as for the epilogue's row_of/col_of)."""
    out = [f"{i}{T} mepgen_a[{rm}], mepgen_b[{rn}];"]
    for arr, tile, n, of in (("mepgen_a", "mepgen_As", rm, lambda v: row_of(v, rm, ty, layout, g)),
                             ("mepgen_b", "mepgen_Bs", rn, lambda v: col_of(v, rn, tx, layout, g))):
        vec = {"float": ("float4", 4), "double": ("double2", 2)}.get(T) if layout != "strided" else None
        if vec and n % vec[1] == 0:
            parts = "xyzw"[:vec[1]]
            out += [f"{i}#pragma unroll", f"{i}for (int mepgen_u = 0; mepgen_u < {n}; mepgen_u += {vec[1]}) {{",
                    f"{i}    const {vec[0]} mepgen_v = *reinterpret_cast<const {vec[0]} *>(&{tile}[mepgen_kk][{of('mepgen_u')}]);",
                    f"{i}    " + " ".join(f"{arr}[mepgen_u + {k}] = mepgen_v.{c};" for k, c in enumerate(parts)),
                    f"{i}}}"]
        else:
            idx = "mepgen_q" if arr == "mepgen_a" else "mepgen_w"
            out += [f"{i}#pragma unroll",
                    f"{i}for (int {idx} = 0; {idx} < {n}; ++{idx}) {arr}[{idx}] = {tile}[mepgen_kk][{of(idx)}];"]
    return out


def staged_slices(slices: list[tuple], lo: str, hi: str, bk: int, t: int, nt: int, T: str, i: str,
                  prefetch: bool, depth: int = 1) -> tuple[list[str], list[str], list[str]]:
    """The lines that stage each step's bk-deep slices into shared memory: (before the loop over mepgen_k0, at the
    top of its body, at its bottom; the step's computation goes between). `slices`: (tile, index variable, its
    base, coordinate lines over mepgen_e, load condition, value, index type) per factor.

    Without prefetch the threads load the slice at the top of the step and wait at both ends. With it (the tile
    divides among the threads), the next step's elements are loaded into registers at the top of a step, their
    global latency hidden behind the current step's products, and written to shared memory after the step's
    barrier: the same values in the same places, one step ahead."""
    def load(k0: str, into) -> list[str]:
        out = []
        for n, (tile, tv, base, coords, cond, value, vtype) in enumerate(slices):
            head = (["#pragma unroll", f"for (int mepgen_u = 0; mepgen_u < {t * bk // nt}; ++mepgen_u) {{",
                     f"    const int mepgen_e = mepgen_tid + mepgen_u * {nt};"] if prefetch else
                    [f"for (int mepgen_e = mepgen_tid; mepgen_e < {t * bk}; mepgen_e += {nt}) {{"])
            out += head + [f"    {c}" for c in coords] + [
                f"    const {vtype} {tv} = {base} + mepgen_m;", f"    const int mepgen_gk = {k0} + mepgen_kk;",
                f"    {into(n, tile)} = ({cond}) ? {value} : {T}(0);", "}"]
        return out

    def store() -> list[str]:
        out = []
        for n, (tile, _, _, coords, _, _, _) in enumerate(slices):
            out += ["#pragma unroll", f"for (int mepgen_u = 0; mepgen_u < {t * bk // nt}; ++mepgen_u) {{",
                    f"    const int mepgen_e = mepgen_tid + mepgen_u * {nt};", *[f"    {c}" for c in coords],
                    f"    {tile}[mepgen_kk][mepgen_m] = mepgen_p{n}[mepgen_u];", "}"]
        return out

    ind = lambda lines, k: [i * k + ln for ln in lines]
    if not prefetch:
        return [], ind(load("mepgen_k0", lambda n, tile: f"{tile}[mepgen_kk][mepgen_m]") + ["__syncthreads();"],
                       depth + 1), ind(["__syncthreads();"], depth + 1)
    reg = lambda n, tile: f"mepgen_p{n}[mepgen_u]"
    pre = [f"{T} mepgen_p{n}[{t * bk // nt}];   // the next step's elements of this thread" for n in
           range(len(slices))] + load(f"({lo})", reg) + store() + ["__syncthreads();"]
    top = [f"const bool mepgen_more = mepgen_k0 + {bk} < {hi};", "if (mepgen_more) {",
           *["    " + ln for ln in load(f"(mepgen_k0 + {bk})", reg)], "}"]
    bottom = ["__syncthreads();", "if (mepgen_more) {", *["    " + ln for ln in store()], "}", "__syncthreads();"]
    return ind(pre, depth), ind(top, depth + 1), ind(bottom, depth + 1)


def _register_tile(m, src, T, bk, rm, rn, tx, ty, a_first, i, layout="strided", bottom=(), g=4) -> list[str]:
    """The inner product step (then `bottom`, the staging's end of the step) and the epilogue of an RM x RN register
    tile per thread."""
    prod = "mepgen_a[mepgen_q] * mepgen_b[mepgen_w]" if a_first else "mepgen_b[mepgen_w] * mepgen_a[mepgen_q]"
    prod = _addend(src, m, "mepgen_a[mepgen_q]", "mepgen_b[mepgen_w]") or prod
    lines = [f"{i * 2}#pragma unroll",
             f"{i * 2}for (int mepgen_kk = 0; mepgen_kk < {bk}; ++mepgen_kk) {{",
             *_in_range(m, i * 3),
             *register_loads(T, rm, rn, tx, ty, layout, i * 3, g),
             f"{i * 3}#pragma unroll",
             f"{i * 3}for (int mepgen_q = 0; mepgen_q < {rm}; ++mepgen_q)",
             f"{i * 4}#pragma unroll",
             f"{i * 4}for (int mepgen_w = 0; mepgen_w < {rn}; ++mepgen_w) mepgen_acc[mepgen_q][mepgen_w] += {prod};",
             f"{i * 2}}}", *bottom, f"{i}}}",
             f"{i}#pragma unroll", f"{i}for (int mepgen_q = 0; mepgen_q < {rm}; ++mepgen_q) {{",
             f"{i * 2}{_decl_type(src, m.row_stmt, m.row)} {m.row} = mepgen_r0 + {row_of('mepgen_q', rm, ty, layout, g)};",
             f"{i * 2}#pragma unroll", f"{i * 2}for (int mepgen_w = 0; mepgen_w < {rn}; ++mepgen_w) {{",
             f"{i * 3}{_decl_type(src, m.col_stmt, m.col)} {m.col} = mepgen_c0 + {col_of('mepgen_w', rn, tx, layout, g)};",
             f"{i * 3}if ({src.src(list(m.guard.get_children())[0])}) {{"]
    for st in m.after:
        line = _renamed(src, st, {m.acc: "mepgen_acc[mepgen_q][mepgen_w]"})
        lines.append(i * 4 + line + ("" if line.rstrip().endswith(("}", ";")) else ";"))
    lines.append(f"{i * 3}}}")
    return lines


def _per_output_init(src, m, T, rm, rn, tx, ty, i, layout="strided", g=4) -> list[str]:
    """An initial value that depends on the output (`C[row*n+col] * beta`, `bias[col]`): evaluated for each output
    of the thread at its own row and column, where the original guard admits it (the others are never stored)."""
    cond = src.src(list(m.guard.get_children())[0])
    row = f"{_decl_type(src, m.row_stmt, m.row)} {m.row} = mepgen_r0 + {row_of('mepgen_q', rm, ty, layout, g)};"
    if rn == 1:
        return [f"{i}{T} mepgen_acc[{rm}];", f"{i}#pragma unroll",
                f"{i}for (int mepgen_q = 0; mepgen_q < {rm}; ++mepgen_q) {{", f"{i * 2}{row}",
                f"{i * 2}mepgen_acc[mepgen_q] = ({cond}) ? ({m.init}) : {T}(0);", f"{i}}}"]
    col = f"{_decl_type(src, m.col_stmt, m.col)} {m.col} = mepgen_c0 + {col_of('mepgen_w', rn, tx, layout, g)};"
    return [f"{i}{T} mepgen_acc[{rm}][{rn}];", f"{i}#pragma unroll",
            f"{i}for (int mepgen_q = 0; mepgen_q < {rm}; ++mepgen_q) {{", f"{i * 2}{row}", f"{i * 2}#pragma unroll",
            f"{i * 2}for (int mepgen_w = 0; mepgen_w < {rn}; ++mepgen_w) {{", f"{i * 3}{col}",
            f"{i * 3}mepgen_acc[mepgen_q][mepgen_w] = ({cond}) ? ({m.init}) : {T}(0);", f"{i * 2}}}", f"{i}}}"]


def _addend(src, m, row_value: str, col_value: str) -> str | None:
    """A generalized addend g(X[...], Y[...]) with its two reads replaced by the staged values; None for the
    plain product (written as before)."""
    if m.addend is None:
        return None
    s0, e0 = src.span(m.addend)
    out, pos = [], s0
    for op in sorted(m.operands, key=lambda o: src.span(o.cursor)[0]):
        s, e = src.span(op.cursor)
        out += [src.text[pos:s], row_value if op.side == "row" else col_value]
        pos = e
    return "(" + " ".join("".join(out + [src.text[pos:e0]]).split()) + ")"


def _in_range(m, indent: str) -> list[str]:
    """A generalized addend is not 0 for the zero-filled elements past the reduction's end: those steps are
    skipped (a plain product adds 0 * x there, which leaves the sum unchanged)."""
    return [] if m.addend is None else [f"{indent}if (mepgen_k0 + mepgen_kk >= {m.loop.hi}) break;"]


def _thread_cap(src, spec) -> int | None:
    """The kernel's own __launch_bounds__ thread limit, which a tile shape must respect."""
    if not src.has_launch_bounds():
        return None
    from .warp_row import _bounds_value
    return _bounds_value(src, spec)


def _legal(t: int, rm: int, cap, rn: int = 1) -> bool:
    if t % rm or t % rn or rm * rn > 64:
        return False
    nt = (t // rn) * (t // rm)
    return 64 <= nt <= 1024 and (cap is None or nt <= cap)


def _decl_type(src, stmt, name) -> str:
    """The type a declaration statement gives `name`, as written (`const int` of `const int i = ...`): the text before
    the name as a whole word, not before its first letters (`i` inside `int`)."""
    m = re.search(rf"(?<![\w.]){re.escape(name)}\b", src.src(stmt))
    return src.src(stmt)[:m.start()].strip() if m and src.src(stmt)[:m.start()].strip() else "const int"


def _renamed(src, c, names: dict[str, str]) -> str:
    """The text of cursor `c` with references to `names` replaced (by their cursor extents, not by regex)."""
    s0, e0 = src.span(c)
    edits = sorted((src.span(n)[0], src.span(n)[1], names[n.spelling]) for n in walk(c)
                   if kind(n) == "DECL_REF_EXPR" and n.spelling in names and src.span(n)[0] >= s0)
    out, pos = [], s0
    for s, e, new in edits:
        if s < pos:
            continue
        out += [src.text[pos:s], new]
        pos = e
    out.append(src.text[pos:e0])
    return re.sub(r"\s+\n", "\n", "".join(out))
