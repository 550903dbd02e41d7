"""C++ expressions that hold exact bytes (captured struct arguments, NaN, infinities), and reading them back.

A struct argument recorded as bytes cannot be written as an aggregate initializer (its fields may be private, hold
device pointers or padding); the harness gets a lambda that copies the bytes into a value of the type. That is not
a constant expression, so where one is needed (a `__device__` variable's initializer in the pycuda backend's
entry file) `captured_bytes` gives the bytes back and the caller spells them itself.
"""
from __future__ import annotations

import re


def bytes_expression(type_expr: str, bytes_hex: str) -> str:
    """A C++ expression of type `type_expr` holding exactly these bytes (for structs and non-finite floats)."""
    raw = bytes.fromhex(bytes_hex)
    body = ", ".join(f"0x{b:02x}" for b in raw)
    return (f"[] {{ {type_expr} v_; const unsigned char b_[{len(raw)}] = {{{body}}}; "
            f"static_assert(sizeof(v_) == {len(raw)}, \"captured size\"); "
            f"__builtin_memcpy(&v_, b_, sizeof(v_)); return v_; }}()")


_BYTES_EXPR = re.compile(r"\[\] \{ (?P<type>.+?) v_; const unsigned char b_\[(?P<n>\d+)\] = \{(?P<body>[0-9a-fx, ]*)\}; "
                         r"static_assert\(sizeof\(v_\) == (?P=n), \"captured size\"\); "
                         r"__builtin_memcpy\(&v_, b_, sizeof\(v_\)\); return v_; \}\(\)$")


def captured_bytes(expr: str | None) -> bytes | None:
    """The bytes a `bytes_expression` holds, or None for any other expression (so code that must not run a lambda,
    such as a `__device__` variable's initializer, can use the bytes themselves)."""
    m = _BYTES_EXPR.match((expr or "").strip())
    if m is None:
        return None
    raw = bytes(int(b, 16) for b in m["body"].split(",") if b.strip())
    return raw if len(raw) == int(m["n"]) else None
