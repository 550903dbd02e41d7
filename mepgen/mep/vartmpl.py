"""The instantiations of a variable template in constant or device memory that an MEP uploads to.

`template <typename T> __constant__ T taps[TAPS];` read as `taps<T>[j]` by `blur<T>`: launched as
`blur<double>`, the kernel reads `taps<double>`, a `double[TAPS]`; the harness fills that instantiation as
it fills a plain `__constant__` array. The arguments are the kernel's uses with the MEP's template
arguments put in for the kernel's parameters; the element type and the extents are the template's
declaration with the instantiation's arguments put in for its own parameters; extents are evaluated with
the application's macros (by the compiler where arithmetic needs it). What cannot be derived so (a use
only inside a device function, an argument naming a parameter the MEP did not settle) is said, never guessed.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from .. import cexpr
from ..parsing.vartemplates import SPACE_WORDS, template_usr
from .project import Project, walk
from .targs import substitute

#: words of a declaration that are not its type
_NOT_TYPE = set(SPACE_WORDS) | {"static", "extern", "inline", "constexpr"}


@dataclass
class Instance:
    symbol: str                 # `ns::taps<double>`: what the harness names in cudaMemcpyToSymbol
    ctype: str | None = None    # `double[10]`
    element: str | None = None  # `double`
    count: str | None = None    # number of elements (a number)
    why: str | None = None      # why it could not be derived (then only `symbol` may be set)


def _spell(tokens: list[str]) -> str:
    return re.sub(r"\s*,\s*", ", ", " ".join(tokens)).replace("< ", "<").replace(" >", ">")


def _angle_args(tokens: list[str], start: int) -> tuple[list[str], int] | None:
    """Tokens between the `<` at `start` and its `>`, and the index past the `>`."""
    if tokens[start:start + 1] != ["<"]:
        return None
    depth = 0
    for i in range(start, len(tokens)):
        depth += {"<": 1, ">": -1, ">>": -2, "(": 100, ")": -100}.get(tokens[i], 0)
        if depth <= 0:
            return tokens[start + 1:i], i + 1
    return None


def _uses(kernel_cursor, g: dict) -> list[str]:
    """The template-argument texts of the kernel's reads of the template (`T`, `float`), in source order."""
    out: list[str] = []
    for node in walk(kernel_cursor):
        if node.kind.name != "DECL_REF_EXPR":
            continue
        ref = node.referenced
        dependent = any(ch.kind.name == "OVERLOADED_DECL_REF" and ch.spelling == g["name"]
                        for ch in node.get_children())
        specialized = ref is not None and ref.kind.name == "UNEXPOSED_DECL" and ref.get_usr() \
            and template_usr(ref.get_usr()) == g["usr"] and ref.get_usr() != g["usr"]
        if not (dependent or specialized):
            continue
        tokens = [t.spelling for t in node.get_tokens()]
        if g["name"] not in tokens:
            continue
        found = _angle_args(tokens, tokens.index(g["name"]) + 1)
        if found is not None:
            text = _spell(found[0])
            if text not in out:
                out.append(text)
    return out


def _declaration(decl) -> tuple[list[str], list[str], list[str]] | None:
    """(the template's parameter names, its type's tokens, the extents' texts) from its declaration."""
    tokens = [t.spelling for t in decl.get_tokens()]
    header = _angle_args(tokens, 1) if tokens[:1] == ["template"] else None
    if header is None:
        return None
    params = [m.group(1) for part in cexpr.split_top_level(_spell(header[0]))
              if (m := re.search(r"(\w+)\s*(?:=.*)?$", part.strip()))]
    rest = tokens[header[1]:]
    if decl.spelling not in rest:
        return None
    at = rest.index(decl.spelling)
    type_tokens = [t for t in rest[:at] if t not in _NOT_TYPE]
    extents, i = [], at + 1
    while rest[i:i + 1] == ["["]:
        close = rest.index("]", i)
        extents.append(_spell(rest[i + 1:close]))
        i = close + 1
    return params, type_tokens, extents


def instances(project: Project, g: dict, kernel_cursor, targs: dict[str, str]) -> list[Instance]:
    """The instantiations of the variable template `g` (a closure member) the kernel reads when launched
    with `targs` (its template parameters' names -> the MEP's arguments)."""
    template = f"{g['qualified_name']}<...>"
    decl = project.var_templates.get(g["usr"])
    uses = _uses(kernel_cursor, g) if kernel_cursor is not None else []
    if decl is None or not uses:
        return [Instance(template, why=f"{g['qualified_name']} is a variable template the kernel reads only "
                         "through a device function or a macro; mepgen did not derive which instantiation "
                         f"(write `{template}` with its arguments)")]
    parsed = _declaration(decl)
    kernel_params = set(targs) | {c.spelling for c in kernel_cursor.get_children()
                                  if c.kind.name.startswith("TEMPLATE_") and c.kind.name.endswith("PARAMETER")}
    out = []
    for text in uses:
        args = substitute(text, targs)
        symbol = f"{g['qualified_name']}<{args}>"
        open_ = sorted(p for p in kernel_params - set(targs) if re.search(rf"(?<![\w:]){re.escape(p)}\b", args))
        if open_:
            out.append(Instance(symbol, why=f"{symbol} names the kernel's template parameter(s) "
                                f"{', '.join(open_)}, which this MEP did not settle"))
            continue
        if parsed is None:
            out.append(Instance(symbol, why=f"mepgen could not read the declaration of {g['qualified_name']}"))
            continue
        params, type_tokens, extents = parsed
        values = cexpr.split_top_level(args)
        mapping = dict(zip(params, (v.strip() for v in values)))
        element = substitute(_spell(type_tokens), mapping)
        counts = [cexpr.integer(substitute(e, mapping), project.macros) for e in extents]
        if len(values) != len(params) or any(c is None for c in counts):
            out.append(Instance(symbol, why=f"the extents {''.join(f'[{e}]' for e in extents)} of {symbol} do "
                                "not evaluate with the application's macros and the instantiation's arguments"))
            continue
        count = 1
        for c in counts:
            count *= c
        out.append(Instance(symbol, f"{element}{''.join(f'[{c}]' for c in counts)}", element, str(count)))
    return out


def refers_to(c, g: dict, inst: Instance) -> bool:
    """Whether the expression `c` (cudaMemcpyToSymbol's first argument) names the instantiation `inst` of the
    template `g`: `taps<T>` in a host template (any of its instantiations), `taps<double>` where its type is
    the instantiation's."""
    for n in walk(c):
        if n.kind.name == "OVERLOADED_DECL_REF" and n.spelling == g["name"]:
            return True
        if n.kind.name == "DECL_REF_EXPR" and n.referenced is not None and n.referenced.get_usr() \
                and template_usr(n.referenced.get_usr()) == g["usr"] and n.referenced.get_usr() != g["usr"]:
            return _nospace(n.type.get_canonical().spelling) == _nospace(inst.ctype or "")
    return False


def _nospace(text: str) -> str:
    return re.sub(r"\s+", "", text)
