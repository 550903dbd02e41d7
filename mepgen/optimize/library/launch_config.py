"""Launch configuration: the block size (1D) or block shape (2D, 3D), with the grid (and dynamic shared memory)
recomputed from the same expressions mep.yaml uses.

Applies when every block dimension of the launch is a size macro or a literal that the grid expression
divides by, and the kernel itself does not bake that value in: a `__shared__ float s[BLOCK_SIZE]`,
`__launch_bounds__(BLOCK_SIZE)` or `i = blockIdx.x * BLOCK_SIZE + ...` would break with another block,
so the rewrite refuses (naming the use); so does a literal block (set by an earlier rewrite such as
split_columns' `__shared__ float part[8][32]`) that the kernel spells. Only the launch changes.

A captured launch (`mepgen capture`) is numbers only: grid 4096, block 256, with no expression that says how the
grid follows the block. Where the kernel's threads each do one element's work behind a guard (1D `i < N`, 2D
`x < W && y < H`), the grid follows as ceil(N / block) along each axis (literal_launch.py).
"""
from __future__ import annotations

import re

from ...cexpr import with_block
from .base import Rewrite, Transformation, loop_rounds, several_blocks
from .block_expr import expression_block, substitute
from .launch_facts import _bounds_value, redefined_sizes
from .literal_launch import is_literal, literal_extents
from .source import Refused

SHAPES_1D = [64, 128, 256, 512, 1024]
SHAPES_2D = ["32x4", "32x8", "64x4", "16x16", "32x16", "64x8", "128x2", "16x8"]
# 3D: a warp's 32 threads along x first (coalesced rows); depth 1 suits a kernel that already walks z per thread
SHAPES_3D = ["32x4x2", "32x8x1", "64x4x1", "64x2x2", "128x2x1", "32x4x4", "32x16x1", "64x4x2"]
SHAPES = {1: SHAPES_1D, 2: SHAPES_2D, 3: SHAPES_3D}


def _token(expr: str) -> str:
    e = expr.strip()
    while e.startswith("(") and e.endswith(")"):
        e = e[1:-1].strip()
    return e


def _threads(shape) -> int:
    n = 1
    for v in str(shape).split("x"):
        n *= int(v)
    return n


class LaunchConfig(Transformation):
    def __init__(self):
        super().__init__("launch_config", "block size / shape with the grid derived from it", {"block": 256})

    def _tokens(self, src, launch, spec=None) -> list[str]:
        if redefined_sizes(src.text):
            raise Refused("tune_params set this kernel's sizes: its own search covers the block")
        tokens = [_token(b) for b in launch["block"]]
        if len(tokens) > 3:
            raise Refused(f"a block of {len(tokens)} dimensions")
        # a captured launch (numbers): the grid follows the guard's bounds, never a number that equals the block
        literal = spec is not None and is_literal(launch)
        if literal:
            literal_extents(src, spec, launch)
        for d, t in enumerate(tokens):
            expr = expression_block(launch["block"][d], launch["grid"][d], spec, src.head + src.src(src.body)) \
                if spec is not None and len(tokens) == 1 and d < len(launch["grid"]) else None
            if expr is not None:        # `n < B ? n : B`, which the grid divides by: replaced there as a whole
                tokens[d] = expr
                continue
            if not (t.isidentifier() or t.isdigit()):
                raise Refused(f"block dimension `{launch['block'][d]}` is not a macro or a literal")
            grid_d = launch["grid"][d] if d < len(launch["grid"]) else ""
            if not literal and not re.search(rf"(?<![\w.]){re.escape(t)}(?![\w.])", grid_d):
                raise Refused(f"the grid `{launch['grid']}` is not derived from the block dimension `{t}`")
            if t.isidentifier() or t.isdigit():   # a literal block (a rewrite's) may size arrays or strides
                used = re.search(rf"(?<![\w.]){re.escape(t)}(?![\w.])", src.head + src.src(src.body))
                if used:
                    line = (src.head + src.src(src.body))[:used.start()].count("\n")
                    text = (src.head + src.src(src.body)).splitlines()[line].strip()
                    raise Refused(f"the kernel bakes the block size {t} in: `{text[:70]}`")
                if t.isdigit():                   # the same number through a macro (`__shared__ float s[BS]`)
                    baked = _macro_for(src, int(t))
                    if baked is not None:
                        raise Refused(f"the kernel bakes the block size {t} in: `{baked[1][:70]}` ({baked[0]} = {t})")
        shared = str(launch.get("shared_mem", "0"))
        for t in {t for t in tokens if tokens.count(t) > 1 and t.isidentifier()}:
            # `dim3 block(BS, BS)`: each grid dimension follows its own block dimension; only a shared-memory
            # size over the macro would not say which dimension it means
            if re.search(rf"(?<![\w.]){re.escape(t)}(?![\w.])", shared):
                raise Refused(f"two block dimensions are the macro {t}, which the shared-memory size uses")
        return tokens

    def space(self, src, spec, launch):
        fixed = several_blocks(spec) or loop_rounds(spec)
        if fixed:
            raise Refused(fixed)
        tokens = self._tokens(src, launch, spec)
        shapes = SHAPES[len(tokens)]
        if src.has_launch_bounds():      # a block larger than the bound would not launch
            cap = _bounds_value(src, spec)
            shapes = [s for s in shapes if cap is not None and _threads(s) <= cap]
            if not shapes:
                raise Refused("__launch_bounds__ leaves no block size to try")
        return {"block": shapes}

    def apply(self, src, spec, launch, params):
        tokens = self._tokens(src, launch, spec)
        value = params["block"]
        dims = [int(value)] if len(tokens) == 1 else [int(v) for v in str(value).split("x")]
        current = [int(t) if t.isdigit() else spec.sizes.get(t, spec.size(t)) for t in tokens]
        if current == dims:          # the same launch spelled with a literal: a candidate that changes nothing
            raise Refused(f"the block is already {'x'.join(map(str, dims))} threads")
        grid, shared = list(launch["grid"]), str(launch.get("shared_mem", "0"))
        extents = literal_extents(src, spec, launch) if is_literal(launch) else None
        for d, (t, v) in enumerate(zip(tokens, dims)):
            if extents is not None:
                grid[d] = str(-(-extents[d] // v))     # captured: ceil(N / block)
                continue
            grid[d] = with_block(grid[d], t, v) if t.isidentifier() or t.isdigit() else substitute(grid[d], t, v)
            if d == 0 and t.isidentifier():
                shared = with_block(shared, t, v)
        new = {"grid": grid, "block": [str(v) for v in dims], "shared_mem": shared}
        shape = "x".join(map(str, dims))
        return Rewrite(src.text, f"launch configuration: {shape} threads per block (was "
                                 f"{'x'.join(launch['block'])}), grid {', '.join(grid)}", new)


def _macro_for(src, value: int) -> tuple[str, str] | None:
    """(macro, the kernel's line) where the kernel spells a macro whose value is `value` (a literal launch block
    that the kernel sizes with its own name for the number)."""
    body = src.head + src.src(src.body)
    for name in sorted(set(re.findall(r"(?<![\w.])([A-Za-z_]\w*)(?![\w.(])", body))):
        if name in src.spec.sizes or src.param(name) is not None:
            continue
        expanded = src.expand(name).strip("() ")
        if expanded != name and expanded.isdigit() and int(expanded) == value:
            at = re.search(rf"(?<![\w.]){re.escape(name)}(?![\w.])", body)
            return name, body.splitlines()[body[:at.start()].count("\n")].strip()
    return None
