"""Integer C expressions over named values (macros, size symbols): `(NX + TILE_X - 1) / TILE_X`.

Used to evaluate launch configurations and element counts. Division is C's integer division for
non-negative operands; `std::max`/`std::min` are understood; anything unknown (a variable, a function call other than dim3) gives None.
"""
from __future__ import annotations

import ast
import operator
import re

_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
        ast.Div: operator.floordiv, ast.Mod: operator.mod, ast.LShift: operator.lshift, ast.RShift: operator.rshift,
        ast.BitAnd: operator.and_, ast.BitOr: operator.or_, ast.BitXor: operator.xor}
_CASTS = {"int", "unsigned", "size_t", "long", "int64_t", "uint32_t", "uint64_t", "int32_t"}
_MINMAX = {"max": max, "min": min}   # std::max / std::min (launch configurations clamp block counts)
_SUFFIX = re.compile(r"\b(\d+)(?:[uU][lL]{0,2}|[lL]{1,2}[uU]?)\b")
_STATIC_CAST = re.compile(r"static_cast<\s*[\w\s]+>")
_C_CAST = re.compile(r"\(\s*(?:unsigned\s+int|unsigned|int|size_t|long\s+long|long|int64_t|uint32_t|uint64_t|int32_t)\s*\)")


def _pythonize(expr: str) -> str:
    text = _SUFFIX.sub(r"\1", expr.strip()).replace("std::", "")
    text = _STATIC_CAST.sub("", text)
    text = _C_CAST.sub("", text)
    return text


def names(expr: str) -> set[str]:
    """The identifiers an expression uses (empty when it does not parse)."""
    try:
        tree = ast.parse(_pythonize(expr), mode="eval")
    except SyntaxError:
        return set()
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id not in ("dim3", *_CASTS, *_MINMAX)}


def evaluate(expr: str | int | None, values: dict[str, object], _depth: int = 0) -> int | None:
    """Integer value of `expr`; values may be ints or (macro) expression strings, resolved recursively."""
    if expr is None or _depth > 20:
        return None
    if isinstance(expr, bool):
        return int(expr)
    if isinstance(expr, int):
        return expr
    try:
        tree = ast.parse(_pythonize(str(expr)), mode="eval")
    except SyntaxError:
        return None

    def ev(node):
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
            return int(node.value)
        if isinstance(node, ast.Name):
            if node.id in values:
                v = evaluate(values[node.id], values, _depth + 1)
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
        raise ValueError(ast.dump(node))

    try:
        return ev(tree)
    except (ValueError, OverflowError, TypeError, RecursionError):
        return None


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
