"""Demangled kernel names as profilers and the driver print them: `void ns::k<float, 4>(float const*, int)`.

Shared by the hotspot ranking (profile CSVs) and capture (matching launched kernels), which both reduce
such a name to the qualified name the inventory uses, and the template arguments.
"""
from __future__ import annotations

import re


def normalize_args(args: str) -> str:
    """Template arguments as the injector compares them: no spaces (`float, 4` -> `float,4`)."""
    return re.sub(r"\s+", "", args)


def split_demangled(demangled: str) -> tuple[str, str]:
    """`void ns::k<float, 4>(float const*, int)` -> (`ns::k`, `float,4`); a name without a parameter list or
    template arguments (an `extern "C"` kernel) is its own base. The arguments as the injector compares them (no
    spaces at all): to write them as C++, `spelled_template_args`."""
    base, raw = _split(demangled)
    return base, normalize_args(raw)


def spelled_template_args(demangled: str) -> list[str]:
    """The template arguments of a demangled name as C++ spells them: `k<unsigned int, 8ul>(...)` ->
    [`unsigned int`, `8ul`]; spaces only where two words meet (`unsigned char`, not `unsignedchar`)."""
    raw = re.sub(r"\s+", " ", _split(demangled)[1]).strip()
    return split_template_args(re.sub(r"\s*([^\w\s])\s*", r"\1", raw))


def split_template_args(args: str) -> list[str]:
    """`float,std::pair<int,int>,4` -> [`float`, `std::pair<int,int>`, `4`] (top-level commas only)."""
    out, depth, cur = [], 0, ""
    for c in args:
        if c in "<(":
            depth += 1
        elif c in ">)":
            depth -= 1
        if c == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += c
    if cur:
        out.append(cur)
    return out


def _split(demangled: str) -> tuple[str, str]:
    """(qualified base name, template arguments as printed) of a demangled name."""
    s = demangled.strip()
    if s.endswith(")"):
        depth = 0
        for i in range(len(s) - 1, -1, -1):
            if s[i] == ")":
                depth += 1
            elif s[i] == "(":
                depth -= 1
                if depth == 0:
                    s = s[:i]
                    break
    args = ""
    if s.endswith(">"):
        depth = 0
        for i in range(len(s) - 1, -1, -1):
            if s[i] == ">":
                depth += 1
            elif s[i] == "<":
                depth -= 1
                if depth == 0:
                    args, s = s[i + 1:-1], s[:i]
                    break
    depth, start = 0, 0
    for i, c in enumerate(s):
        if c in "<(":
            depth += 1
        elif c in ">)":
            depth -= 1
        elif c == " " and depth == 0:
            start = i + 1
    return s[start:], args
