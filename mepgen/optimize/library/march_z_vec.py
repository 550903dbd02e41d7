"""march_z with 4 consecutive x points per thread (`vec` 4): the loads per point fall by about 4, where march_z alone
only moves them from global to shared memory (the same load pipe).

Per plane and marched float array, a thread loads its 4 points' column values (one z step of the queue, now 4 wide),
stores them as one 16-byte value into the centre of the plane's tile, loads its share of the tile's halo, and after
the barrier reads the tile rows its points need as 16-byte values into registers: one per row off the centre, 2 + 2
ceil(rx / 4) for the centre row. The 4 points then run the guarded statement one after the other (each with its own
x, the original guard deciding for each), reading those registers and the queue. Every value is the one the original
reads; the tile and queue hold zero where the original reads nothing (never used).

Needs: float arrays (16-byte groups of 4), nothing in the kernel besides the x index that uses the x thread or block
index, and what march_z needs. The tile's x halo is rounded up to 4 so rows stay 16-byte aligned.
"""
from __future__ import annotations

import re

from .analysis import body_statements
from .base import Rewrite
from .source import Refused
from .tile_matmul import _decl_type

LANES = "xyzw"


def pad(r: int) -> int:
    return (r + 3) // 4 * 4


def tile_bytes(arrays, bx: int, by: int) -> int:
    return sum((4 * bx + 2 * pad(a.radius[0])) * (by + 2 * a.radius[1]) * 4 for a in arrays
               if a.radius[0] or a.radius[1])


