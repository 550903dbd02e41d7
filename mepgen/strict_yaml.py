"""Strict YAML for files people edit (mep.yaml, config): unknown keys and wrong types are errors that name
the key and its line, never silently ignored."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import yaml

from .errors import MepgenError


@dataclass
class Doc:
    """A loaded YAML document with the line of every key path, for error messages."""

    path: str
    data: Any
    lines: dict[tuple, int]

    def line(self, keypath: tuple) -> int | None:
        while keypath:
            if keypath in self.lines:
                return self.lines[keypath]
            keypath = keypath[:-1]
        return self.lines.get((), None)

    def error(self, keypath: tuple, message: str) -> MepgenError:
        where = f"{self.path}:{self.line(keypath)}" if self.line(keypath) else self.path
        return MepgenError(f"{where}: {dotted(keypath)}: {message}" if keypath else f"{where}: {message}")


def dotted(keypath: tuple) -> str:
    out = ""
    for k in keypath:
        out += f"[{k}]" if isinstance(k, int) else (f".{k}" if out else str(k))
    return out


def _construct(node, keypath: tuple, lines: dict):
    lines[keypath] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        out = {}
        for knode, vnode in node.value:
            key = yaml.safe_load(yaml.serialize(knode))
            if key in out:
                raise MepgenError(f"line {knode.start_mark.line + 1}: duplicate key '{key}'")
            lines[keypath + (key,)] = knode.start_mark.line + 1
            out[key] = _construct(vnode, keypath + (key,), lines)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_construct(v, keypath + (i,), lines) for i, v in enumerate(node.value)]
    if node.tag == "tag:yaml.org,2002:null":      # `key:` with nothing after it (serializes to no document)
        return None
    return yaml.safe_load(yaml.serialize(node))


def load_doc(path: Path | str, text: str | None = None) -> Doc:
    path = str(path)
    try:
        if text is None:
            text = Path(path).read_text()
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except FileNotFoundError:
        raise MepgenError(f"{path} not found") from None
    except OSError as e:
        raise MepgenError(f"cannot read {path}: {e.strerror}") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else path
        raise MepgenError(f"{where}: not valid YAML ({getattr(e, 'problem', e)})") from None
    lines: dict[tuple, int] = {}
    try:
        data = _construct(node, (), lines) if node is not None else {}
    except MepgenError as e:
        raise MepgenError(f"{path}:{str(e)[5:]}") from None
    return Doc(path, data, lines)


# --- validators: each takes (doc, keypath, value) and returns the value or raises doc.error -------------

Validator = Callable[[Doc, tuple, Any], Any]

_TYPE_NAMES = {str: "a string", int: "an integer", float: "a number", bool: "true or false", list: "a list",
               dict: "a mapping"}


def of_type(*types) -> Validator:
    def check(doc: Doc, kp: tuple, v):
        ok = isinstance(v, types) and not (isinstance(v, bool) and bool not in types)
        if float in types and isinstance(v, int) and not isinstance(v, bool):
            return float(v)
        if not ok:
            want = " or ".join(_TYPE_NAMES.get(t, t.__name__) for t in types)
            raise doc.error(kp, f"must be {want}, not {type(v).__name__} {v!r}")
        return v
    return check


def one_of(*choices) -> Validator:
    def check(doc: Doc, kp: tuple, v):
        if v not in choices:
            raise doc.error(kp, f"{v!r} is not one of {', '.join(map(str, choices))}")
        return v
    return check


def list_of(item: Validator) -> Validator:
    def check(doc: Doc, kp: tuple, v):
        of_type(list)(doc, kp, v)
        return [item(doc, kp + (i,), x) for i, x in enumerate(v)]
    return check


def mapping_of(value: Validator) -> Validator:
    def check(doc: Doc, kp: tuple, v):
        of_type(dict)(doc, kp, v)
        return {k: value(doc, kp + (k,), x) for k, x in v.items()}
    return check


def record(fields: dict[str, tuple[Validator, bool]]) -> Validator:
    """A mapping with known keys: (validator, required). Unknown keys are errors naming the key."""
    def check(doc: Doc, kp: tuple, v):
        of_type(dict)(doc, kp, v)
        for k in v:
            if k not in fields:
                known = ", ".join(fields)
                raise doc.error(kp + (k,), f"unknown key '{k}' (known here: {known})")
        out = {}
        for k, (validator, required) in fields.items():
            if k in v:
                out[k] = validator(doc, kp + (k,), v[k])
            elif required:
                raise doc.error(kp, f"missing required key '{k}'")
        return out
    return check


def optional(validator: Validator) -> Validator:
    def check(doc: Doc, kp: tuple, v):
        return None if v is None else validator(doc, kp, v)
    return check
