"""Shared-memory tiling of a 2D/3D stencil: each block loads its tile plus the halo once, then every
neighbour read is served from shared memory instead of global memory (or L1, where it would be evicted).

A one-thread-per-point stencil reads each input point up to 2*ndim+1 times from neighbouring threads; the
tile loads it once, cooperatively and coalesced along x, then `__syncthreads()`. The tile is placed
before the guard so that every thread of the block reaches the barrier; a tile point is loaded only
inside the guard's box widened by the radius, so no address outside the original reads' rows is touched
(the x bound must be provably `stride - c` with c >= radius, the lower bounds literal >= radius).
Reads through a `__device__` helper (`lap5(u, i, j, nx, ...)`) are kept as calls: the helper gets the
tile, the thread's tile coordinates and the tile pitch, which reproduces its neighbour pattern exactly.
The block shape is the tunable: the launch's block macros are replaced in the grid expressions.
"""
from __future__ import annotations

import re

from .base import Rewrite, Transformation
from ...cexpr import with_block
from .launch_config import _token
from .launch_facts import _bounds_value
from .source import Refused
from .stencil_match import match_stencil

SHAPES = {2: ["32x8", "32x4", "64x4", "32x16", "16x16", "64x8", "128x2"],
          3: ["32x4x2", "32x4x4", "32x8x2", "64x2x2", "16x8x4", "32x2x4"]}
MAX_SHARED = 48 * 1024


