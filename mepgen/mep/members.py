"""Data members the application keeps changing: a value read from `obj.count` (or `count` inside a method)
where the member is assigned in several places of the program is state the program computes while it runs,
not a constant of its source. Such a todo says so and has the kind `runtime` (mepgen/todokind.py).
"""
from __future__ import annotations

from .project import Project, walk
from .readers import Why
from .syntax import operator_of, strip
from ..extract.kernels import has_attr, is_kernel

_WRITES = ("BINARY_OPERATOR", "COMPOUND_ASSIGNMENT_OPERATOR", "UNARY_OPERATOR")


def member_writes(project: Project) -> dict[str, list]:
    """FIELD_DECL usr -> the assignments, compound assignments and increments of that member in the project's
    functions (one walk per project)."""
    cached = project.__dict__.get("_member_writes")
    if cached is not None:
        return cached
    out: dict[str, list] = {}
    for fn in project.functions.values():
        for n in walk(fn):
            if n.kind.name not in _WRITES:
                continue
            kids = list(n.get_children())
            if not kids:
                continue
            target = strip(kids[0])
            if target is None or target.kind.name != "MEMBER_REF_EXPR" or target.referenced is None \
                    or target.referenced.kind.name != "FIELD_DECL":
                continue
            op = operator_of(n, kids)
            if op in ("=", "++", "--") or n.kind.name == "COMPOUND_ASSIGNMENT_OPERATOR":
                out.setdefault(target.referenced.get_usr(), []).append(n)
    project.__dict__["_member_writes"] = out
    return out


def changing_member(project: Project, ref, where: str) -> Why | None:
    """Why a member read (`ref`: a MEMBER_REF_EXPR) is program state: a property of the GPU (`prop.warpSize`
    of a cudaDeviceProp), or a member the application assigns in two or more places; else None."""
    field = ref.referenced
    if field is None or field.kind.name != "FIELD_DECL":
        return None
    owner = field.semantic_parent.spelling if field.semantic_parent is not None else ""
    if owner in ("cudaDeviceProp", "cudaDeviceProp_t"):
        return Why(f"`{ref.spelling}` at {where} is a property of the GPU the application runs on "
                   f"(cudaDeviceProp::{field.spelling}), read while it runs", "runtime")
    writes = member_writes(project).get(field.get_usr(), [])
    if len(writes) < 2:
        return None
    owner = field.semantic_parent.spelling if field.semantic_parent is not None else "?"
    return Why(f"`{ref.spelling}` at {where} is the member {owner}::{field.spelling}, which the application changes "
               f"in {len(writes)} places: state the program computes while it runs", "runtime")


def device_written(project: Project, name: str, writes: list, where) -> Why | None:
    """Why a namespace-scope variable is a value the GPU computes: device code changes it (`atomicAdd(&count, 1)`
    in a kernel on a `__managed__` or `__device__` counter), so what the host reads after a launch is the run's.
    `writes`: its changes as (function, change) pairs (mep/flow.py's global_writes)."""
    for fn, m in writes:
        if is_kernel(fn) or has_attr(fn, "CUDADEVICE_ATTR") and not has_attr(fn, "CUDAHOST_ATTR"):
            return Why(f"`{name}` is changed by device code, in {fn.spelling}() at {where(m.node)}: a value the GPU "
                       "computes while the application runs", "runtime")
    return None
