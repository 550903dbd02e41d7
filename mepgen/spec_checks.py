"""The checks of a parsed mep.yaml beyond its schema (spec.py's load_spec runs them), each error naming the key and
line: parameters, constants and buffers against the sizes and each other, the launch's observed configurations, the
chain, and the relocations of captured pointers."""
from __future__ import annotations

import numpy as np

from . import cexpr
from .spec_chain import check_chain, check_dims
from .strict_yaml import Doc


def itemsize(dtype: str | None) -> int | None:
    """Bytes per element of a numpy dtype name."""
    return np.dtype(dtype).itemsize if dtype else None


def check_semantics(doc: Doc, d: dict) -> None:
    """What the schema cannot say: names unique, counts that evaluate over the sizes and are not negative, inputs
    with an init, outputs that tolerances name, launch dimensions and the chain (spec_chain.py), relocations."""
    names = [p["name"] for p in d["params"]]
    sizes = d["sizes"]
    for i, o in enumerate(d["launch"].get("observed") or []):
        for key in ("grid", "block"):
            if len(o[key]) != 3 or min(o[key]) < 1:
                raise doc.error(("launch", "observed", i, key), f"{o[key]} is not an x, y, z of positive numbers")
    # sizes still a todo hold placeholders: a count they make negative says nothing until they are set
    placeholders = {t["field"][len("sizes."):] for t in d.get("todo") or [] if str(t.get("field", "")).startswith("sizes.")}
    for sym, value in sizes.items():
        if value < 0:
            raise doc.error(("sizes", sym), f"{value} is negative: a size symbol is an extent; set it to the "
                                            "problem size (0 or more)")
    for i, p in enumerate(d["params"]):
        kp = ("params", i)
        if names.count(p["name"]) > 1:
            raise doc.error(kp + ("name",), f"parameter '{p['name']}' appears twice")
        if p["role"] == "scalar":
            if "value" not in p:
                raise doc.error(kp, f"scalar parameter '{p['name']}' needs a 'value'")
            continue
        for key in ("dtype", "count"):
            if key not in p:
                raise doc.error(kp, f"buffer parameter '{p['name']}' needs '{key}'")
        count = cexpr.evaluate(p["count"], sizes)
        if count is None:
            unknown = cexpr.names(str(p["count"])) - set(sizes)
            why = f"unknown size symbol(s) {', '.join(sorted(unknown))}" if unknown else "not an integer expression"
            raise doc.error(kp + ("count",), f"cannot evaluate '{p['count']}': {why}")
        if count < 0 and not cexpr.names(str(p["count"])) & placeholders:
            used = ", ".join(f"{k}={sizes[k]}" for k in sorted(cexpr.names(str(p["count"])) & set(sizes)))
            raise doc.error(kp + ("count",), f"'{p['count']}' is {count} with {used or 'these sizes'}: an element "
                                             "count must be 0 or more; fix the sizes or the expression")
        if p["role"] in ("in", "inout") and "init" not in p:
            raise doc.error(kp, f"input parameter '{p['name']}' needs an 'init'")
        if p.get("placement") is not None and p["placement"] % itemsize(p["dtype"]):
            raise doc.error(kp + ("placement",), f"placement {p['placement']} does not keep '{p['name']}' aligned "
                                                 f"to its {itemsize(p['dtype'])}-byte elements")
    for i, c in enumerate(d.get("constants", [])):
        if c.get("role") == "inout":
            if c["name"] in names or c["name"] in [b["name"] for b in d.get("buffers", [])]:
                raise doc.error(("constants", i, "name"), f"'{c['name']}' is also a parameter's or a buffer's name: an "
                                                           "output's name must be its own")
            if not c.get("dtype") or c.get("count") is None or "init" not in c:
                raise doc.error(("constants", i, "role"), "role inout (a __device__ variable the kernel writes) needs "
                                                           "a dtype, a count and an init: it is compared as an output")
    outputs = [*names, *[b["name"] for b in d.get("buffers", [])],
               *[c["name"] for c in d.get("constants", []) if c.get("role") == "inout"]]
    for name in d.get("verify", {}).get("tolerance", {}):
        if name not in outputs:
            raise doc.error(("verify", "tolerance", name), f"no parameter named '{name}'")
    for i, b in enumerate(d.get("buffers", [])):
        if b.get("role") == "inout" and (d.get("chain") or "init" not in b):
            raise doc.error(("buffers", i, "role"), "role inout is for a buffer reached through captured pointers: "
                                                     "it needs an init and no chain")
    check_dims(doc, ("launch",), d["launch"], sizes)
    check_chain(doc, d)
    _check_relocations(doc, d)


def _check_relocations(doc: Doc, d: dict) -> None:
    """Every relocation names a buffer of the MEP, at a non-negative, pointer-aligned byte inside its holder."""
    sizes = d["sizes"]
    holders = {p["name"]: p for p in d["params"] if p["role"] != "scalar"} | \
        {b["name"]: b for b in d.get("buffers", [])}
    for group in ("params", "buffers"):
        for i, item in enumerate(d.get(group, [])):
            for j, r in enumerate(item.get("relocate", [])):
                kp = (group, i, "relocate", j)
                if r["buffer"] not in holders:
                    raise doc.error(kp + ("buffer",), f"no buffer parameter or buffer named '{r['buffer']}'")
                if r["at"] < 0 or r["offset"] < 0 or r["at"] % 8:
                    raise doc.error(kp, "'at' must be a non-negative multiple of 8 and 'offset' non-negative")
                if item.get("role") != "scalar" and item.get("dtype"):
                    n = cexpr.evaluate(item["count"], sizes)
                    if n is not None and r["at"] + 8 > n * itemsize(item["dtype"]):
                        raise doc.error(kp + ("at",), f"byte {r['at']} is past the end of '{item['name']}'")
