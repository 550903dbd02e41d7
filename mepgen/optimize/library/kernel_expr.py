"""mep.yaml's expressions (a buffer's count, a grid dimension) written over the size symbols, as expressions the
kernel itself can compute at run time: each size symbol becomes the scalar parameter that mep.yaml sets to it (or
to a larger expression spelled the same way) or stays where kernel.cu defines it as a macro (`#define N
MEPGEN_SIZE_N`). A rewrite that needs the application's value in the kernel (the extent of a staged table, the
original grid of a coarsened launch) uses it; anything else is refused by name.
"""
from __future__ import annotations

import re

from .analysis import squash
from .source import Refused

#: names an expression may keep: C types and casts, and the math functions the device has
KEEP = {"int", "long", "unsigned", "short", "char", "float", "double", "size_t", "std", "min", "max", "ceil",
        "floor", "ceilf", "floorf", "sizeof", "static_cast", "const", "signed"}


def in_kernel(src, spec, expr: str, launch: dict | None = None) -> str:
    """`expr` (over mep.yaml's size symbols) over the kernel's parameters and macros; Refused naming what has
    no value in the kernel. With `launch`: a size symbol that is a whole block dimension of it (`block: [BS]`) is
    that dimension of blockDim (the launch sets the block to it)."""
    out = " " + squash(str(expr)) + " "
    scalars = [p for p in spec.params if p.role == "scalar" and p.value is not None and src.param(p.name) is not None
               and not src.param(p.name).pointer]
    for p in sorted(scalars, key=lambda p: -len(squash(str(p.value)))):
        v = squash(str(p.value))
        if re.fullmatch(r"-?\d+", v) or len(v) < 1:
            continue
        if re.fullmatch(r"\w+", v):
            out = re.sub(rf"(?<![\w.]){re.escape(v)}(?![\w.])", f"({p.name})", out)
        else:
            out = out.replace(v, f"({p.name})")
    for d, b in enumerate((launch or {}).get("block", [])[:3]):
        b = squash(str(b)).strip("() ")
        if b in spec.sizes and f"MEPGEN_SIZE_{b}" not in src.text and b not in src.macros():
            out = re.sub(rf"(?<![\w.]){re.escape(b)}(?![\w.])", f"blockDim.{'xyz'[d]}", out)
    params = {p.name for p in scalars}
    macros = src.macros()
    for name in sorted(set(re.findall(r"(?<![\w.])[A-Za-z_]\w*", out))):
        if name in params or name in KEEP or name == "blockDim":
            continue
        if name in macros or (name in spec.sizes and f"MEPGEN_SIZE_{name}" in src.text):
            continue
        raise Refused(f"`{squash(str(expr))}` uses {name}, which the kernel has no value of")
    return out.strip()
