"""What a kernel's own text says about its launch, read by several transformations: the thread cap of its
`__launch_bounds__`, and the size symbols an earlier tune_params candidate redefined (its marker comment)."""
from __future__ import annotations

import re

from ...cexpr import is_one_group, split_top_level


MARK = "// mepgen tune_params:"


def redefined_sizes(text: str) -> list[str]:
    """The size symbols an earlier tune_params candidate set in `text` (its marker comment): mep.yaml's sizes no
    longer describe that kernel, so launch_config and launch_bounds leave it to tune_params."""
    m = re.search(rf"{re.escape(MARK)} ([^(\n]*)", text)
    return re.findall(r"(\w+) = ", m.group(1)) if m else []


def _bounds_value(src, spec) -> int | None:
    """The thread count the kernel's `__launch_bounds__` allows (`src`: a source.KernelSource), None without one or where the sizes do not give its value."""
    head = src.head
    i = head.find("__launch_bounds__")
    if i < 0:
        return None
    j = head.find("(", i)
    depth, k = 0, j
    for k in range(j, len(head)):
        depth += {"(": 1, ")": -1}.get(head[k], 0)
        if depth == 0:
            break
    first = head[j + 1:k].split(",")[0]
    return spec.size(first.strip())


def dim3_components(dims: list) -> list[str]:
    """A side of a launch spelled as one dim3 object (`dim3(NPTS / M1W)`, `(dim3(bx, by))`) as its components
    (`NPTS / M1W`; `bx, by`): the harness builds `dim3 grid(dim3(a, b))`, the same launch as `dim3 grid(a, b)`.
    Anything else is kept as written."""
    if len(dims) != 1:
        return list(dims)
    e = str(dims[0]).strip()
    while is_one_group(e):
        e = e[1:-1].strip()
    if not e.startswith("dim3") or not is_one_group(e[4:].strip()):
        return list(dims)
    parts = split_top_level(e[4:].strip()[1:-1])
    return parts if 1 <= len(parts) <= 3 else list(dims)
