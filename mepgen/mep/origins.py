"""Where a launch's buffers and a kernel's constants come from in the application.

A pointer argument is followed back to the `cudaMalloc` that made it (its byte count gives the element
count); a `__constant__` symbol to the `cudaMemcpyToSymbol` that fills it (its source gives the values).
Both follow function parameters to the callers' arguments, in any translation unit.
"""
from __future__ import annotations

from .project import walk
from .resolve import Resolver, init_expr, strip

_ALLOCATORS = ("cudaMalloc", "cudaMallocManaged", "cudaMallocAsync", "cudaMallocFromPoolAsync")


def allocation(r: Resolver, c) -> tuple[str, str] | None:
    """(bytes expression, allocator) of the device buffer a pointer expression points to."""
    c = strip(c)
    if c is None:
        return None
    if c.kind.name in ("CSTYLE_CAST_EXPR", "CXX_STATIC_CAST_EXPR", "CXX_REINTERPRET_CAST_EXPR"):
        return allocation(r, list(c.get_children())[-1])
    if c.kind.name != "DECL_REF_EXPR" or c.referenced is None:
        return None
    d = c.referenced
    if d.kind.name == "PARM_DECL":
        for frame in reversed(r.bindings):
            if d.get_usr() in frame:
                return allocation(r, frame[d.get_usr()][0])
        index, fn = r.param_index(d)
        for call, caller in r.p.calls.get(fn.get_usr(), []) if fn is not None else []:
            args = list(call.get_arguments())
            with r.inside(caller):
                found = allocation(r, args[index]) if index < len(args) else None
            if found:
                return found
        return None
    if d.kind.name != "VAR_DECL" or d.semantic_parent is None:
        return None
    for n in walk(d.semantic_parent):
        if n.kind.name == "CALL_EXPR" and n.spelling in _ALLOCATORS:
            args = list(n.get_arguments())
            if len(args) >= 2 and _refers_to(args[0], d.get_usr()):
                with r.inside(d.semantic_parent, n.extent.start.offset):    # the size as it is at the call
                    size = r.call_arg(n, 1)
                return (size, n.spelling) if size is not None else None
    init = init_expr(d)
    return allocation(r, init) if init is not None else None


def constant_source(r: Resolver, symbol_usr: str) -> str | None:
    """The value the application copies into a `__constant__` symbol (cudaMemcpyToSymbol's source)."""
    for name in ("cudaMemcpyToSymbol", "cudaMemcpyToSymbolAsync"):
        for call, caller in r.p.calls_named(name):
            args = list(call.get_arguments())
            if not args or not _refers_to(args[0], symbol_usr):
                continue
            toks = r.call_arg_tokens(call, 1)
            if toks[:1] == ["&"]:
                toks = toks[1:]
            with r.inside(caller):
                return r.tokens_expr(toks)
    return None


def _refers_to(c, usr: str) -> bool:
    return any(n.kind.name == "DECL_REF_EXPR" and n.referenced is not None and n.referenced.get_usr() == usr
               for n in walk(c))
