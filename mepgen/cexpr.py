"""Integer C expressions over named values (macros, size symbols): `(NX + TILE_X - 1) / TILE_X`.

Used to evaluate launch configurations and element counts. Plain integer arithmetic (C's truncating division,
`std::max`/`std::min`, integer casts) is computed here; anything else that names only known values (float
arithmetic and casts, `ceil`, `?:`, comparisons, `dim3(...).x`) is handed to the C++ compiler
(:mod:`mepgen.cppeval`), so its value is C++'s own. An unknown name gives None.
"""
from __future__ import annotations

import ast
import operator
import re
from . import cppeval

_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
        ast.Div: operator.floordiv, ast.Mod: operator.mod, ast.LShift: operator.lshift, ast.RShift: operator.rshift,
        ast.BitAnd: operator.and_, ast.BitOr: operator.or_, ast.BitXor: operator.xor}
_CASTS = {"int", "unsigned", "size_t", "long", "int64_t", "uint32_t", "uint64_t", "int32_t"}
_MINMAX = {"max": max, "min": min}   # std::max / std::min (launch configurations clamp block counts)
_SUFFIX = re.compile(r"\b(\d+)(?:[uU][lL]{0,2}|[lL]{1,2}[uU]?)\b")
_SIZEOF = re.compile(r"\b(?:sizeof|alignof)\b")
_STATIC_CAST = re.compile(r"static_cast<\s*[\w\s]+>")
_C_CAST = re.compile(r"\(\s*(?:unsigned\s+int|unsigned|int|size_t|long\s+long|long|int64_t|uint32_t|uint64_t|int32_t)\s*\)")


def _pythonize(expr: str) -> str:
    text = _SUFFIX.sub(r"\1", expr.strip()).replace("std::", "")
    text = _STATIC_CAST.sub("", text)
    if not _SIZEOF.search(text):     # `sizeof(unsigned int)` is no cast: the compiler evaluates it whole
        text = _C_CAST.sub("", text)
    return text


_CXX_WORDS = {"sizeof", "alignof", "true", "false", "nullptr", "static_cast", "const", "unsigned", "signed", "int",
              "long", "short", "char", "float", "double", "bool", "size_t", "int64_t", "uint64_t", "int32_t",
              "uint32_t", "dim3", "std", "decltype", "void", "auto"}
_IDENT = re.compile(r"(?<![\w.])(?<!->)(?<!::)([A-Za-z_]\w*)\b(?!\s*(?:\(|::))")


def names(expr: str) -> set[str]:
    """The identifiers of values an expression uses (not functions, types, members or namespaces)."""
    try:
        tree = ast.parse(_pythonize(expr), mode="eval")
        called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}     # `ceilf(...)`, `(float)(x)`
        return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and id(n) not in called
                and n.id not in ("dim3", *_CASTS, *_MINMAX, *_CXX_WORDS)}
    except SyntaxError:   # C++ that is not Python: float casts, `?:`, member access
        text = re.sub(r"\b\d[\w.]*", " ", str(expr))
        return {m for m in _IDENT.findall(text) if m not in _CXX_WORDS and m not in _CASTS}


def evaluate(expr: str | int | None, values: dict[str, object], _depth: int = 0,
             compiler: bool = True) -> int | None:
    """Integer value of `expr`; values may be ints or (macro) expression strings, resolved recursively.
    `compiler=False`: plain integer arithmetic only (None where the C++ compiler would be needed)."""
    if expr is None or _depth > 20:
        return None
    if isinstance(expr, bool):
        return int(expr)
    if isinstance(expr, int):
        return expr
    try:
        tree = ast.parse(_pythonize(str(expr)), mode="eval")
    except SyntaxError:
        return _by_compiler(str(expr), values) if compiler else None

    def ev(node):
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
            return node.value
        if isinstance(node, ast.Constant) and isinstance(node.value, float):
            raise _NotPlain("a floating-point constant")
        if isinstance(node, ast.Name):
            if node.id in values:
                v = evaluate(values[node.id], values, _depth + 1)
                if v is None and isinstance(values[node.id], str):
                    raise _NotPlain(node.id)     # a macro such as `(1.5 * 4)`: the compiler evaluates the whole
                if v is None:
                    raise ValueError(node.id)
                return v
            raise ValueError(node.id)
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            left, right = ev(node.left), ev(node.right)
            if isinstance(node.op, (ast.Div, ast.FloorDiv, ast.Mod)):
                if right == 0:
                    raise ValueError("division by zero")
                if isinstance(node.op, ast.Mod):
                    return int(abs(left) % abs(right) * (1 if left >= 0 else -1))
                q = abs(left) // abs(right)  # C truncates toward zero
                return q if (left >= 0) == (right >= 0) else -q
            return _OPS[type(node.op)](left, right)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            v = ev(node.operand)
            return -v if isinstance(node.op, ast.USub) else v
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("dim3", *_CASTS):
            v = 1
            for a in node.args:
                v *= ev(a)
            return v
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _MINMAX and node.args:
            return _MINMAX[node.func.id](ev(a) for a in node.args)
        if isinstance(node, ast.Tuple):
            v = 1
            for a in node.elts:
                v *= ev(a)
            return v
        raise _NotPlain(ast.dump(node))

    try:
        return ev(tree)
    except _NotPlain:
        return _by_compiler(str(expr), values) if _depth == 0 and compiler else None
    except (ValueError, OverflowError, TypeError, RecursionError):
        return None


