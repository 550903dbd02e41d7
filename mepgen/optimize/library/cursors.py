"""Helpers over libclang cursors and the kernel's text, shared by the kernel model (source.py), the analyses
(analysis.py) and the normalization steps (normalize.py, normalize_sink.py): below all of them, so that the
kernel model can normalize itself with steps that use the analyses."""
from __future__ import annotations


class Refused(Exception):
    """The rewrite does not apply here or would be unsafe; the message says why, for the trajectory."""


def walk(c):
    yield c
    for k in c.get_children():
        yield from walk(k)


def kind(c) -> str:
    return c.kind.name


def strip(c):
    """Through implicit casts, parentheses and unexposed wrappers to the expression that matters."""
    while c is not None and kind(c) in ("UNEXPOSED_EXPR", "PAREN_EXPR", "CSTYLE_CAST_EXPR") and \
            kind(c) != "CSTYLE_CAST_EXPR":
        kids = list(c.get_children())
        if len(kids) != 1:
            break
        c = kids[0]
    return c


def _whole_lines(src, stmt) -> tuple[int, int]:
    """The span of a statement with its semicolon, its indentation and its line's end: removing it leaves no
    blank line behind."""
    a, b = src.span(stmt)
    b = _past_semicolon(src.text, b)
    while a > 0 and src.text[a - 1] in " \t":
        a -= 1
    if b < len(src.text) and src.text[b] == "\n":
        b += 1
    return a, b


def _past_semicolon(text: str, pos: int) -> int:
    j = pos
    while j < len(text) and text[j] in " \t":
        j += 1
    return j + 1 if j < len(text) and text[j] == ";" else pos


def _unwrap(c):
    while kind(c) in ("UNEXPOSED_EXPR", "PAREN_EXPR") and len(list(c.get_children())) == 1:
        c = list(c.get_children())[0]
    return c
