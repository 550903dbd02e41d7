"""Function-like macros in host expressions, expanded the way the preprocessor does.

A launch written `k<<<NUM_BLOCKS(n, TPB), TPB>>>` or an allocation `cudaMalloc(&p, ROUND_UP(n, 32) * 4)` is a
macro invocation in the source: its cursors all share the invocation's extent, so the resolver cannot splice
values into them. Expanding the invocation's tokens with the macro's own definition (arguments parenthesized,
nested function-like macros expanded too) gives an expression over the caller's names, which the resolver then
follows like any other. Stringizing (`#`), pasting (`##`) and variadic macros are not expanded (None).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

_TOKEN = re.compile(r"[A-Za-z_]\w*|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?\w*|::|->|<<|>>|<=|>=|==|!=|&&|\|\||\S")


@dataclass(frozen=True)
class FunctionMacro:
    params: tuple[str, ...]
    body: tuple[str, ...]


def tokens(text: str) -> list[str]:
    """C++ tokens of an expression's text (libclang gives none for a cursor inside a macro invocation)."""
    text = re.sub(r"//[^\n]*|/\*.*?\*/", " ", text, flags=re.S)
    return _TOKEN.findall(text)


def definition(tokens: list[str]) -> FunctionMacro | None:
    """A function-like macro from its definition's tokens (`NAME ( a , b ) body...`), None if not one we expand."""
    if len(tokens) < 3 or tokens[1] != "(" or ")" not in tokens:
        return None
    close = tokens.index(")")
    params = [t for t in tokens[2:close] if t != ","]
    body = tokens[close + 1:]
    if "..." in params or "#" in body or "##" in body or "__VA_ARGS__" in body:
        return None
    return FunctionMacro(tuple(params), tuple(body))


def split_args(tokens: list[str]) -> tuple[list[list[str]], int] | None:
    """Arguments of an invocation `( a , f ( b , c ) )` whose tokens start at its `(`, and the index just past
    its closing `)`; None when unbalanced."""
    if not tokens or tokens[0] != "(":
        return None
    args, cur, depth = [], [], 0
    for i, t in enumerate(tokens[1:], start=1):
        if t in ("(", "[", "{"):
            depth += 1
        elif t in (")", "]", "}"):
            if depth == 0:
                args.append(cur)
                return args, i + 1
            depth -= 1
        if t == "," and depth == 0:
            args.append(cur)
            cur = []
        else:
            cur.append(t)
    return None


def expand(tokens: list[str], macros: dict[str, FunctionMacro], depth: int = 0) -> list[str] | None:
    """The tokens with every invocation of a known function-like macro expanded; None when one cannot be."""
    if depth > 8:
        return None
    out, i = [], 0
    while i < len(tokens):
        t = tokens[i]
        m = macros.get(t)
        if m is None or i + 1 >= len(tokens) or tokens[i + 1] != "(":
            out.append(t)
            i += 1
            continue
        split = split_args(tokens[i + 1:])
        if split is None:
            return None
        args, used = split
        if args == [[]] and not m.params:
            args = []
        if len(args) != len(m.params):
            return None
        bound = dict(zip(m.params, args))
        body = []
        for b in m.body:
            body += _group(bound[b]) if b in bound else [b]
        inner = expand(body, {k: v for k, v in macros.items() if k != t}, depth + 1)   # no self-recursion
        if inner is None:
            return None
        out += _group(inner)
        i += 1 + used
    return out


def _group(toks: list[str]) -> list[str]:
    """Parenthesized, unless one token or already one group: `(n)` for a macro's `((n) + 1)` is noise."""
    if len(toks) <= 1 or (toks[0] == "(" and (split_args(toks) or (None, -1))[1] == len(toks)):
        return list(toks)
    return ["(", *toks, ")"]


def invocation(tokens: list[str], macros: dict[str, FunctionMacro]) -> bool:
    """Whether the tokens are exactly one invocation of a known function-like macro: `NAME ( ... )`."""
    if len(tokens) < 3 or tokens[0] not in macros or tokens[1] != "(":
        return False
    split = split_args(tokens[1:])
    return split is not None and split[1] + 1 == len(tokens)


def shape(toks: list[str]) -> str:
    """The outermost form of an expression's tokens: `ref:NAME`, `call:NAME`, `literal` or `expr`."""
    while len(toks) > 2 and toks[0] == "(" and (split_args(toks) or (None, -1))[1] == len(toks):
        toks = toks[1:-1]
    if len(toks) == 1:
        return f"ref:{toks[0]}" if re.fullmatch(r"[A-Za-z_]\w*", toks[0]) else "literal"
    if len(toks) > 2 and re.fullmatch(r"[A-Za-z_]\w*", toks[0]) and toks[1] == "(" and \
            (split_args(toks[1:]) or (None, -1))[1] + 1 == len(toks):
        return f"call:{toks[0]}"
    return "expr"
