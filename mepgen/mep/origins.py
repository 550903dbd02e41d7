"""Where a kernel's constants come from in the application: a `__constant__` symbol is followed to the
`cudaMemcpyToSymbol` that fills it (its source gives the values). Buffers' allocations: mep/allocs.py.
"""
from __future__ import annotations

from .project import walk
from .resolve import Resolver


def constant_source(r: Resolver, symbol_usr: str, names=None) -> str | None:
    """The value the application copies into a `__constant__` symbol (cudaMemcpyToSymbol's source).
    `names`: whether the call's first argument names the symbol (default: a reference to `symbol_usr`)."""
    for name in ("cudaMemcpyToSymbol", "cudaMemcpyToSymbolAsync"):
        for call, caller in r.p.calls_named(name):
            args = list(call.get_arguments())
            if not args or not (names(args[0]) if names else _refers_to(args[0], symbol_usr)):
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