_FLOAT = re.compile(r"(?<![\w.])(?:\d+\.\d*|\.\d+|\d+[eE][+-]?\d+)[fFlL]?|\b(?:float|double)\b")


def integer(expr: str, values: dict[str, object]) -> int | None:
    """Like :func:`evaluate`, but None when C++ would not give the expression an integer type."""
    value = evaluate(expr, values)
    if value is None:
        return None
    text, seen, todo = str(expr), set(), list(names(str(expr)))
    while todo:
        n = todo.pop()
        if n in seen or n not in values:
            continue
        seen.add(n)
        text += " " + str(values[n])
        todo += list(names(str(values[n])))
    if _FLOAT.search(text) and not re.fullmatch(r"0[xX][0-9a-fA-F]+", text.strip()):
        if not cppeval.is_integral(str(expr), values):
            return None
    return value


class _NotPlain(Exception):
    """A construct beyond plain integer arithmetic: the compiler decides its value."""


def _by_compiler(expr: str, values: dict[str, object]) -> int | None:
    """The value C++ gives `expr`, when every name it uses has a value (else None without compiling)."""
    known = set(values)
    todo, seen = list(names(expr)), set()
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        if n not in known:
            return None
        v = values[n]
        if isinstance(v, str):
            todo += list(names(v))
    return cppeval.evaluate(expr, values)


def with_block(expr: str, token: str, value: int) -> str:
    """A grid expression with its block `token` (a macro or a literal) replaced by `value`. A literal block rounds
    up with the literal one less (`(n + 15) / 16`): that one follows the block too, or a larger block would leave
    the last elements without a thread."""
    out = re.sub(rf"(?<![\w.]){re.escape(token)}(?![\w.])", str(value), expr)
    if token.isdigit() and int(token) > 2:
        out = re.sub(rf"(?<![\w.]){int(token) - 1}(?![\w.])", str(value - 1), out)
    return out


def top_level_spans(text: str, sep: str = ",") -> list[tuple[int, int]]:
    """(start, end) of each item of `text` split at `sep` outside (), [], {} and template brackets that follow
    an identifier, whitespace around each item excluded: where `a, f(b, c), d` has its three items."""
    spans, depth, angle, prev, begin = [], 0, 0, "", 0
    for i, ch in enumerate(text):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "<" and (prev.isalnum() or prev == "_"):
            angle += 1
        elif ch == ">" and angle > 0:
            angle -= 1
        if ch == sep and depth == 0 and angle == 0:
            spans.append((begin, i))
            begin = i + 1
        if not ch.isspace():
            prev = ch
    spans.append((begin, len(text)))
    out = []
    for lo, hi in spans:
        while lo < hi and text[lo].isspace():
            lo += 1
        while hi > lo and text[hi - 1].isspace():
            hi -= 1
        out.append((lo, hi))
    if len(out) == 1 and out[0][0] == out[0][1]:
        return []
    return out


def split_top_level(text: str, sep: str = ",") -> list[str]:
    """Split at `sep` outside (), [], {} and template brackets that follow an identifier."""
    return [text[lo:hi] for lo, hi in top_level_spans(text, sep)]


def is_one_group(text: str) -> bool:
    """Whether `text` is one parenthesized group, `(a + b)`, rather than `(a) + (b)`."""
    if not (text.startswith("(") and text.endswith(")")):
        return False
    depth = 0
    for i, ch in enumerate(text):
        depth += ch == "("
        depth -= ch == ")"
        if depth == 0 and i < len(text) - 1:
            return False
    return True
