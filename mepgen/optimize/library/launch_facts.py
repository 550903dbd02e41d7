"""What a kernel's own text says about its launch, read by several transformations: the thread cap of its
`__launch_bounds__`, and the size symbols an earlier tune_params candidate redefined (its marker comment)."""
from __future__ import annotations

import re

from .source import KernelSource


MARK = "// mepgen tune_params:"


def redefined_sizes(text: str) -> list[str]:
    """The size symbols an earlier tune_params candidate set in `text` (its marker comment): mep.yaml's sizes no
    longer describe that kernel, so launch_config and launch_bounds leave it to tune_params."""
    m = re.search(rf"{re.escape(MARK)} ([^(\n]*)", text)
    return re.findall(r"(\w+) = ", m.group(1)) if m else []


def _bounds_value(src: KernelSource, spec) -> int | None:
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