def apply_vec4(src, spec, launch, st, arrays, bx: int, by: int, cz: int, edited, addr) -> Rewrite:
    """The vec-4 march of the stencil `st` (march_z's analysis: `arrays` the marched fields)."""
    if any(a.ctype != "float" for a in arrays):
        raise Refused("4 points per thread need float arrays (16-byte groups)")
    x, y, z = st.index
    stmts = body_statements(src.body)
    index = [src.span(t) for t in st.index_stmts]
    inner = [c for c in stmts if src.span(c) not in index]
    if re.search(r"\b(threadIdx|blockIdx|blockDim|gridDim)\.x\b", " ".join(src.src(c) for c in inner)):
        raise Refused("the kernel uses the x thread or block index besides its x index")
    lo, hi = st.lo, st.hi
    org = st.origin or [0, 0, 0]
    box = lambda c, d, w: f"{c} >= {lo[d] - w} && {c} < ({hi[d]})" + (f" + {w}" if w else "")
    i = "    "
    L = ["{", f"{i}// mepgen march_z: {cz} planes per thread along {z}, 4 consecutive {x} per thread; "
              + "; ".join(f"{a.array}: queue of {2 * a.radius[2] + 1} x 4 along z" for a in arrays)]
    L += [i + src.src(c).strip() for c in stmts if src.span(c) == index[1]]          # y: the thread's row
    L += [f"{i}const int mepgen_x0 = ((int)blockIdx.x * {bx} + (int)threadIdx.x) * 4 + {org[0]};",
          f"{i}const int mepgen_z0 = (int)blockIdx.z * {cz} + {org[2]};",
          f"{i}const int mepgen_t = (int)threadIdx.y * {bx} + (int)threadIdx.x;"]

    def column(a, zc: str) -> str:
        """The 4 points' column values of `a` at plane zc (zero where the original reads nothing there)."""
        rx, ry, rz = a.radius
        lanes = [f"(({box(f'(mepgen_x0 + {v})', 0, rx)} && {box(f'(int){y}', 1, ry)} && {box(zc, 2, rz)}) ? "
                 f"{a.array}[{addr(a, f'(mepgen_x0 + {v})', f'(int){y}', zc)}] : 0.0f)" for v in range(4)]
        return "make_float4(" + ", ".join(lanes) + ")"

    for n, a in enumerate(arrays):
        rz = a.radius[2]
        L.append(f"{i}float4 mepgen_q{n}[{2 * rz + 1}];   // {a.array}: the 4 columns at {z} - {rz} .. {z} + {rz}")
        for d in range(2 * rz):
            L.append(f"{i}mepgen_q{n}[{d}] = {column(a, f'(mepgen_z0 + {d - rz})')};")
        if a.radius[0] or a.radius[1]:
            L.append(f"{i}__shared__ __align__(16) float mepgen_s{n}[{_h(a, by) * _w(a, bx)}];")
    L += [f"{i}for (int mepgen_zz = 0; mepgen_zz < {cz}; ++mepgen_zz) {{",
          f"{i * 2}const int mepgen_z = mepgen_z0 + mepgen_zz;"]
    regs = []          # per array: {(dy, k)} of the 16-byte tile reads after the barrier
    for n, a in enumerate(arrays):
        rx, ry, rz = a.radius
        L.append(f"{i * 2}mepgen_q{n}[{2 * rz}] = {column(a, f'(mepgen_z + {rz})')};")
        need = set()
        if rx or ry:
            w, h, px = _w(a, bx), _h(a, by), pad(rx)
            halo = h * w - by * 4 * bx
            L += [f"{i * 2}*reinterpret_cast<float4 *>(&mepgen_s{n}[((int)threadIdx.y + {ry}) * {w} + {px} + "
                  f"(int)threadIdx.x * 4]) = mepgen_q{n}[{rz}];",
                  f"{i * 2}for (int mepgen_h = mepgen_t; mepgen_h < {halo}; mepgen_h += {bx * by}) {{",
                  f"{i * 3}const bool mepgen_rows = mepgen_h < {2 * ry * w};",
                  f"{i * 3}const int mepgen_k = mepgen_h - {2 * ry * w};",
                  f"{i * 3}const int mepgen_row = mepgen_rows ? (mepgen_h / {w} < {ry} ? mepgen_h / {w} : "
                  f"mepgen_h / {w} + {by}) : {ry} + mepgen_k / {max(1, 2 * px)};",
                  f"{i * 3}const int mepgen_col = mepgen_rows ? mepgen_h % {w} : (mepgen_k % {max(1, 2 * px)} < {px} ? "
                  f"mepgen_k % {max(1, 2 * px)} : mepgen_k % {max(1, 2 * px)} + {4 * bx});",
                  f"{i * 3}const int mepgen_gx = (int)blockIdx.x * {4 * bx} + mepgen_col - {px} + {org[0]};",
                  f"{i * 3}const int mepgen_gy = (int)blockIdx.y * {by} + mepgen_row - {ry} + {org[1]};",
                  f"{i * 3}mepgen_s{n}[mepgen_row * {w} + mepgen_col] = ({box('mepgen_gx', 0, rx)} && "
                  f"{box('mepgen_gy', 1, ry)} && {box('mepgen_z', 2, 0)}) ? "
                  f"{a.array}[{addr(a, 'mepgen_gx', 'mepgen_gy', 'mepgen_z')}] : 0.0f;",
                  f"{i * 2}}}"]
            for r in a.reads:
                dx, dy, dz = r.offset
                if dx or dy:
                    need |= {(dy, (v + dx) // 4) for v in range(4)}
        regs.append(need)
    L.append(f"{i * 2}__syncthreads();")
    for n, a in enumerate(arrays):
        w, px, ry = _w(a, bx), pad(a.radius[0]), a.radius[1]
        for dy, k in sorted(regs[n]):
            L.append(f"{i * 2}const float4 {_reg(n, dy, k)} = *reinterpret_cast<const float4 *>(&mepgen_s{n}["
                     f"((int)threadIdx.y + {ry + dy}) * {w} + {px} + (int)threadIdx.x * 4 + {4 * k}]);")
    L.append(f"{i * 2}{_decl_type(src, st.index_stmts[2], z)} {z} = mepgen_z;")
    for v in range(4):
        edits = []
        for n, a in enumerate(arrays):
            rz = a.radius[2]
            for r in a.reads:
                dx, dy, dz = r.offset
                s, e = src.span(r.cursor)
                if dx or dy:
                    o = v + dx
                    edits.append((s, e, f"{_reg(n, dy, o // 4)}.{LANES[o % 4]}"))
                else:
                    edits.append((s, e, f"mepgen_q{n}[{rz + dz}].{LANES[v]}"))
        L.append(f"{i * 2}{{   // point {v} of 4 along {x}")
        L.append(f"{i * 3}{_decl_type(src, st.index_stmts[0], x)} {x} = mepgen_x0 + {v};")
        L += [i * 3 + edited(src, c, edits).strip() for c in inner]
        L.append(f"{i * 2}}}")
    L.append(f"{i * 2}__syncthreads();")
    for n, a in enumerate(arrays):
        rz = a.radius[2]
        if rz:
            L += [f"{i * 2}#pragma unroll",
                  f"{i * 2}for (int mepgen_d = 0; mepgen_d < {2 * rz}; ++mepgen_d) "
                  f"mepgen_q{n}[mepgen_d] = mepgen_q{n}[mepgen_d + 1];"]
    L += [f"{i}}}", "}"]
    text = src.replace([(*src.span(src.body), "\n".join(L))])
    g, b = list(launch["grid"]), list(launch["block"])
    grid = [f"(({g[0]}) * ({b[0]}) + {4 * bx - 1}) / {4 * bx}", f"(({g[1]}) * ({b[1]}) + {by - 1}) / {by}",
            f"(({g[2]}) * ({b[2]}) + {cz - 1}) / {cz}"]
    what = "; ".join(f"{a.array}: {2 * a.radius[2] + 1} x 4 queue along z"
                     + (f", {_w(a, bx)}x{_h(a, by)} tile of the plane read 16 bytes at a time"
                        if a.radius[0] or a.radius[1] else "") for a in arrays)
    return Rewrite(text, f"march_z: each thread walks {cz} planes along {z} with 4 consecutive {x} ({what}); launch "
                         f"{bx}x{by}x1 blocks",
                   {"grid": grid, "block": [str(bx), str(by), "1"], "shared_mem": str(launch.get("shared_mem", "0"))})


def _w(a, bx: int) -> int:
    return 4 * bx + 2 * pad(a.radius[0])


def _h(a, by: int) -> int:
    return by + 2 * a.radius[1]


def _reg(n: int, dy: int, k: int) -> str:
    return f"mepgen_r{n}_{'m' if dy < 0 else ''}{abs(dy)}_{'m' if k < 0 else ''}{abs(k)}"
