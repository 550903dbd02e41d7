"""Read `nvcc -Xptxas -v` reports: registers, spills, stack and shared memory of each entry function.

Captured on every compile because it is free, and register pressure and spills are the first thing an
optimizer needs to hear about a variant.
"""
from __future__ import annotations

import re

from ..errors import MepgenError
from .results import CompileInfo
from .symbols import find_kernel

_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
_PROPS = re.compile(r"Function properties for (\S+)")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")
_SMEM = re.compile(r"(\d+) bytes smem")
#: ptxas prints Function properties for device functions too; only entries are kernels
ENTRY_FLAG = "entry"


def parse(log: str) -> dict[str, dict]:
    """Function name -> {'entry', 'registers', 'spill_stores', 'spill_loads', 'stack_bytes', 'shared_bytes'}."""
    funcs: dict[str, dict] = {}
    current = None
    for line in log.splitlines():
        m = _ENTRY.search(line)
        if m:
            current = funcs.setdefault(m.group(1), {})
            current[ENTRY_FLAG] = True
            continue
        m = _PROPS.search(line)
        if m:
            current = funcs.setdefault(m.group(1), {})
            continue
        if current is None:
            continue
        m = _FRAME.search(line)
        if m:
            current.update(stack_bytes=int(m.group(1)), spill_stores=int(m.group(2)), spill_loads=int(m.group(3)))
        m = _USED.search(line)
        if m:
            current["registers"] = int(m.group(1))
            s = _SMEM.search(line)
            current["shared_bytes"] = int(s.group(1)) if s else 0
    return funcs


def kernel_info(log: str, kernel: str, seconds: float) -> CompileInfo:
    """The CompileInfo of `kernel` (a callee like `cg::axpy<float>`); empty numbers when not reported."""
    funcs = parse(log)
    entries = [name for name, f in funcs.items() if f.get(ENTRY_FLAG)]
    info = CompileInfo(seconds=round(seconds, 3))
    try:
        mangled = find_kernel(entries, kernel, "the ptxas report")
    except MepgenError:  # no -v report, or a name no demangler resolves: the numbers stay unknown
        return info
    f = funcs[mangled]
    info.registers = f.get("registers")
    info.spill_stores = f.get("spill_stores")
    info.spill_loads = f.get("spill_loads")
    info.stack_bytes = f.get("stack_bytes")
    info.shared_bytes = f.get("shared_bytes")
    return info
