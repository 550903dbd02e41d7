"""A value proposed for a `todo` field of mep.yaml (by an LLM), checked like a person's edit and then some.

A proposal may set only what the todo list names: the todo fields themselves, and the placeholder size
symbols their reasons name (`set sizes.OUT_COUNT or write the count`), as `--size` may. Each value is put
into a copy of the spec and checked the way `mepgen mep --refresh` checks a person's edit: the strict
schema and its semantics (`spec.load_spec`: types, unknown keys, init kinds, counts and launch dimensions
that evaluate over the sizes), the harness renders, and every input buffer can be generated. Because the
proposer is not trusted, three more rules hold: sizes are positive, the inputs stay below
MAX_INPUT_BYTES, and a C++ expression the harness would compile (a scalar's or a constant's `value`,
`launch.shared_mem`) is one expression over known names: the sizes, the names kernel.cu uses and a few C++
keywords, with no statements, strings, preprocessor or assignments.
"""
from __future__ import annotations

import copy
import re
from pathlib import Path

from ..errors import MepgenError
from ..spec import DTYPES, Spec, itemsize, validate_dict
from .. import datagen

#: LLM-proposed sizes may not make the inputs larger than this (a person may)
MAX_INPUT_BYTES = 8 << 30
#: C++ words an expression may use besides the sizes and the names in kernel.cu
CXX_WORDS = {"sizeof", "static_cast", "const", "unsigned", "signed", "int", "float", "double", "long", "short",
             "char", "bool", "true", "false", "std", "max", "min", "size_t", "int8_t", "uint8_t", "int16_t",
             "uint16_t", "int32_t", "uint32_t", "int64_t", "uint64_t", "nullptr", "dim3"}
_PATH = re.compile(r"(?:^|\.)([A-Za-z_]\w*)|\[(\d+)\]")
_IDENT = re.compile(r"(?<![\w.])[A-Za-z_]\w*")
_SAFE_CHARS = re.compile(r"^[\w\s.:+\-*/%()<>{}\[\],&|^~!?=]*$")
_ASSIGN = re.compile(r"(?<![=<>!])=(?!=)")
_LAUNCH_KEYS = ("grid", "block", "shared_mem")
_PLACEHOLDER = re.compile(r"\bsizes\.(\w+)")
_ELEMENT_SIZE = re.compile(r"\((\d+)-byte elements\)")


class Refused(Exception):
    """Why a proposed value cannot be used, in one line."""


def settles(spec: Spec) -> dict[str, list[str]]:
    """Field a proposal may set -> the todo fields it settles."""
    out: dict[str, list[str]] = {}
    for t in spec.todo:
        out.setdefault(t.field, []).append(t.field)
        for sym in _PLACEHOLDER.findall(t.reason):
            if sym in spec.sizes and f"sizes.{sym}" != t.field:
                out.setdefault(f"sizes.{sym}", []).append(t.field)
    return out


def path_of(field: str) -> list[str | int]:
    """`params[1].count` -> ['params', 1, 'count']."""
    parts, pos = [], 0
    for m in _PATH.finditer(field):
        if m.start() != pos:
            break
        parts.append(m.group(1) if m.group(1) is not None else int(m.group(2)))
        pos = m.end()
    if pos != len(field) or not parts:
        raise Refused(f"'{field}' is not a field path")
    return parts


def current(d: dict, field: str):
    """The value at `field` in a spec's dict (None when absent)."""
    node = d
    for k in path_of(field):
        try:
            node = node[k]
        except (KeyError, IndexError, TypeError):
            return None
    return node


def apply(d: dict, field: str, value) -> dict:
    """A copy of the spec dict `d` with `field` set to `value` (`launch` takes a mapping of grid, block and
    shared_mem, merged into the launch)."""
    out = copy.deepcopy(d)
    path = path_of(field)
    node = out
    for k in path[:-1]:
        try:
            node = node[k]
        except (KeyError, IndexError, TypeError):
            raise Refused(f"'{field}' does not exist in mep.yaml") from None
    last = path[-1]
    if field == "launch":
        if not isinstance(value, dict) or not value or set(value) - set(_LAUNCH_KEYS):
            raise Refused(f"launch must be a mapping of {', '.join(_LAUNCH_KEYS)}, not {value!r}")
        node["launch"] = {**node["launch"], **value}
    elif isinstance(node, list) and isinstance(last, int) and last < len(node) or \
            isinstance(node, dict) and isinstance(last, str):
        node[last] = value
    else:
        raise Refused(f"'{field}' does not exist in mep.yaml")
    return out


