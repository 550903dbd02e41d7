"""A 3D star stencil marched along z: each thread walks a chunk of planes, its z neighbours in a register queue and
its in-plane neighbours in a shared-memory tile of the current plane (2.5D blocking).

A one-thread-per-point 3D stencil of radius r reads each input point 6r + 1 times from global memory (L1 and L2
catch some): the x neighbours come from the same warp, the y neighbours from other warps, the z neighbours from
other blocks. Marching, a thread computes CZ points of its (x, y) column in order of z: the 2 rz + 1 values of its
column that the point reads along z are a queue of registers, one new value loaded per plane; the in-plane reads
(x and y offsets, z offset 0) come from a (BX + 2 rx) x (BY + 2 ry) tile of the plane in shared memory, loaded
once per plane and block. Every array the stencil reads this way (read-only, role `in`, all reads in the guard)
gets its own queue and tile, so two coupled fields (a wave equation's two wavefields) march together.

What must hold (stencil_match proves the offsets): a 3D launch whose thread indices are the global ones; every read
of a marched array is `u[x + dx + (y + dy) * S + (z + dz) * P]` with at most one of dx, dy or dz on an axis off the
centre... more precisely either dz = 0 (an in-plane read) or dx = dy = 0 (a column read); no read through a helper
and none kept inside the box by a condition; nothing after the guard, no `return`, no other use of the z thread
index or blockIdx.z. Loads stay where the original reads: the column's values are loaded only for an (x, y) inside
the guard's box and a z within the radius of its z range; a tile element only inside the box widened by the radius
(the x bound proven to leave the halo inside a row, as for tile_stencil). The guarded statement runs unchanged for
each plane of the chunk, reading registers and shared memory instead of global memory, so every point computes
the same value the same way. Two barriers per plane; all threads of a block run the same number of planes.

Measured (H100, through the evaluator, HeCBench rtm8, radius 4 on two fields; bench/results/
library_speedup_corpus_2026-11-27b.md): 0.77-1.02x over six block shapes and chunks. Such a stencil is bound by
load instructions, not DRAM (the original runs at 2.6x its byte bound with its neighbours hitting L1), and shared
memory reads go through the same pipe: the queue removes only the 2 rz z reads per point. Hence tried after
tile_stencil and stencil_rows; what would pay is fewer load instructions per point (several x per thread, 16-byte
reads of the tile), not done.
"""
from __future__ import annotations

import re

from .analysis import body_statements
from .base import Rewrite, Transformation
from .launch_config import _sub
from .source import Refused, kind, walk
from .stencil_match import match_stencil, read_only_inputs
from .tile_matmul import _decl_type, check_shared, type_bytes
from .march_z_vec import apply_vec4, tile_bytes
from .tile_stencil import TileStencil

BLOCKS = ["32x8", "32x4", "64x4", "32x16", "16x16"]
CHUNKS = [32, 16, 64]


