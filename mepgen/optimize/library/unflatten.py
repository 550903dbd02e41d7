"""A 2D grid flattened into a 1D launch, launched as the 2D grid it is.

Naive codes often give each point of a W x H grid one thread of a 1D launch and recover its coordinates with a
division: `idx = blockIdx.x * blockDim.x + threadIdx.x; if (idx < W * H) { i = idx % W; j = idx / W; ... }`.
Every thread then pays an integer division and modulo by a run-time W, and the 2D rewrites (stencil tiling,
strips) do not see a 2D stencil. The rewrite launches a 2D grid of (x, y) = (i, j) threads over the same points:
`i = blockIdx.x * blockDim.x + threadIdx.x; j = blockIdx.y * blockDim.y + threadIdx.y; idx = j * W + i;` guarded
by `i < W && j < H`, the rest unchanged. Each point is computed by exactly one thread, as before.

Applies when the kernel is the flat index, the coordinates' declarations (`% W` and `/ W` of the index, W the
same expression of kernel parameters, template parameters or sizes) and one guard `idx < BOUND` whose BOUND is
W times an H that the access model (affine.py) divides out exactly; no shared memory, barrier, early return or
other use of the thread geometry. H must fit the grid's y limit.
"""
from __future__ import annotations

import re

from .affine import poly, text as poly_text
from .analysis import body_statements, is_global_index, size_expr, squash, uses_block_geometry, warp_level
from .base import Rewrite, Transformation
from .cursors import _whole_lines
from .source import Refused, kind, walk
from .stencil_match import MIRROR, _conjuncts

SHAPES = ["32x8", "32x4", "64x4", "16x16", "32x16", "128x2"]
GRID_Y_MAX = 65535


def _decl(stmt):
    decls = list(stmt.get_children()) if kind(stmt) == "DECL_STMT" else []
    if len(decls) == 1 and kind(decls[0]) == "VAR_DECL":
        init = [k for k in decls[0].get_children() if kind(k) not in ("TYPE_REF", "NAMESPACE_REF")]
        if init:
            return decls[0], init[-1]
    return None, None


def _strip(c):
    while kind(c) in ("UNEXPOSED_EXPR", "PAREN_EXPR", "CSTYLE_CAST_EXPR") and list(c.get_children()):
        c = list(c.get_children())[-1]
    return c


_CAST = re.compile(r"static_cast<\s*(?:unsigned\s+|signed\s+)?(?:long\s+long|long|int|size_t|int64_t|uint64_t|"
                   r"ptrdiff_t)(?:\s+int)?\s*>\s*\(\s*(\w+\.[xyz])\s*\)|\(\s*(?:unsigned\s+|signed\s+)?(?:long\s+long|"
                   r"long|int|size_t|int64_t|uint64_t|ptrdiff_t)(?:\s+int)?\s*\)\s*(\w+\.[xyz])")


def _uncast(text: str) -> str:
    """A flat index with an integer cast of one of its geometry terms (`static_cast<long long>(blockDim.x) *
    blockIdx.x + threadIdx.x`, `(size_t)blockIdx.x * blockDim.x + threadIdx.x`: a 64-bit index) without the cast;
    the rewrite replaces that index by 2D coordinates each below its bound, and keeps the type where it is read."""
    return squash(_CAST.sub(lambda m: m.group(1) or m.group(2), squash(text)))


def _coordinate_guard(src, cond, idx: str, coords: dict, width: str, invariants: set):
    """`y < H` or `y < H && x < W` over the coordinates (any order): the cursor of H. The x bound, where given, must
    be the width itself (x = idx % W is below it anyway)."""
    names = {v.spelling: axis for axis, (v, _) in coords.items()}
    height = None
    for t in _conjuncts(src, cond):
        kids = list(t.get_children()) if kind(t) == "BINARY_OPERATOR" else []
        op = src.operator(t) if len(kids) == 2 else ""
        if len(kids) == 2 and squash(src.src(kids[1])) in names and op in MIRROR:
            kids, op = kids[::-1], MIRROR[op]
        if len(kids) != 2 or op != "<" or squash(src.src(kids[0])) not in names or src.refs(kids[1]) - invariants:
            raise Refused(f"the guard is not `{idx} < bound` nor bounds on the coordinates "
                          f"({', '.join(sorted(names))}): `{squash(src.src(t))[:50]}`")
        axis = names[squash(src.src(kids[0]))]
        if axis == "x":
            if squash(src.src(kids[1])) != width:
                raise Refused(f"the guard bounds the x coordinate by `{squash(src.src(kids[1]))}`, not the width "
                              f"`{width}` it is taken modulo")
        elif height is not None:
            raise Refused("the guard bounds the y coordinate twice")
        else:
            height = kids[1]
    if height is None:
        raise Refused("the guard does not bound the y coordinate (the flat index's quotient)")
    return height