class TileStencil(Transformation):
    def __init__(self):
        super().__init__("tile_stencil", "shared-memory tile with halo for 2D/3D stencils",
                         {"block": "32x8"})

    def _plan(self, src, spec, launch):
        st = match_stencil(src, spec)
        tokens = [_token(b) for b in launch["block"]]
        if len(tokens) != st.ndim:
            raise Refused(f"the launch has {len(tokens)} block dimensions for a {st.ndim}D stencil")
        for d, t in enumerate(tokens):
            if not (t.isidentifier() or t.isdigit()):
                raise Refused(f"block dimension `{launch['block'][d]}` is not a macro or a literal")
            if t == "1" and d < len(launch["grid"]):
                continue            # one thread per plane along d (`grid.z = nz`): a deeper block divides it up
            if d >= len(launch["grid"]) or not re.search(rf"(?<![\w.]){re.escape(t)}(?![\w.])", launch["grid"][d]):
                raise Refused(f"the grid `{launch['grid']}` is not derived from the block dimension `{t}`")
            if t.isidentifier() and re.search(rf"\b{re.escape(t)}\b", src.head + src.src(src.body)):
                raise Refused(f"the kernel bakes the block size {t} in")
        if len(set(tokens)) != len(tokens) and not all(t.isdigit() for t in tokens):
            raise Refused("two block dimensions are the same macro: their grid expressions cannot be told apart")
        return st, tokens

    def _shapes(self, st, spec, src):
        out = []
        for shape in SHAPES[st.ndim]:
            dims = [int(v) for v in shape.split("x")]
            tile = 1
            for d, b in enumerate(dims):
                tile *= b + 2 * st.radius[d]
            if tile * _size(st.ctype) <= MAX_SHARED:
                out.append(shape)
        if src.has_launch_bounds():
            cap = _bounds_value(src, spec)
            out = [s for s in out if cap is not None and _threads(s) <= cap]
        if not out:
            raise Refused("no block shape fits the tile in shared memory and the launch bounds")
        return out

    def space(self, src, spec, launch):
        st, _ = self._plan(src, spec, launch)
        return {"block": self._shapes(st, spec, src)}

    def apply(self, src, spec, launch, params):
        st, tokens = self._plan(src, spec, launch)
        shape = str(params.get("block", self.defaults["block"]))
        if shape not in self._shapes(st, spec, src):
            raise Refused(f"block shape {shape} is not legal here")
        b = [int(v) for v in shape.split("x")]
        r = st.radius
        w = [b[d] + 2 * r[d] for d in range(st.ndim)]
        pitch = [1, w[0], w[0] * (w[1] if st.ndim > 1 else 1)]
        total = 1
        for v in w:
            total *= v
        tile = "mepgen_tile"
        ax = "xyz"
        lines = [f"// mepgen tile_stencil: {'x'.join(map(str, w))} tile of {st.array} "
                 f"({shape} block + halo {'/'.join(map(str, r))}) in shared memory",
                 f"__shared__ {st.ctype} {tile}[{total}];",
                 f"for (int mepgen_e = {' + '.join(f'(int)threadIdx.{ax[d]} * {pitch_b(b, d)}' for d in range(st.ndim))}; "
                 f"mepgen_e < {total}; mepgen_e += {_prod(b)}) {{"]
        coords = []
        for d in range(st.ndim):
            local = f"mepgen_e % {w[0]}" if d == 0 else (f"mepgen_e / {pitch[d]}" if d == st.ndim - 1
                                                          else f"mepgen_e / {pitch[d]} % {w[d]}")
            shift = r[d] - (st.origin[d] if st.origin else 0)       # the index's origin moves the tile with it
            lines.append(f"    const int mepgen_g{ax[d]} = (int)(blockIdx.{ax[d]} * {b[d]}) + {local}"
                         + (f" - {shift};" if shift > 0 else f" + {-shift};" if shift < 0 else ";"))
            near = st.near[d] if st.near else r[d]       # conditional reads stay inside the guard's box
            coords.append(f"mepgen_g{ax[d]} >= {st.lo[d] - near} && mepgen_g{ax[d]} < ({st.hi[d]})"
                          + (f" + {near}" if near else ""))
        addr = " + ".join([f"mepgen_g{ax[d]} * ({st.strides[d - 1]})" for d in range(st.ndim - 1, 0, -1)] + ["mepgen_gx"])
        lines += [f"    if ({' && '.join(coords)}) {{",
                  f"        {tile}[mepgen_e] = {st.array}[{addr}];", "    }", "}", "__syncthreads();",
                  "const int mepgen_t = " + " + ".join(f"((int)threadIdx.{ax[d]} + {r[d]}) * {pitch[d]}"
                                                      for d in range(st.ndim)) + ";"]
        indent = _indent(src, st.guard)
        edits = [(src.span(st.guard)[0], src.span(st.guard)[0],
                  ("\n" + indent).join(lines) + "\n" + indent)]
        direct = helpers = 0
        for rd in st.reads:
            if rd.offset is not None:
                delta = sum(rd.offset[d] * pitch[d] for d in range(st.ndim))
                s, e = src.span(rd.cursor)
                edits.append((s, e, f"{tile}[mepgen_t{delta:+d}]" if delta else f"{tile}[mepgen_t]"))
                direct += 1
                continue
            helpers += 1
            for a in rd.cursor.get_arguments():
                role = rd.helper_args.get(src.span(a))
                if role is None:
                    continue
                new = {"ptr": tile, "S": str(pitch[1]), "P": str(pitch[2]) if st.ndim > 2 else None}.get(role)
                if role in ax:
                    d = ax.index(role)
                    new = f"((int)threadIdx.{role} + {r[d]})"
                edits.append((*src.span(a), new))
        text = src.replace(edits)
        grid = list(launch["grid"])
        for d, t in enumerate(tokens):
            if t == "1" and not re.search(r"(?<![\w.])1(?![\w.])", grid[d]):
                # the grid counted one block per point along d: it now rounds up to blocks of b[d] (the guard bounds
                # every axis, so the threads past the end do nothing)
                grid[d] = grid[d] if b[d] == 1 else f"(({grid[d]}) + {b[d] - 1}) / {b[d]}"
            else:
                grid[d] = with_block(grid[d], t, b[d])
        via = f", {helpers} helper call(s) given the tile" if helpers else ""
        return Rewrite(text, f"tile_stencil: {st.array} staged in a {'x'.join(map(str, w))} shared-memory tile "
                             f"(halo {'/'.join(map(str, r))}, loaded once per block), {direct} neighbour read(s) "
                             f"from shared memory{via}; launch {shape} blocks",
                       {"grid": grid, "block": [str(v) for v in b], "shared_mem": str(launch.get("shared_mem", "0"))})


def pitch_b(b, d) -> int:
    out = 1
    for v in b[:d]:
        out *= v
    return out


def _prod(b) -> int:
    return pitch_b(b, len(b))


def _threads(shape: str) -> int:
    return _prod([int(v) for v in shape.split("x")])


def _size(ctype: str) -> int:
    return {"double": 8, "long long": 8, "unsigned long long": 8, "__half": 2, "short": 2,
            "unsigned short": 2, "signed char": 1, "unsigned char": 1, "bool": 1}.get(ctype, 4)


def _indent(src, c) -> str:
    start = src.span(c)[0]
    line = src.text.rfind("\n", 0, start) + 1
    pre = src.text[line:start]
    return pre if not pre.strip() else "    "

