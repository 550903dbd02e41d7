"""The tolerances a mep.yaml's `verify` gets for each output: exact for integers; for floats tight, looser where the
kernel may sum into the output (a reordered sum is a correct optimization), loosest for atomics."""
from __future__ import annotations

import re

from ..spec import Constant, Param, Tolerance
from .project import Project

FLOAT_TOL = {"float32": (1e-5, 1e-6), "float64": (1e-12, 1e-14), "float16": (1e-3, 1e-3)}
# a loop in the kernel may sum into an output: optimizations reorder such sums (warp shuffles, tiles,
# unrolling), which changes the last bits; these tolerances accept a reordered fp32 sum of thousands of terms.
# The absolute part matters for sums that cancel to near zero: on the H200 a 32-lane warp-per-row dense_matvec
# (4096 terms in [-1, 1]^2) differed from the sequential sum by up to 1.75e-4 on outputs of magnitude ~0.01.
REDUCTION_FLOAT_TOL = {"float32": (1e-4, 1e-3), "float64": (1e-10, 1e-10), "float16": (1e-2, 1e-2)}
ATOMIC_FLOAT_TOL = {"float32": (1e-4, 1e-3), "float64": (1e-10, 1e-10), "float16": (1e-2, 1e-2)}


def summing_loops(project: Project, cursor, kernel: dict) -> int:
    """Loop depth that may sum into outputs: a single grid-stride loop (`i += blockDim.x * gridDim.x`) is an
    element-wise kernel written for any grid, not a reduction."""
    depth = kernel.get("loop_depth", 0)
    if depth == 1 and "gridDim" in project.text(cursor):
        return 0
    return depth


def tolerances(params: list[Param], facts, loop_depth: int = 0, constants: list[Constant] = (),
                kernel_text: str = "") -> dict[str, Tolerance]:
    """By dtype: exact for integers; for floats tight, looser when the kernel has loops that may sum into the
    output (a reordered sum is a correct optimization), loosest for atomics (their order varies run to run). A
    written `__device__` variable has no access facts: atomics anywhere in the kernel count for it."""
    out = {}
    for p in params:
        if p.role not in ("out", "inout"):
            continue
        atomic = any(a.kind == "atomic" for a in facts.accesses.get(p.name, []))
        table = ATOMIC_FLOAT_TOL if atomic else REDUCTION_FLOAT_TOL if loop_depth > 0 else FLOAT_TOL
        rtol, atol = table.get(p.dtype, (0.0, 0.0))
        out[p.name] = Tolerance(rtol, atol)
    for c in constants:
        if c.role == "inout":
            atomic = re.search(r"\batomic[A-Z]\w*\s*\(", kernel_text or "") is not None
            table = ATOMIC_FLOAT_TOL if atomic else REDUCTION_FLOAT_TOL if loop_depth > 0 else FLOAT_TOL
            rtol, atol = table.get(c.dtype, (0.0, 0.0))
            out[c.name] = Tolerance(rtol, atol)
    return out
