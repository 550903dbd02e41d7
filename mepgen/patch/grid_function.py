"""One dimension of a launch site's grid rewritten as a function of what the site computes there: `dim3(g.x, g.y,
g.z)` apart, `dim3(x, y)` taken apart, an arithmetic expression as the x component (captured_launch.py writes a
winner's coarsened grid over each site's own grid so)."""
from __future__ import annotations

import re

from ..cexpr import top_level_spans


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
