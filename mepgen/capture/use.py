"""`mepgen capture --use`: point an MEP's mep.yaml at its captured data, so the MEP replays that launch.

mep.yaml belongs to `mepgen mep` and to the user; this edits it only through the spec model and its strict
validation, and keeps the first original beside it (`mep.yaml.before-capture`). What changes:
- every `in`/`inout` buffer gets `init: {kind: file, path: data/captured/before/<param>.npy}`, and constants with a
  dtype get their `const.<symbol>.npy`;
- size symbols take the captured values: a scalar whose value is a bare size symbol binds it to the captured
  argument, then a buffer whose count is a bare symbol not yet bound binds it to the captured element count;
  any other scalar, count or launch dimension that does not evaluate to what was captured becomes the captured
  literal;
- every buffer gets `placement`: where the application's pointer lay past a 2 MiB boundary, so the MEP's buffers
  share cache sets as the application's did (a kernel walking rows 32 KiB apart ran 24% slower misplaced);
- struct arguments and struct constants get the captured bytes (an expression that copies them into the type);
- the `todo` entries these values settle are removed; `data/in/` is regenerated from the new spec.
"""
from __future__ import annotations

import math
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import yaml

from .. import cexpr
from ..errors import MepgenError
from ..spec import PLACEMENT_SPAN, Spec, load_spec, validate_dict
from ..workspace import write_atomic
from ..cbytes import bytes_expression, captured_bytes  # noqa: F401  (re-exported)
from ..datagen import make_inputs

BACKUP_SUFFIX = ".before-capture"
_SYMBOL = re.compile(r"[A-Za-z_]\w*$")


