"""The MEP's size symbols spelled as a launch site writes them, so a winner's grid can go back to the site.

`mepgen mep` traced the site's expressions to size symbols: the site's grid `blocks`, a local initialized
to `(nrows + BLOCK_SIZE - 1) / BLOCK_SIZE`, became `(MAT_N + BLOCK_SIZE - 1) / BLOCK_SIZE` in mep.yaml, and
the launch argument `nrows` became the scalar value `MAT_N`. Aligning the two spellings token by token gives
MAT_N -> nrows at this site; a winner's grid `((long long)(MAT_N) * 32 + 256 - 1) / 256` is then written
`((long long)(nrows) * 32 + 256 - 1) / 256` there. Launch arguments give a symbol its spelling only when
they agree (two arguments both traced to MAT_N, `nrows` and `ncols`, say nothing); the grid's own alignment
decides first. A symbol left without a spelling is kept only where the application defines it as a macro
(BLOCK_SIZE), otherwise the translation is refused.
"""
from __future__ import annotations

import difflib
import re

from ..spec import Spec

_TOKEN = re.compile(r"\d+(?:\.\d*)?(?:[eE][-+]?\d+)?[uUlLfF]*|[A-Za-z_]\w*|::|->|<<|>>|<=|>=|==|!=|&&|\|\||\S")
_IDENT = re.compile(r"(?<![\w.])[A-Za-z_]\w*")


def tokens(expr: str) -> list[str]:
    return _TOKEN.findall(expr or "")


def _resolve(site: dict, expr: str) -> str:
    """The site's expression with a local it names replaced by that local's initializer."""
    expr = (expr or "").strip()
    return site.get("locals", {}).get(expr, expr)


def _align(mep_expr: str, site_expr: str, symbols: set[str]) -> dict[str, str] | None:
    """symbol -> site spelling from one pair of expressions; None when they do not line up."""
    a, b = tokens(mep_expr), tokens(site_expr)
    out: dict[str, str] = {}
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op == "equal":
            out.update({t: t for t in a[i1:i2] if t in symbols})
            continue
        if op != "replace" or i2 - i1 != 1 or a[i1] not in symbols:
            return None
        spelled = " ".join(b[j1:j2])
        spelled = spelled if j2 - j1 == 1 else f"({_glue(b[j1:j2])})"
        if out.get(a[i1], spelled) != spelled:
            return None
        out[a[i1]] = spelled
    return out


def _glue(toks: list[str]) -> str:
    s = " ".join(toks)
    return re.sub(r"\s*(\.|->|::)\s*", r"\1", s)


def site_spelling(spec: Spec, site: dict) -> dict[str, str]:
    """For one launch site: each size symbol the site lets us spell, and how."""
    symbols = set(spec.sizes)
    spelling: dict[str, str] = {}
    pairs = list(zip(spec.launch.grid, [site.get("grid") or ""])) if len(spec.launch.grid) == 1 else []
    for mep_expr, site_expr in pairs:
        got = _align(mep_expr, _resolve(site, site_expr), symbols)
        for sym, spelled in (got or {}).items():
            spelling.setdefault(sym, spelled)
    # launch arguments: a scalar whose value is exactly one symbol, passed as a plain expression
    by_symbol: dict[str, set[str]] = {}
    args = site.get("args") or []
    for i, p in enumerate(spec.params):
        value = (p.value or "").strip()
        if p.role == "scalar" and value in symbols and i < len(args):
            by_symbol.setdefault(value, set()).add(_resolve(site, args[i]).strip())
    for sym, spelled in by_symbol.items():
        if len(spelled) == 1 and sym not in spelling:
            (only,) = spelled
            spelling[sym] = only if re.fullmatch(r"[A-Za-z_]\w*", only) else f"({only})"
    return spelling


def respell(expr: str, spelling: dict[str, str], symbols: set[str], macros: set[str]) -> tuple[str, list[str]]:
    """`expr` over size symbols, spelled for the site; and the symbols that have no spelling there."""
    missing: list[str] = []

    def one(m: re.Match) -> str:
        name = m.group(0)
        if name in spelling:
            return spelling[name]
        if name in symbols and name not in macros:
            missing.append(name)
        return name
    return _IDENT.sub(one, expr), missing
