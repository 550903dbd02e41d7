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

import re

from .base import Rewrite, Transformation
from .launch_facts import _bounds_value
from .matmul_match import bound_sizes, match_matmul
from .register_tile import LAYOUTS, canonical_type, check_shared, col_of, layout_param, prefetch_param, quad, \
    register_loads, row_of, shared_tiles, slice_coords, slices_bytes, staged_slices
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
        layout = layout_param(params) if rn > 1 else "strided"
        prefetch = prefetch_param(params, rn > 1)
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