@dataclass
class UseReport:
    spec_path: Path
    backup: Path
    changes: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def literal(value, dtype: str | None, ctype: str, bytes_hex: str) -> str:
    """The C++ literal of a captured scalar that reads back to the same bits (the shortest round-trip spelling;
    the bytes themselves for structs, NaN and infinities)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return f"{value}{ {'uint32': 'u', 'int64': 'll', 'uint64': 'ull'}.get(dtype or '', '') }"
    if isinstance(value, float) and math.isfinite(value):
        if dtype == "float32":
            return str(np.float32(value)) + "f"
        if dtype == "float64":
            return repr(value)
    return bytes_expression(ctype, bytes_hex)


def _padded(dims: list[int]) -> list[int]:
    return (list(dims) + [1, 1, 1])[:3]


def _settle(expr: str | None, captured: int, sizes: dict[str, int], bound: set[str]) -> tuple[str, str | None]:
    """(new expression, change note): bind a bare unbound size symbol, keep what already evaluates to the
    captured value, else use the literal."""
    e = (expr or "").strip()
    if _SYMBOL.match(e) and e in sizes and e not in bound:
        bound.add(e)
        old = sizes[e]
        sizes[e] = captured
        return e, None if old == captured else f"sizes.{e}: {old} -> {captured}"
    if cexpr.evaluate(e, sizes) == captured:
        return e, None
    return str(captured), f"'{e}' -> {captured}"


def _buffer_count(p: dict, mp: dict, sizes: dict[str, int], bound: set[str], captured: Path) -> tuple[str, str | None]:
    """Set `p['count']` for captured buffer `mp`; return (the file its input comes from, relative to the capture
    folder; a change note). A count the spec already gives that is smaller than the allocation (an allocator that
    rounds sizes up, a pointer into a larger pool) is kept, and the input is the allocation's first `count`
    elements, written to `trimmed/`."""
    expr, have = str(p.get("count", "")).strip(), int(mp["count"])
    if _SYMBOL.match(expr) and expr in sizes and expr not in bound:
        p["count"], note = _settle(expr, have, sizes, bound)
        return mp["before"], note
    want = cexpr.evaluate(expr, sizes)
    if want == have:
        return mp["before"], None
    if want is not None and 0 < want < have:
        rel = f"trimmed/{p['name']}.npy"
        (captured / "trimmed").mkdir(exist_ok=True)
        np.save(captured / rel, np.load(captured / mp["before"], allow_pickle=False)[:want], allow_pickle=False)
        return rel, f"'{expr}' = {want} of the {have} captured elements (the allocation is larger)"
    p["count"] = str(have)
    return mp["before"], f"'{expr}' -> {have}"


def _expressions(d: dict) -> list[str]:
    """Every expression of a spec dict that may name a size symbol."""
    out = [str(e) for e in d["launch"]["grid"] + d["launch"]["block"]] + [str(d["launch"].get("shared_mem", ""))]
    for group in ("params", "constants", "buffers"):
        for item in d.get(group, []):
            out += [str(item.get(k)) for k in ("count", "value") if item.get(k) is not None]
            out += [str(v) for v in (item.get("init") or {}).values()]
    out += [str(v) for v in (d.get("work") or {}).values() if v is not None]
    for step in d.get("chain", []):
        out += [str(e) for e in step["launch"]["grid"] + step["launch"]["block"]]
        out += [str(a.get("value")) for a in step["args"] if a.get("value") is not None]
    return out


def apply_capture(mep_dir: Path, manifest: dict, captured_rel: str = "data/captured",
                  include_flags: list[str] | None = None) -> UseReport:
    mep_dir = Path(mep_dir)
    spec_path = mep_dir / "mep.yaml"
    if not spec_path.is_file():
        raise MepgenError(f"no MEP at {mep_dir}: run `mepgen mep {manifest['kernel']}` first, then "
                          f"`mepgen capture {manifest['kernel']} --use`")
    spec = load_spec(spec_path)
    if spec.kernel.name != manifest["kernel"]:
        raise MepgenError(f"{spec_path} is for {spec.kernel.name}, the capture is of {manifest['kernel']}")
    launched = manifest.get("template_args") or []
    if spec.kernel.template_args and launched and \
            [re.sub(r"\s+", "", str(a)) for a in spec.kernel.template_args] != launched:
        raise MepgenError(f"the MEP instantiates {spec.kernel.name}<{', '.join(map(str, spec.kernel.template_args))}>, "
                          f"the capture is of {manifest['launched_as']}: capture with KERNEL<args>")
    report = UseReport(spec_path, spec_path.with_name(spec_path.name + BACKUP_SUFFIX))
    d = spec.to_dict()
    sizes, bound = dict(spec.sizes), set()
    by_name = {p["name"]: p for p in manifest["params"]}
    settled: set[str] = set()

    # scalars first: the sizes they bind are what buffer counts are usually written over
    for i, p in enumerate(d["params"]):
        mp = by_name.get(p["name"])
        if p["role"] != "scalar" or mp is None or mp["kind"] != "value":
            continue
        if mp.get("value") is not None and isinstance(mp["value"], int) and not isinstance(mp["value"], bool):
            new, note = _settle(str(p.get("value", "")), mp["value"], sizes, bound)
        else:
            new = mp.get("struct") or p["ctype"]
            new = literal(mp.get("value"), mp.get("dtype"), new, mp["bytes_hex"])
            note = None if new == str(p.get("value")) else f"captured value {new if len(new) < 40 else '(bytes)'}"
        p["value"] = new
        settled.add(f"params[{i}]")
        if note:
            report.changes.append(f"{p['name']}: {note}")

    for i, p in enumerate(d["params"]):
        mp = by_name.get(p["name"])
        if p["role"] == "scalar" or mp is None:
            continue
        if mp["kind"] != "buffer":
            report.skipped.append(f"{p['name']}: captured as a {mp['kind']} pointer; kept the spec's data")
            continue
        if p.get("dtype") and p["dtype"] != mp["dtype"]:
            raise MepgenError(f"{p['name']}: mep.yaml says {p['dtype']}, the capture holds {mp['dtype']}; "
                              "fix the dtype in mep.yaml or capture again")
        p["dtype"] = mp["dtype"]
        path, note = _buffer_count(p, mp, sizes, bound, mep_dir / captured_rel)
        if note:
            report.changes.append(f"{p['name']}.count: {note}")
        if p["role"] == "out" and mp["written"] and mp["changed_elements"] < mp["count"]:
            p["role"] = "inout"       # what the launch left alone keeps its captured value
            report.changes.append(f"{p['name']}: inout (the launch changed {mp['changed_elements']} of "
                                  f"{mp['count']} elements)")
        if p["role"] in ("in", "inout"):
            p["init"] = {"kind": "file", "path": f"{captured_rel}/{path}"}
            report.changes.append(f"{p['name']}: init from {captured_rel}/{path}")
        if isinstance(mp.get("address"), int):
            p["placement"] = mp["address"] % PLACEMENT_SPAN
            report.changes.append(f"{p['name']}: placed {p['placement']} bytes past a 2 MiB boundary, as in the application")
        settled.add(f"params[{i}]")

    consts = {c["name"]: c for c in manifest.get("constants", [])}
    for j, c in enumerate(d.get("constants", [])):
        mc = consts.get(c["name"])
        if mc is None:
            continue
        if c.get("dtype") and mc["dtype"] == c["dtype"]:
            c["count"], note = _settle(str(c.get("count", "1")), mc["count"], sizes, bound)
            c["init"] = {"kind": "file", "path": f"{captured_rel}/{mc['file']}"}
            c.pop("value", None)
            report.changes.append(f"{c['name']}: init from {captured_rel}/{mc['file']}")
        else:
            raw = np.load(mep_dir / captured_rel / mc["file"], allow_pickle=False).tobytes().hex()
            c["value"] = bytes_expression(f"decltype({c['name']})", raw)
            for key in ("dtype", "count", "init"):
                c.pop(key, None)
            report.changes.append(f"{c['name']}: the captured bytes")
        settled.add(f"constants[{j}]")

    for key, dim in (("grid", manifest["grid"]), ("block", manifest["block"])):
        exprs = list(d["launch"][key])
        for j, e in enumerate(exprs):        # a bare size symbol not yet bound (`NBLOCKS`) takes the captured value
            if j < 3 and _SYMBOL.match(str(e).strip()) and str(e).strip() in sizes and str(e).strip() not in bound:
                _settle(str(e), dim[j], sizes, bound)
        now = [cexpr.evaluate(e, sizes) for e in exprs]
        if None in now or _padded(now) != _padded(dim):
            n = max(len(exprs), 1 + max((k for k in range(3) if dim[k] != 1), default=0))
            d["launch"][key] = [str(v) for v in dim[:n]]
            report.changes.append(f"launch.{key}: {exprs} -> {d['launch'][key]}")
    smem = cexpr.evaluate(d["launch"].get("shared_mem", "0"), sizes)
    if smem != manifest["shared_mem"]:
        d["launch"]["shared_mem"] = str(manifest["shared_mem"])
        report.changes.append(f"launch.shared_mem -> {manifest['shared_mem']}")
    settled.add("launch")                     # grid, block and shared memory are the captured ones now

    d["sizes"] = sizes
    settled |= {f"sizes.{s}" for s in bound}
    # a size symbol whose todo nothing uses any more (the launch that used it is literal now) is settled too
    used = _expressions(d)
    settled |= {f"sizes.{s}" for s in sizes if not any(re.search(rf"\b{re.escape(s)}\b", e) for e in used)}
    for flag in include_flags or []:
        build = d.setdefault("build", {})
        if flag not in build.setdefault("nvcc_flags", []):
            build["nvcc_flags"].append(flag)
            report.changes.append(f"build.nvcc_flags: {flag} (the application's include folder)")
    kept = [t for t in d.get("todo", []) if not any(t["field"] == s or t["field"].startswith(s + ".")
                                                     or t["field"].startswith(s + "[") for s in settled)]
    if len(kept) != len(d.get("todo", [])):
        report.changes.append(f"todo: {len(d['todo']) - len(kept)} entr(ies) settled by the capture")
    d["todo"] = kept
    new_spec = validate_dict(d, str(spec_path))
    if not report.backup.exists():
        shutil.copy2(spec_path, report.backup)
    header = (f"# MEP of {spec.kernel.name}, pointed at the data captured from the application by\n"
              f"# `mepgen capture --use` ({captured_rel}/manifest.json). The version mepgen mep wrote, with its\n"
              f"# notes on how each field was inferred: {report.backup.name}\n")
    write_atomic(spec_path, header + yaml.safe_dump(new_spec.to_dict(), sort_keys=False, width=120))
    _refresh_inputs(new_spec, mep_dir, report)
    return report


def _refresh_inputs(spec: Spec, mep_dir: Path, report: UseReport) -> None:
    """Regenerate data/in/ so `make && ./mep` by hand runs on the captured data too."""
    make_inputs(spec, mep_dir, spec.verify.seed, mep_dir / "data" / "in")
    report.changes.append("data/in/ regenerated from the captured files")

