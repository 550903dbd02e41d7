"""A command-line word read the way C reads it: `atoi("1024x768")` is 1024, `atoi(strchr(optarg, 'x') + 1)` is 768.

Programs take a size as part of a word (`-d 1024x768`, `-s 300,200`) and read it with the C library: a converter
(`atoi`, `strtol`, `atof`...) reads the number at the start of the text and stops at the first character that is
not part of it; `strstr`/`strchr`/`strrchr` find where a part starts and `p + k` skips k characters. This module
evaluates such an expression over the word the run command gives (for `optarg` or `argv[k]`) with those
semantics. A converter whose text does not start with a number gives no value (C would give 0; mepgen states no
value it cannot show is meant), and so does any form not listed here.
"""
from __future__ import annotations

import re

from .mods import _contains, _mentions, _walk, modifications
from .syntax import init_expr

_INT = ("atoi", "atol", "atoll", "strtol", "strtoll", "strtoul", "strtoull", "stoi", "stol", "stoll", "stoul",
        "stoull")
_FLOAT = ("atof", "strtod", "strtof", "strtold", "stof", "stod", "stold")
_TOKEN = re.compile(r'\s*(?:(?P<str>"(?:[^"\\]|\\.)*")|(?P<chr>\'(?:[^\'\\]|\\.)\')|(?P<num>\d+)|(?P<name>[A-Za-z_]\w*'
                    r'(?:\s*::\s*[A-Za-z_]\w*)*)|(?P<op>[()\[\],+&*]))')


class _NoValue(Exception):
    """A part of the expression this reader gives no value for (the message names it): never a guessed value."""


def _tokens(text: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise _NoValue(text[pos:])
        kind = m.lastgroup
        out.append((kind, re.sub(r"\s+", "", m.group(kind)) if kind == "name" else m.group(kind)))
        pos = m.end()
    return out


class _Parser:
    def __init__(self, toks, word: str):
        self.t, self.i, self.word = toks, 0, word

    def peek(self, k: int = 0):
        return self.t[self.i + k] if self.i + k < len(self.t) else (None, None)

    def take(self, value: str | None = None):
        tok = self.peek()
        if tok[0] is None or value is not None and tok[1] != value:
            raise _NoValue(value)
        self.i += 1
        return tok

    def number(self, integral: bool):
        """A converter call: the number the text starts with."""
        kind, name = self.take()
        name = name.split("::")[-1]
        if kind != "name" or name not in _INT + _FLOAT:
            raise _NoValue(name)
        self.take("(")
        text = self.string()
        if self.peek()[1] == ",":           # strtol(s, &end, 10) / strtol(s, NULL, 10) / stoi(s, nullptr, 10)
            self.take(",")
            while self.peek()[1] not in (",", ")", None):
                self.take()
            if self.peek()[1] == ",":
                self.take(",")
                if self.take()[1] != "10":
                    raise _NoValue("a base other than 10")
        self.take(")")
        if text is None:
            raise _NoValue("NULL")
        if name in _INT or integral:
            m = re.match(r"\s*([+-]?\d+)", text)
            if m is None:
                raise _NoValue(text)
            return str(int(m.group(1)))
        m = re.match(r"\s*([+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)", text)
        if m is None:
            raise _NoValue(text)
        return m.group(1)

    def string(self):
        """A `char*` expression: the text from where it points, or None (a null pointer)."""
        value = self.atom()
        while self.peek()[1] == "+":
            self.take("+")
            kind, n = self.take()
            if kind != "num" or value is None:
                raise _NoValue(n)
            value = value[int(n):] if int(n) <= len(value) else None
        return value

    def atom(self):
        kind, tok = self.peek()
        if tok == "(":
            self.take("(")
            value = self.string()
            self.take(")")
            return value
        self.take()
        if tok == "optarg":
            return self.word
        if tok == "argv":
            self.take("[")
            self.take()
            self.take("]")
            return self.word
        name = (tok or "").split("::")[-1]
        if kind == "name" and name in ("strstr", "strchr", "strrchr"):
            self.take("(")
            text = self.string()
            self.take(",")
            lk, lit = self.take()
            self.take(")")
            if text is None or lk not in ("str", "chr"):
                raise _NoValue(name)
            needle = bytes(lit[1:-1], "utf-8").decode("unicode_escape")
            at = text.rfind(needle) if name == "strrchr" else text.find(needle)
            return text[at:] if at >= 0 else None
        raise _NoValue(tok)


def convert(text: str, word: str, integral: bool) -> str | None:
    """The value of the C expression `text` (a converter call over `optarg` or `argv[k]`, or over a pointer into
    it) when that word is `word`, as a C++ literal; None when it is not one of the forms above or gives no
    number."""
    try:
        p = _Parser(_tokens(text), word)
        value = p.number(integral)
        return value if p.i == len(p.t) else None
    except (_NoValue, ValueError, UnicodeDecodeError):
        return None


def _mentions_optarg(node) -> bool:
    return _mentions(node, "optarg")


def optarg_locals(fn, m) -> dict[str, str]:
    """name -> text of each local that the change `m` (in getopt's switch) reads and that was last set from
    `optarg` before it in the same switch (`pos = strchr(optarg, 'x'); h = atoi(pos + 1);`); {} when none."""
    switch = next((x for x in reversed(m.path) if x.kind.name == "SWITCH_STMT"), None)
    if switch is None or m.rhs is None:
        return {}
    out = {}
    off = m.node.extent.start.offset
    for n in _walk(m.rhs):
        d = n.referenced if n.kind.name == "DECL_REF_EXPR" else None
        if d is None or d.kind.name != "VAR_DECL" or d.spelling in out:
            continue
        sets = [x for x in modifications(fn, d.get_usr()) if x.node.extent.start.offset < off]
        last = sets[-1] if sets else None
        if last is not None and last.op == "=" and last.member is None and last.rhs is not None \
                and _contains(switch, last.node.extent.start.offset) and _mentions_optarg(last.rhs):
            out[d.spelling] = last.rhs
        elif last is None and _contains(switch, d.extent.start.offset) and init_expr(d) is not None \
                and _mentions_optarg(init_expr(d)):
            out[d.spelling] = init_expr(d)
    return out


def from_optarg(fn, m) -> bool:
    """Whether the change `m` reads `optarg`, itself or through a local set from it (optarg_locals)."""
    return _mentions_optarg(m.rhs) or bool(optarg_locals(fn, m))


def expanded(project, fn, m) -> str:
    """The text of `m`'s right-hand side with each local set from `optarg` replaced by what it was set to."""
    text = project.text(m.rhs)
    for name, rhs in optarg_locals(fn, m).items():
        text = re.sub(rf"\b{re.escape(name)}\b", lambda _: f"({project.text(rhs)})", text)
    return text
