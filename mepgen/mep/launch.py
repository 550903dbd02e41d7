"""A launch site as cursors: the grid, block, shared-memory and argument expressions the resolver follows.

The inventory records a launch site's text; the MEP needs the AST behind it. Sites inside a macro
argument (`CUDA_CHECK(cudaLaunchKernel(...))`) have no text in the inventory, so this module finds every
site again in the enclosing function and reads `cudaLaunchKernel`'s `void* args[] = {&u, &nx, ...}` array.
"""
from __future__ import annotations

from dataclasses import dataclass

from .project import LAUNCH_APIS, Project, walk
from .syntax import init_expr, strip
from ..extract.launches import _overloaded
from ..parsing.clang import specialized_template
from ..cexpr import is_one_group, split_top_level

_CONFIG_CALLS = ("__cudaPushCallConfiguration", "cudaConfigureCall")


@dataclass
class LaunchCursors:
    kind: str                 # triple_chevron | cudaLaunchKernel | ...
    grid: object
    block: object
    shared_mem: object | None
    args: list                # one cursor per kernel parameter (None where unknown)
    line: int
    callee: object = None     # the expression naming the kernel (`k`, `k<T, 4>`)


def _kernel_usrs(project: Project, c) -> set[str]:
    out = set()
    for n in walk(c):
        if n.kind.name not in ("DECL_REF_EXPR", "OVERLOADED_DECL_REF") or n.referenced is None:
            continue
        # in a template, `k<<<...>>>(x)` names the kernel template through an unresolved lookup
        refs = _overloaded(n) if n.kind.name == "OVERLOADED_DECL_REF" else [n.referenced]
        for ref in refs or [n.referenced]:
            out.add(ref.get_usr())
            t = specialized_template(ref) if ref.kind.name == "FUNCTION_DECL" else None
            if t is not None:
                out.add(t.get_usr())
    return out


def find_launches(project: Project, kernel_usr: str, function_usr: str, file: str | None = None) \
        -> list[LaunchCursors]:
    """Every launch of the kernel in one host function (the one in `file`, when several share its name), in
    source order."""
    fn = project.find_function(function_usr, file)
    if fn is None:
        return []
    out = []
    for n in walk(fn):
        if n.kind.name != "CALL_EXPR":
            continue
        kids = list(n.get_children())
        config = next((k for k in kids if k.kind.name == "CALL_EXPR" and k.spelling in _CONFIG_CALLS), None)
        if config is not None and kids and kernel_usr in _kernel_usrs(project, kids[0]):
            cfg = list(config.get_arguments())
            args = [k for k in kids[1:] if k is not config and k.extent.start.offset > config.extent.end.offset]
            out.append(LaunchCursors("triple_chevron", cfg[0], cfg[1] if len(cfg) > 1 else None,
                                     cfg[2] if len(cfg) > 2 else None, args, n.location.line, kids[0]))
        elif n.spelling in LAUNCH_APIS:
            api = list(n.get_arguments())
            if len(api) >= 4 and kernel_usr in _kernel_usrs(project, api[0]):
                out.append(LaunchCursors(n.spelling, api[1], api[2], api[4] if len(api) > 4 else None,
                                         _args_array(api[3]), n.location.line, api[0]))
    return out


def _args_array(c) -> list:
    """`args` in cudaLaunchKernel(f, g, b, args, ...): the pointed-to expressions of `void* args[] = {&a, ...}`."""
    c = strip(c)
    if c is None or c.kind.name != "DECL_REF_EXPR" or c.referenced is None:
        return []
    init = init_expr(c.referenced)
    if init is None or strip(init).kind.name != "INIT_LIST_EXPR":
        return []
    out = []
    for item in strip(init).get_children():
        item = strip(item)
        while item is not None and item.kind.name in ("CSTYLE_CAST_EXPR", "UNARY_OPERATOR", "CXX_STATIC_CAST_EXPR",
                                                      "CXX_REINTERPRET_CAST_EXPR"):
            kids = list(item.get_children())
            item = strip(kids[-1]) if kids else None
        out.append(item)
    return out


def dims(resolver, c) -> list[str] | None:
    """A grid or block expression as 1-3 dimension expressions (`dim3 grid(a, b)` -> [a, b])."""
    value = resolver.expr(c)
    if value is None:
        return None
    v = value.strip()
    inner = v
    while is_one_group(inner):                                          # `((dim3(a, b)))`
        inner = inner[1:-1].strip()
    if inner.startswith("dim3("):
        v = inner
    while v.startswith("dim3(") and v.endswith(")"):
        inner = split_top_level(v[5:-1])
        if len(inner) == 1 and inner[0].startswith("dim3("):
            v = inner[0]
            continue
        return [x for x in inner if x] or ["1"]
    return [v]
