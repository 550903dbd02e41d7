"""A winner whose only launch change divides one grid dimension (`((G) + 4 - 1) / 4`: coarsen_blocks, coarsen,
vector_elements write it so over the MEP's grid G) lands at each launch site as that function of the site's own grid
along that dimension. The library's rule then holds for whatever grid the site computes, round by round: the way a
site inside a loop that changes its grid (extract's `varies`: eikonal's `dimGrid` follows the active blocks) can take
it. Nothing is written where the winner's grid has another form.

What this rests on, beyond the MEP's measured round: that every round's launch relates its grid to the kernel's
bound as that round did (its grid covers the kernel's guard; an exact bound computed in the kernel from its
parameters, as eikonal's `nActiveBlock`, is the one the site computes the grid from). The MEP verifies one round;
the application's own check after the patch (`mepgen tune --check`) tells for the others."""
from __future__ import annotations

import re

from ..cexpr import divided_axis, top_level_spans
from .launch_sites import LaunchChange, arg_span

def over_axis(grid: str, axis: int, along, dim3_local: bool = False) -> str:
    """The launch grid `grid` with its `axis` component replaced by `along(component)`, the others kept: an
    arithmetic expression or a literal is the x component (y and z are 1), `dim3(x, y)` is taken apart, a local
    declared as a dim3 (`dim3_local`) read by its members; anything else (a local of another type, a call) may be
    either, read through dim3's own constructor, which takes both."""
    if dim3_local and re.fullmatch(r"[A-Za-z_]\w*", grid):
        parts = [f"{grid}.{a}" for a in "xyz"]
    elif (ctor := re.fullmatch(r"dim3\s*\((.*)\)", grid, re.S)) is not None:
        body = ctor.group(1)
        parts = [body[a:b].strip() for a, b in top_level_spans(body)]
        parts += ["1"] * (3 - len(parts))
    elif re.fullmatch(r"\d+[uUlL]*", grid) or (re.search(r"[-+*/%]", grid)
                                               and not re.fullmatch(r"[\w.:]+\s*\(.*\)", grid, re.S)):
        if axis == 0:
            return along(grid)
        parts = [grid, "1", "1"]
    else:
        parts = [f"dim3({grid}).{a}" for a in "xyz"]
    parts[axis] = along(parts[axis])
    while len(parts) > 1 and parts[-1] == "1":
        parts.pop()
    return f"dim3({', '.join(parts)})"


def write_divided(change: LaunchChange, kernel: dict, old_block, new_block, old_grid: list[str],
                  new_grid: list[str], text: str) -> bool:
    """The edits at every launch site of `kernel` in `text` when the winner keeps the block and divides one grid
    dimension (True), or nothing (False)."""
    if old_block != new_block:
        return False
    found = divided_axis(old_grid, new_grid)
    if found is None:
        return False
    axis, c = found
    for s in kernel["launch_sites"]:
        lo, hi = arg_span(text, s, 0)
        grid = text[lo:hi].strip()
        dim3_local = re.match(r"dim3\s*\(", s.get("locals", {}).get(grid, "")) is not None
        new = over_axis(grid, axis, lambda x: f"(({x}) + {c} - 1) / {c}", dim3_local)
        change.edits.append((lo, hi, new.encode()))
        change.notes.append(f"{s['file']}:{s['line']}: grid {grid} -> {new} (the winner divides the grid along "
                            f"{'xyz'[axis]} by {c}, at this site's own grid)")
    change.site_grids = True
    return True

