"""The object-like and function-like macros of kernel.cu, expanded for analysis only.

libclang sees expanded tokens, but a cursor's source text is what the application wrote: `i < ROWS` where
`#define ROWS BOUND(NR, nr)` and `#define BOUND(sz, var) sz`. The analyses ask what such a text means over
the MEP's size symbols (`NR`), which the expansion below answers; the rewrites keep writing the application's
own spelling (`ROWS`), which compiles because kernel.cu defines it.
"""
from __future__ import annotations

import re

_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)(\([^)]*\))?[ \t]*(.*)$")
_TOKEN = re.compile(r"[A-Za-z_]\w*|\d[\w.]*|\"(?:\\.|[^\"])*\"|'(?:\\.|[^'])*'|->|<<|>>|<=|>=|==|!=|&&|\|\||##|\S")


def definitions(text: str) -> dict[str, tuple[list[str] | None, str]]:
    """name -> (parameters or None for an object-like macro, body) of every `#define` in `text` (the last wins)."""
    out: dict[str, tuple[list[str] | None, str]] = {}
    lines = text.replace("\\\r\n", " ").replace("\\\n", " ").splitlines()
    for line in lines:
        m = _DEFINE.match(line)
        if not m:
            continue
        name, params, body = m.group(1), m.group(2), m.group(3)
        body = re.sub(r"//.*$", "", body)
        body = re.sub(r"/\*.*?\*/", " ", body).strip()
        out[name] = ([p.strip() for p in params[1:-1].split(",") if p.strip()] if params is not None else None, body)
    return out


def active_definitions(tu, skip_file: str) -> dict[str, tuple[list[str] | None, str]]:
    """The definitions of the headers kernel.cu includes (`polybench.h`'s `BOUND(x, y)`), as the compiler took them:
    libclang records only the `#define`s of the branches it took. System headers and `skip_file` (kernel.cu, whose
    own text `definitions` reads) are left out."""
    out: dict[str, tuple[list[str] | None, str]] = {}
    for c in tu.cursor.get_children():
        if c.kind.name != "MACRO_DEFINITION" or c.location.file is None or c.location.file.name == skip_file \
                or c.location.is_in_system_header:
            continue
        toks = list(c.get_tokens())
        if not toks or toks[0].spelling != c.spelling:
            continue
        params = None
        rest = toks[1:]
        if rest and rest[0].spelling == "(" and rest[0].extent.start.offset == toks[0].extent.end.offset:
            close = next((i for i, t in enumerate(rest) if t.spelling == ")"), None)
            if close is None:
                continue
            params = [t.spelling for t in rest[1:close] if t.spelling != ","]
            rest = rest[close + 1:]
        out[c.spelling] = (params, " ".join(t.spelling for t in rest))
    return out


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(text)


def expand(text: str, defs: dict, keep: set[str] = frozenset(), depth: int = 0) -> str:
    """`text` with its macros expanded (not those in `keep`: the MEP's size symbols stay symbolic). Stringizing
    and token pasting are not followed: a macro that uses them is left as written."""
    if depth > 32:
        return text
    toks, out, i, changed = tokens(text), [], 0, False
    while i < len(toks):
        t = toks[i]
        d = defs.get(t) if t not in keep else None
        if d is None or "#" in d[1]:
            out.append(t)
            i += 1
            continue
        params, body = d
        if params is None:
            out.append(f"({body})" if len(tokens(body)) > 1 else body)
            i += 1
            changed = True
            continue
        if i + 1 >= len(toks) or toks[i + 1] != "(":
            out.append(t)
            i += 1
            continue
        args, level, cur, j = [], 0, [], i + 2
        while j < len(toks):
            tj = toks[j]
            if tj == "(":
                level += 1
            elif tj == ")":
                if level == 0:
                    break
                level -= 1
            if tj == "," and level == 0:
                args.append(" ".join(cur))
                cur = []
            else:
                cur.append(tj)
            j += 1
        if j >= len(toks):
            out.append(t)
            i += 1
            continue
        args.append(" ".join(cur))
        if len(args) != len(params) and not (params == [] and args == [""]):
            out.append(t)
            i += 1
            continue
        env = dict(zip(params, args))
        new = " ".join(f"({env[b]})" if b in env and len(tokens(env[b])) > 1 else env.get(b, b) for b in tokens(body))
        out.append(f"({new})" if len(tokens(new)) > 1 else new)
        i = j + 1
        changed = True
    result = " ".join(out)
    return expand(result, defs, keep, depth + 1) if changed else result


def simplified(text: str) -> str:
    """Redundant parentheses around a single token removed: `((NR))` -> `NR`."""
    prev = None
    while prev != text:
        prev = text
        text = re.sub(r"(?<![\w)\]\s])\s*\(\s*([A-Za-z_]\w*|\d[\w.]*)\s*\)|^\(\s*([A-Za-z_]\w*|\d[\w.]*)\s*\)",
                      lambda m: " " + (m.group(1) or m.group(2)), text).strip()
    return " ".join(text.split())