def check(d: dict, field: str, value, known_names: set[str], reason: str = "") -> tuple[dict, Spec]:
    """(the spec dict with the value in, the validated spec), or Refused saying why. `reason`: the todo's,
    which may state the element size a dtype must have (`(8-byte elements)`)."""
    if field.startswith("sizes.") and isinstance(value, int) and not isinstance(value, bool) and value <= 0:
        raise Refused(f"a size must be positive, not {value}")    # other types: the schema's message
    new = apply(d, field, value)
    size = _ELEMENT_SIZE.search(reason)
    if field.endswith(".dtype") and size and value in DTYPES:
        lanes = current(new, field.rsplit(".", 1)[0] + ".lanes") or 1
        if itemsize(value) * lanes != int(size.group(1)):
            raise Refused(f"{value} has {itemsize(value) * lanes}-byte elements, the kernel's have {size.group(1)}")
    try:
        spec = validate_dict(new, "<proposal>")
    except MepgenError as e:
        raise Refused(re.sub(r"^<proposal>(:\d+)?: ", "", str(e))) from None
    for what, expr in _compiled_expressions(new, field):
        problem = unsafe_expression(str(expr), known_names | set(spec.sizes))
        if problem:
            raise Refused(f"{what} '{expr}' {problem}")
    _check_inputs(spec)
    return new, spec


def _compiled_expressions(d: dict, field: str):
    """The C++ expressions at `field` that reach the harness's source unevaluated."""
    if field == "launch":
        yield "launch.shared_mem", d["launch"].get("shared_mem", "0")
    elif field.endswith(".value") and current(d, field) is not None:
        yield field, current(d, field)


def unsafe_expression(expr: str, known: set[str]) -> str | None:
    """Why `expr` is not one C++ expression over known names (None when it is)."""
    if not _SAFE_CHARS.match(expr):
        bad = sorted({c for c in expr if not _SAFE_CHARS.match(c)})
        return f"holds {' '.join(bad)}: only one expression over names, numbers and operators is allowed"
    if _ASSIGN.search(expr):
        return "assigns: only one expression is allowed"
    depth = {"(": 0, "[": 0, "{": 0}
    pairs = {")": "(", "]": "[", "}": "{"}
    for c in expr:
        if c in depth:
            depth[c] += 1
        elif c in pairs:
            depth[pairs[c]] -= 1
            if depth[pairs[c]] < 0:
                return "has unbalanced brackets"
    if any(depth.values()):
        return "has unbalanced brackets"
    unknown = sorted({n for n in _IDENT.findall(expr) if n not in known and n not in CXX_WORDS})
    if unknown:
        return f"uses {', '.join(unknown)}, which is neither a size nor a name kernel.cu uses"
    return None


def _check_inputs(spec: Spec) -> None:
    """The inputs can be generated, as `--refresh` generates them, and are not unreasonably large."""
    total = 0
    try:
        for item in [*spec.params, *spec.constants]:
            if getattr(item, "role", "in") != "scalar" and item.count is not None and item.dtype:
                total += spec.count(item) * itemsize(item.dtype)
        if total > MAX_INPUT_BYTES:
            raise Refused(f"the buffers would take {total / 2 ** 30:.1f} GiB, more than the "
                          f"{MAX_INPUT_BYTES >> 30} GiB a proposal may ask for")
        for item in [*spec.inputs, *spec.constants]:
            if item.init is not None and item.init.kind != "file":   # no folder yet to read a file from
                datagen.make_array(spec, item, Path("."), spec.verify.seed)
    except MepgenError as e:
        raise Refused(f"the inputs cannot be generated: {e}") from None
