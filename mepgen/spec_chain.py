"""Validation of an MEP's launch dimensions and of its kernel chain (`chain` and `buffers` in mep.yaml), on the
parsed document, so that every error names the key and line (docs/mep-format.md, "Kernel chains")."""
from __future__ import annotations

import re

from . import cexpr
from .strict_yaml import Doc


def _fed_by(p: dict) -> str | None:
    """The kernel a target parameter's `init: {kind: chain, by: K}` names; None for any other init."""
    init = p.get("init")
    return init.args.get("by") if init is not None and init.kind == "chain" else None


def check_dims(doc: Doc, kp: tuple, launch: dict, sizes: dict) -> None:
    for key in ("grid", "block"):
        if len(launch[key]) > 3:
            raise doc.error(kp + (key,), "at most 3 dimensions")
        for j, e in enumerate(launch[key]):
            if cexpr.evaluate(e, sizes) is None:
                raise doc.error(kp + (key, j), f"cannot evaluate '{e}' from the sizes")


def check_chain(doc: Doc, d: dict) -> None:
    """`chain` and `buffers`: every argument names a buffer that exists, with the feeder's dtype; what the
    chain writes into a target parameter is that parameter's `init: {kind: chain, by: ...}`, and nothing else."""
    sizes = d["sizes"]
    params = {p["name"]: (i, p) for i, p in enumerate(d["params"])}
    buffers: dict[str, tuple[int, dict]] = {}
    for i, b in enumerate(d.get("buffers", [])):
        kp = ("buffers", i)
        if not re.fullmatch(r"[A-Za-z_]\w*", b["name"]):
            raise doc.error(kp + ("name",), f"'{b['name']}' is not a C identifier (the harness declares it)")
        if b["name"] in params or b["name"] in buffers:
            raise doc.error(kp + ("name",), f"'{b['name']}' is already a parameter or buffer name")
        if cexpr.evaluate(b["count"], sizes) is None:
            raise doc.error(kp + ("count",), f"cannot evaluate '{b['count']}' from the sizes")
        if b.get("init") is not None and b["init"].kind == "chain":
            raise doc.error(kp + ("init", "kind"), "a chain buffer is written by the feeder that takes it as "
                                                     "`out`: leave its init out instead")
        buffers[b["name"]] = (i, b)
    written: dict[str, str] = {}          # target parameter or buffer -> the kernel that writes it
    for s, step in enumerate(d.get("chain", [])):
        kp = ("chain", s)
        check_dims(doc, kp + ("launch",), step["launch"], sizes)
        names = [a["name"] for a in step["args"]]
        for j, a in enumerate(step["args"]):
            akp = kp + ("args", j)
            if names.count(a["name"]) > 1:
                raise doc.error(akp + ("name",), f"argument '{a['name']}' appears twice")
            if a["role"] == "scalar":
                if "value" not in a or a.get("buffer") is not None:
                    raise doc.error(akp, f"scalar argument '{a['name']}' needs a 'value' and no 'buffer'")
                continue
            if a.get("buffer") is None or a.get("dtype") is None:
                raise doc.error(akp, f"buffer argument '{a['name']}' needs 'buffer' and 'dtype'")
            target = a["buffer"]
            if target in params:
                pi, p = params[target]
                if p["role"] not in ("in", "inout"):
                    raise doc.error(akp + ("buffer",), f"'{target}' is the target's {p['role']} parameter; a "
                                                        "feeder may only take the target's inputs")
                dtype = p["dtype"]
            elif target in buffers:
                bi, b = buffers[target]
                dtype = b["dtype"]
                if a["role"] in ("in", "inout") and "init" not in b and target not in written:
                    raise doc.error(akp + ("buffer",), f"buffer '{target}' is read before any feeder writes it: "
                                                        "give it an init")
            else:
                raise doc.error(akp + ("buffer",), f"no parameter or chain buffer named '{target}'")
            if dtype != a["dtype"]:
                raise doc.error(akp + ("dtype",), f"'{a['name']}' is {a['dtype']} but '{target}' holds {dtype}")
            if a["role"] in ("out", "inout"):
                if target in params:
                    if _fed_by(params[target][1]) != step["kernel"]:
                        raise doc.error(akp + ("buffer",), f"{step['kernel']} writes the target's '{target}': give "
                                        f"it init {{kind: chain, by: '{step['kernel']}'}} (or pass a chain buffer)")
                written[target] = step["kernel"]
    for name, (i, p) in params.items():
        by = _fed_by(p)
        if by is not None and written.get(name) != by:
            raise doc.error(("params", i, "init", "by"), f"no chain step {by!r} writes '{name}' "
                                                          "(as an out or inout argument)")