class MarchZ(Transformation):
    def __init__(self):
        super().__init__("march_z", "a 3D stencil marched along z: register queue along z, shared tile in the plane",
                         {"block": "32x8", "chunk": 32, "vec": 4})

    def _plan(self, src, spec, launch):
        st, tokens = TileStencil()._plan(src, spec, launch)
        if st.ndim != 3:
            raise Refused("not a 3D stencil")
        arrays = []
        for name in read_only_inputs(src, spec, st.guard):
            try:
                s = match_stencil(src, spec, name)
            except Refused:
                if name == st.array:
                    raise
                continue        # not a stencil read (a coefficient `c[0]`, the thread's own point): stays as it is
            arrays.append(s)
        for s in arrays:
            if s.conditional or any(r.offset is None for r in s.reads):
                raise Refused(f"{s.array} is read through a helper or under a condition that keeps it in the box")
            for r in s.reads:
                if r.offset[2] and (r.offset[0] or r.offset[1]):
                    raise Refused(f"{s.array}[{r.offset}] is off the centre in z and in the plane: not a star stencil")
        stmts = body_statements(src.body)
        zdecl = st.index_stmts[2]
        others = [c for c in stmts if src.span(c) != src.span(zdecl)]
        text = " ".join(src.src(c) for c in others)
        if re.search(r"\b(threadIdx|blockIdx|blockDim|gridDim)\.z\b", text):
            raise Refused("the kernel uses the z thread or block index besides its z index")
        if any(kind(c) == "RETURN_STMT" for c in walk(src.body)):
            raise Refused("a `return` inside the stencil: the threads of a block must all reach every plane's barrier")
        return st, tokens, arrays

    def space(self, src, spec, launch):
        st, _, arrays = self._plan(src, spec, launch)
        ok = [b for b in BLOCKS if _shared(arrays, b) <= 48 * 1024]
        if not ok:
            raise Refused("no block shape fits the planes' tiles in shared memory")
        vec = [4, 1] if all(a.ctype == "float" for a in arrays) and _vec_ok(src, st) else [1]
        return {"block": ok, "chunk": list(CHUNKS), "vec": vec}

    def apply(self, src, spec, launch, params):
        st, tokens, arrays = self._plan(src, spec, launch)
        shape, cz = str(params.get("block", "32x8")), int(params.get("chunk", 32))
        if shape not in BLOCKS or cz not in CHUNKS:
            raise Refused(f"block {shape}, chunk {cz} is not a legal point")
        bx, by = (int(v) for v in shape.split("x"))
        vec = int(params.get("vec", 1))
        if vec == 4:
            check_shared(tile_bytes(arrays, bx, by), f"the planes' tiles at {shape} x 4")
            return apply_vec4(src, spec, launch, st, arrays, bx, by, cz, _edited, _addr)
        if vec != 1:
            raise Refused(f"vec {vec} is not 1 or 4")
        check_shared(_shared(arrays, shape), f"the planes' tiles at {shape}")
        x, y, z = st.index
        i = "    "
        zdecl = st.index_stmts[2]
        stmts = body_statements(src.body)
        index = [src.span(t) for t in st.index_stmts]
        keep = [c for c in stmts if src.span(c) in index[:2]]           # x and y: the thread's column
        inner = [c for c in stmts if src.span(c) not in index]          # per plane: locals and the guard
        lo, hi = st.lo, st.hi
        box = lambda c, d, w: f"{c} >= {lo[d] - w} && {c} < ({hi[d]})" + (f" + {w}" if w else "")
        zo = st.origin[2] if st.origin else 0
        L = ["{", f"{i}// mepgen march_z: {cz} planes per thread along {z}; "
                  + "; ".join(f"{a.array}: queue of {2 * a.radius[2] + 1} along z, "
                              f"{_w(a, bx, 0)}x{_w(a, by, 1)} tile of the plane" for a in arrays)]
        L += [i + src.src(c).strip() for c in keep]
        L.append(f"{i}const int mepgen_z0 = (int)blockIdx.z * {cz} + {zo};")
        L.append(f"{i}const int mepgen_t = (int)threadIdx.y * {bx} + (int)threadIdx.x;")
        edits = []
        column = f"{box(f'(int){x}', 0, 0)} && {box(f'(int){y}', 1, 0)}"

        def load(a, zc: str) -> str:
            """The thread's own column of `a` at plane zc, where the original reads it (else 0, never used)."""
            return (f"(({column} && {box(zc, 2, a.radius[2])}) ? "
                    f"{a.array}[{_addr(a, f'(int){x}', f'(int){y}', zc)}] : {a.ctype}(0))")

        for n, a in enumerate(arrays):
            rx, ry, rz = a.radius
            T, q, t = a.ctype, f"mepgen_q{n}", f"mepgen_s{n}"
            L.append(f"{i}{T} {q}[{2 * rz + 1}];   // {a.array} at ({x}, {y}, {z} - {rz} .. {z} + {rz})")
            for d in range(2 * rz):
                L.append(f"{i}{q}[{d}] = {load(a, f'(mepgen_z0 - {rz - d})' if d < rz else 'mepgen_z0' if d == rz else f'(mepgen_z0 + {d - rz})')};")
            if rx or ry:
                L.append(f"{i}__shared__ {T} {t}[{_w(a, by, 1) * _w(a, bx, 0)}];")
            for r in a.reads:
                dx, dy, dz = r.offset
                s, e = src.span(r.cursor)
                if dx or dy:
                    delta = dy * _w(a, bx, 0) + dx
                    edits.append((s, e, f"{t}[mepgen_c{n}{delta:+d}]" if delta else f"{t}[mepgen_c{n}]"))
                else:
                    edits.append((s, e, f"{q}[{rz + dz}]"))
        L.append(f"{i}for (int mepgen_zz = 0; mepgen_zz < {cz}; ++mepgen_zz) {{")
        L.append(f"{i * 2}const int mepgen_z = mepgen_z0 + mepgen_zz;")
        for n, a in enumerate(arrays):
            rx, ry, rz = a.radius
            L.append(f"{i * 2}mepgen_q{n}[{2 * rz}] = {load(a, f'(mepgen_z + {rz})')};")
            if not (rx or ry):
                continue
            w, h = _w(a, bx, 0), _w(a, by, 1)
            sx, sy = rx - (st.origin[0] if st.origin else 0), ry - (st.origin[1] if st.origin else 0)
            L += [f"{i * 2}for (int mepgen_e = mepgen_t; mepgen_e < {w * h}; mepgen_e += {bx * by}) {{",
                  f"{i * 3}const int mepgen_gx = (int)(blockIdx.x * {bx}) + mepgen_e % {w} - {sx};",
                  f"{i * 3}const int mepgen_gy = (int)(blockIdx.y * {by}) + mepgen_e / {w} - {sy};",
                  f"{i * 3}if ({box('mepgen_gx', 0, rx)} && {box('mepgen_gy', 1, ry)} && {box('mepgen_z', 2, 0)}) "
                  f"mepgen_s{n}[mepgen_e] = {a.array}[{_addr(a, 'mepgen_gx', 'mepgen_gy', 'mepgen_z')}];",
                  f"{i * 2}}}",
                  f"{i * 2}const int mepgen_c{n} = ((int)threadIdx.y + {ry}) * {w} + (int)threadIdx.x + {rx};"]
        L.append(f"{i * 2}__syncthreads();")
        L.append(f"{i * 2}{_decl_type(src, zdecl, z)} {z} = mepgen_z;")
        for c in inner:
            L.append(i * 2 + _edited(src, c, edits).strip())
        L.append(f"{i * 2}__syncthreads();")
        for n, a in enumerate(arrays):
            rz = a.radius[2]
            if rz:
                L += [f"{i * 2}#pragma unroll",
                      f"{i * 2}for (int mepgen_d = 0; mepgen_d < {2 * rz}; ++mepgen_d) "
                      f"mepgen_q{n}[mepgen_d] = mepgen_q{n}[mepgen_d + 1];"]
        L += [f"{i}}}", "}"]
        text = src.replace([(*src.span(src.body), "\n".join(L))])
        grid = list(launch["grid"])
        grid[0], grid[1] = _sub(grid[0], tokens[0], bx), _sub(grid[1], tokens[1], by)
        zt = tokens[2]
        grid[2] = f"(({grid[2]}) + {cz - 1}) / {cz}" if zt == "1" else f"(({grid[2]}) * ({zt}) + {cz - 1}) / {cz}"
        what = "; ".join(f"{a.array}: {2 * a.radius[2] + 1}-value queue along z"
                         + (f", {_w(a, bx, 0)}x{_w(a, by, 1)} tile of the plane ({len(a.reads)} reads)"
                            if a.radius[0] or a.radius[1] else "") for a in arrays)
        return Rewrite(text, f"march_z: each thread walks {cz} planes along {z} ({what}); launch {bx}x{by}x1 blocks, "
                             f"grid.z / {cz}",
                       {"grid": grid, "block": [str(bx), str(by), "1"], "shared_mem": str(launch.get("shared_mem", "0"))})


