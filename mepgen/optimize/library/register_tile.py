"""The register tile that tile_matmul and tile_argmax share: which outputs a thread holds (the layouts), the two
staged bk-deep slices of the factors in shared memory (their coordinates, their size, their loads with or without
the next step prefetched into registers) and the reads of a step's values into registers.
"""
from __future__ import annotations

import math

from .source import Refused, kind, walk

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


def prefetch_param(params, register_tile: bool = True) -> bool:
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


def layout_param(params) -> str:
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