class Unflatten(Transformation):
    def __init__(self):
        super().__init__("unflatten", "a 2D grid flattened into a 1D launch launched as 2D (no division per thread)",
                         {"block": "32x8"})

    def _match(self, src, spec, launch) -> dict:
        if len(launch["grid"]) != 1 or len(launch["block"]) != 1:
            raise Refused("the launch is not 1D")
        stmts = body_statements(src.body)
        idx = idx_stmt = None
        for s in stmts:
            v, init = _decl(s)
            if v is not None and is_global_index(_uncast(src.src(init))):
                idx, idx_stmt = v, s
                break
        if idx is None:
            raise Refused("no flat `blockIdx.x * blockDim.x + threadIdx.x` index declared at the top of the kernel")
        ifs = [s for s in stmts if kind(s) == "IF_STMT"]
        if len(ifs) != 1 or len(list(ifs[0].get_children())) != 2:
            raise Refused(f"the kernel is not `{idx.spelling} = flat index; if ({idx.spelling} < bound) {{...}}`")
        guard = ifs[0]
        cond, then = list(guard.get_children())
        kids = list(cond.get_children()) if kind(cond) == "BINARY_OPERATOR" else []
        on_index = len(kids) == 2 and src.operator(cond) == "<" and squash(src.src(kids[0])) == idx.spelling
        if "__syncthreads" in src.calls() or src.shared_arrays() or src.nodes("RETURN_STMT"):
            raise Refused("the kernel uses shared memory, barriers or early returns")
        if uses_block_geometry(src, skip=[idx_stmt]):
            raise Refused("the kernel uses the thread geometry beyond its flat index")
        if warp_level(src):
            raise Refused(f"the kernel uses warp-level operations ({', '.join(warp_level(src))}): a 2D block changes "
                          "which threads form a warp")
        inner = body_statements(then) if kind(then) == "COMPOUND_STMT" else []
        coords, width = {}, None
        invariants = src.invariants()
        for s in [x for x in stmts if x is not idx_stmt and x is not guard] + inner:
            v, init = _decl(s)
            e = _strip(init) if v is not None else None
            if e is None or kind(e) != "BINARY_OPERATOR" or src.operator(e) not in ("%", "/"):
                if s in inner:
                    continue
                raise Refused(f"a statement besides the index, its coordinates and the guard: "
                              f"`{squash(src.src(s))[:60]}`")
            a, b = list(e.get_children())
            if squash(src.src(_strip(a))) != idx.spelling or src.refs(b) - invariants:
                if s in inner:
                    continue
                raise Refused(f"`{squash(src.src(s))[:60]}` is not a coordinate of the flat index")
            w = squash(src.src(b))
            divisor = b
            if width is not None and w != width:
                raise Refused(f"the coordinates divide by `{width}` and `{w}`")
            width = w
            axis = "x" if src.operator(e) == "%" else "y"
            if axis in coords:
                raise Refused(f"two `{src.operator(e)}` coordinates of the flat index")
            coords[axis] = (v, s)
        if set(coords) != {"x", "y"}:
            raise Refused(f"the flat index is not split into `{idx.spelling} % W` and `{idx.spelling} / W`")
        for axis, (v, s) in coords.items():
            if s in inner and inner.index(s) > 1:
                raise Refused(f"the coordinate {v.spelling} is not declared at the start of the guarded block")
        w_poly = poly(src, divisor, {})
        if len(w_poly) != 1 or list(w_poly.values())[0] != 1 or not list(w_poly)[0]:
            raise Refused(f"the width `{width}` is not a single parameter or product of parameters")
        (wm,) = w_poly
        if on_index:
            bound = poly(src, kids[1], {})
            height = {}
            for m, c in bound.items():
                rest = list(m)
                for a in wm:
                    if a not in rest:
                        raise Refused(f"the guard bound `{squash(src.src(kids[1]))}` is not a multiple of the width "
                                      f"`{width}`")
                    rest.remove(a)
                height[tuple(rest)] = c
        else:
            height = poly(src, _coordinate_guard(src, cond, idx.spelling, coords, width, invariants), {})
        h_text = poly_text(height)
        sizes = {}
        for name, t in (("width", width), ("height", h_text)):
            atoms = {a for m in (w_poly if name == "width" else height) for a in m}
            env = {}
            for a in atoms:
                v = size_expr(src, spec, a)
                if v is None:
                    raise Refused(f"`{a}` in the {name} `{t}` has no size value in mep.yaml")
                env[a] = v
            sizes[name] = re.sub(r"[A-Za-z_]\w*(?:\.\w+)?", lambda m: f"({env[m.group(0)]})" if m.group(0) in env
                                 else m.group(0), poly_text(w_poly if name == "width" else height))
        if spec.size(sizes["height"]) is None or spec.size(sizes["width"]) is None:
            raise Refused(f"the grid {sizes['width']} x {sizes['height']} has no value for the MEP's sizes")
        return {"idx": idx, "idx_stmt": idx_stmt, "guard": guard, "cond": cond, "coords": coords, "width": width,
                "height": h_text, "sizes": sizes}

    def space(self, src, spec, launch):
        m = self._match(src, spec, launch)
        h = spec.size(m["sizes"]["height"])
        shapes = [s for s in SHAPES if (h + int(s.split("x")[1]) - 1) // int(s.split("x")[1]) <= GRID_Y_MAX]
        if not shapes:
            raise Refused(f"the height {h} needs more than {GRID_Y_MAX} blocks along y")
        return {"block": shapes}

    def apply(self, src, spec, launch, params):
        m = self._match(src, spec, launch)
        bx, by = (int(v) for v in str(params.get("block", "32x8")).split("x"))
        (vx, sx), (vy, sy) = m["coords"]["x"], m["coords"]["y"]

        def declared(v, init: str) -> str:
            t = src.src(v)
            eq = t.find("=")
            return f"{t[:eq].rstrip()} = {init};"

        idx = m["idx"]
        lines = [declared(vx, "blockIdx.x * blockDim.x + threadIdx.x"),
                 declared(vy, "blockIdx.y * blockDim.y + threadIdx.y")]
        skip = [m["idx_stmt"], m["cond"], sx, sy]
        inside = lambda c: any(src.span(k)[0] <= src.span(c)[0] < src.span(k)[1] for k in skip)
        if any(kind(c) == "DECL_REF_EXPR" and c.spelling == idx.spelling and not inside(c) for c in walk(src.body)):
            # still read: the same value, in the index's own type (a 64-bit index stays 64-bit)
            wide = f"({idx.type.spelling.replace('const ', '')})" if _uncast(src.src(_decl(m['idx_stmt'])[1])) != \
                squash(src.src(_decl(m['idx_stmt'])[1])) else ""
            lines.append(declared(idx, f"{wide}{vy.spelling} * ({m['width']}) + {vx.spelling}"))
        a, b = _whole_lines(src, m["idx_stmt"])
        indent = re.match(r"[ \t]*", src.text[a:]).group(0)
        edits = [(a, b, "".join(f"{indent}{ln}\n" for ln in lines))]
        for s in (sx, sy):
            edits.append(_whole_lines(src, s) + ("",))
        edits.append((*src.span(m["cond"]), f"{vx.spelling} < ({m['width']}) && {vy.spelling} < ({m['height']})"))
        w, h = m["sizes"]["width"], m["sizes"]["height"]
        new = {"grid": [f"({w} + {bx} - 1) / {bx}", f"({h} + {by} - 1) / {by}"], "block": [str(bx), str(by)],
               "shared_mem": str(launch.get("shared_mem", "0"))}
        return Rewrite(src.replace(edits),
                       f"unflatten: the flat index {idx.spelling} over a {m['width']} x {m['height']} grid launched as "
                       f"{bx}x{by} blocks of (x, y) = ({vx.spelling}, {vy.spelling}): no division or modulo per "
                       "thread, 2D rewrites apply next", new)