def _vec_ok(src, st) -> bool:
    """Whether nothing but the x index reads the x thread or block index (4 points per thread move them)."""
    index = [src.span(t) for t in st.index_stmts]
    rest = " ".join(src.src(c) for c in body_statements(src.body) if src.span(c) not in index)
    return re.search(r"\b(threadIdx|blockIdx|blockDim|gridDim)\.x\b", rest) is None


def _w(a, b: int, d: int) -> int:
    return b + 2 * a.radius[d]


def _addr(a, cx: str, cy: str, cz: str) -> str:
    """The element at (cx, cy, cz) at the reads' proven strides, in 64 bits (a volume may pass 2^31 elements)."""
    return f"({cx}) + (long long)({cy}) * ({a.strides[0]}) + (long long)({cz}) * ({a.strides[1]})"


def _shared(arrays, shape: str) -> int:
    bx, by = (int(v) for v in shape.split("x"))
    return sum(_w(a, bx, 0) * _w(a, by, 1) * type_bytes(a.ctype) for a in arrays if a.radius[0] or a.radius[1])


def _edited(src, stmt, edits) -> str:
    s, e = src.span(stmt)
    out, at = [], s
    for a, b, new in sorted(x for x in edits if s <= x[0] and x[1] <= e):
        out += [src.text[at:a], new]
        at = b
    return "".join(out) + src.text[at:e] + ("" if src.text[at:e].rstrip().endswith(("}", ";")) else ";")
