"""Turn the injector's raw dumps into the MEP's captured data: `.npy` files and `manifest.json`.

Layout written under the MEP's `data/captured/` (see docs/capture.md):

    manifest.json                 what was captured, from which launch, and how each file maps to a parameter
    before/<param>.npy            each pointer argument's data before the launch (the harness's `--data` format)
    before/const.<symbol>.npy     each __constant__/__device__ symbol the kernel reads
    before/alloc<N>.npy           an allocation reached only through device pointers inside arguments or buffers
                                  (a struct's pointer fields, an array of pointers), as bytes
    after/<param>.npy             the buffers the launch changed, after it: the reference outputs (`.npz`,
                                  compressed, above --compress-above; buffers it did not change have no file)

The relocation table (`relocations` in the manifest) names every device pointer found inside an argument's bytes or
an allocation's contents: where it lies and which allocation (and byte offset) it points to, so the MEP rewrites it
to its own buffer instead of passing the application's address.

A pointer may point into the middle of its allocation: the arrays start at the pointed-to element (element 0 is
what the kernel sees as `p[0]`) and run to the allocation's end; the offset and the allocation's size are in the
manifest so a replay can rebuild the allocation. Element types come from the inventory (template parameters are
bound from the launched instantiation's name); an element type mepgen cannot map to a numpy dtype is kept as raw
bytes (uint8) and says so.
"""
from __future__ import annotations

import json
import re
import shutil
import struct
import zipfile
from pathlib import Path

import numpy as np

from ..errors import MepgenError
from ..spec import C_TYPES, Spec
from ..demangled import spelled_template_args
from .names import bare_type
from .plan import CapturePlan, PlanConstant, PlanParam

MANIFEST = "manifest.json"
FORMAT = "mepgen.capture"
VERSION = 2
RAW_VERSION = 2
DEFAULT_COMPRESS_ABOVE = 64 << 20
#: arrays larger than this are written as they are, whatever --compress-above says: deflate runs on one core at
#: about 80 MB/s (level 1; numpy's default level took 36 MB/s), so an 8.5 GB reference took minutes to compress
#: (perlin's capture, bench/results/optimize_captured_2026-11-29/) and as long again to read back
COMPRESS_AT_MOST = 1 << 30

_STRUCT_FMT = {"float32": "<f", "float64": "<d", "int8": "<b", "uint8": "<B", "int16": "<h", "uint16": "<H",
               "int32": "<i", "uint32": "<I", "int64": "<q", "uint64": "<Q", "bool": "<?", "float16": "<e"}


def template_bindings(kernel: dict, demangled: str) -> dict[str, str]:
    """Template parameter name -> argument, from the launched instantiation (`void cg::axpy<float>(...)`)."""
    names = [t["name"] for t in kernel.get("template_params", [])]
    if not names:
        return {}
    return dict(zip(names, spelled_template_args(demangled)))


def dtype_for(spelling: str | None, bindings: dict[str, str], typedefs: dict[str, str] | None = None) -> str | None:
    """The numpy dtype name of a C type (of a pointer's elements: qualifiers and `*` are dropped), through template
    bindings and the application's simple typedefs."""
    t = bare_type(spelling or "")
    for _ in range(4):
        t = bare_type(bindings.get(t) or (typedefs or {}).get(t) or t)
    t = t.split("::")[-1] if t.startswith("std::") else t
    return C_TYPES.get(t)


def constant_layout(declaration: str) -> tuple[str, int | None]:
    """`__constant__ float c_stencil[5]` -> (`float`, 5); a scalar gives count 1, an unknown size None."""
    text = re.sub(r"\b(__constant__|__device__|__managed__|static|extern|const|constexpr|volatile)\b", " ",
                  declaration.split("=")[0])
    m = re.match(r"\s*(.*?)\s*\b([A-Za-z_]\w*)\s*((?:\[[^\]]*\]\s*)*)$", text.strip() + " ", re.S)
    if not m:
        return "", None
    count = 1
    for dim in re.findall(r"\[([^\]]*)\]", m.group(3)):
        if not dim.strip().isdigit():
            return m.group(1), None
        count *= int(dim)
    return " ".join(m.group(1).split()), count


def _decode(bytes_hex: str, dtype: str | None):
    raw = bytes.fromhex(bytes_hex)
    fmt = _STRUCT_FMT.get(dtype or "")
    if fmt and struct.calcsize(fmt) == len(raw):
        v = struct.unpack(fmt, raw)[0]
        return bool(v) if dtype == "bool" else v
    return None


def save_array(out: Path, rel: str, arr: np.ndarray, compress_above: int) -> str:
    """Write `arr` at out/rel (`.npy`), or compressed as `.npz` (key `data`, deflate level 1: numpy's np.load reads
    it) when larger than compress_above bytes and at most COMPRESS_AT_MOST; return the relative path written."""
    if compress_above < arr.nbytes <= COMPRESS_AT_MOST:
        rel = rel[:-len(".npy")] + ".npz"
        with zipfile.ZipFile(out / rel, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1, allowZip64=True) as z:
            with z.open("data.npy", "w", force_zip64=True) as f:
                np.lib.format.write_array(f, np.asanyarray(arr), allow_pickle=False)
    else:
        np.save(out / rel, arr, allow_pickle=False)
    return rel


def load_array(captured: Path, rel: str) -> np.ndarray:
    """A captured array by its manifest path (`.npy`, or `.npz` written compressed)."""
    path = Path(captured) / rel
    if path.suffix == ".npz":
        with np.load(path, allow_pickle=False) as z:
            return z["data"]
    return np.load(path, allow_pickle=False)


def _buffer(raw_dir: Path, rp: dict, alloc: dict, pp: PlanParam, dtype: str | None, spec_role: str | None,
            out: Path, sharing: list[str], compress_above: int = DEFAULT_COMPRESS_ABOVE) -> dict:
    notes = []
    np_dtype = np.dtype(dtype) if dtype else np.dtype(np.uint8)
    if dtype is None:
        notes.append(f"element type '{pp.pointee}' has no numpy dtype: kept as raw bytes (uint8)")
    item = np_dtype.itemsize
    offset = int(rp["alloc_offset"])
    avail = int(alloc["bytes"]) - offset
    if offset % item:
        notes.append(f"points {offset} bytes into its allocation, not a whole number of {item}-byte elements")
    count = avail // item
    if avail % item:
        notes.append(f"the allocation's last {avail % item} bytes are not a whole element and are left out")
    arrays = {}
    for when in ("before", "after"):
        data = np.fromfile(raw_dir / alloc[when], dtype=np.uint8)
        if data.size != int(alloc["bytes"]):
            raise MepgenError(f"the capture of {pp.name} is truncated ({data.size} of {alloc['bytes']} bytes {when})")
        arrays[when] = data[offset:offset + count * item].view(np_dtype)
    np.save(out / "before" / f"{pp.name}.npy", arrays["before"], allow_pickle=False)
    changed = _changed_elements(arrays["before"], arrays["after"])
    written = changed > 0
    after = save_array(out, f"after/{pp.name}.npy", arrays["after"], compress_above) if written else None
    if sharing:
        notes.append(f"shares its allocation with {', '.join(sharing)}: a replay with separate buffers differs "
                     "if the kernel reads what another of these parameters writes")
    if spec_role == "in" and written:
        notes.append("mep.yaml says 'in' but the launch changed it")
    if rp.get("managed"):
        notes.append("managed (unified) memory in the application; the MEP uses device memory")
    return {"name": pp.name, "kind": "buffer", "ctype": pp.ctype, "dtype": np_dtype.name, "itemsize": item,
            "count": count, "offset_bytes": offset, "offset_elements": offset // item, "alloc_bytes": int(alloc["bytes"]),
            "allocation": int(rp["alloc"]), "address": int(rp["address"]) if "address" in rp else None,
            "before": f"before/{pp.name}.npy", "after": after,
            "written": written, "changed_elements": changed, "role_guess": "written" if written else "in",
            "spec_role": spec_role, "notes": notes}


def _changed_elements(before: np.ndarray, after: np.ndarray) -> int:
    """Elements whose bytes differ (NaN payloads and -0.0 included: the comparison is bitwise)."""
    b = before.view(np.uint8).reshape(before.size, -1)
    a = after.view(np.uint8).reshape(after.size, -1)
    return int(np.count_nonzero((a != b).any(axis=1))) if before.size else 0


def _constant(raw_dir: Path, rc: dict, pc: PlanConstant | None, spec: Spec | None, out: Path,
              typedefs: dict[str, str]) -> dict:
    name = rc["name"]
    ctype, count = constant_layout(pc.declaration if pc else "")
    dtype = dtype_for(ctype, {}, typedefs)
    if spec is not None:
        sc = next((c for c in spec.constants if c.name == name), None)
        if sc is not None and sc.dtype:
            dtype = sc.dtype
    data = np.fromfile(raw_dir / rc["file"], dtype=np.uint8)
    notes = []
    if dtype is None or data.size % np.dtype(dtype).itemsize:
        notes.append(f"type '{ctype or '?'}' has no numpy dtype: kept as raw bytes (uint8)")
        dtype = "uint8"
    arr = data.view(np.dtype(dtype))
    file = f"before/const.{name.replace('::', '.')}.npy"
    np.save(out / file, arr, allow_pickle=False)
    if count is not None and dtype != "uint8" and count != arr.size:
        notes.append(f"the declaration says {count} elements, the module holds {arr.size}")
    return {"name": name, "symbol": rc["symbol"], "bytes": int(rc["bytes"]), "ctype": ctype, "dtype": dtype,
            "count": int(arr.size), "file": file, "notes": notes}


def convert(raw_dir: Path, plan: CapturePlan, dest: Path, *, spec: Spec | None = None,
            typedefs: dict[str, str] | None = None, extra: dict | None = None,
            compress_above: int = DEFAULT_COMPRESS_ABOVE) -> dict:
    """Write `dest` (the MEP's `data/captured/`) from the injector's output in `raw_dir`; return the manifest.

    `dest` is replaced as a whole (staged beside it, then renamed), so a failed conversion never leaves a mix of
    two captures.
    """
    raw_dir, dest = Path(raw_dir), Path(dest)
    try:
        raw = json.loads((raw_dir / "capture.json").read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise MepgenError(f"the injector's capture.json in {raw_dir} is missing or unreadable ({e})") from None
    if raw.get("format") != "mepgen.capture.raw" or raw.get("version") != RAW_VERSION:
        raise MepgenError(f"{raw_dir / 'capture.json'} is not a version-{RAW_VERSION} raw capture")
    if len(raw["params"]) != len(plan.params):
        raise MepgenError(f"the capture has {len(raw['params'])} parameters, the plan {len(plan.params)}")
    stage = dest.parent / f".{dest.name}.tmp"
    shutil.rmtree(stage, ignore_errors=True)
    (stage / "before").mkdir(parents=True)
    (stage / "after").mkdir()
    kernel = plan.choice.kernel
    bindings = template_bindings(kernel, raw.get("demangled", ""))
    allocs = {a["id"]: a for a in raw["allocations"]}
    users: dict[int, list[str]] = {}
    for rp in raw["params"]:
        if "alloc" in rp:
            users.setdefault(int(rp["alloc"]), []).append(rp["name"])
    params = []
    for rp, pp in zip(raw["params"], plan.params):
        sp = next((p for p in spec.params if p.name == pp.name), None) if spec is not None else None
        if pp.kind == "pointer" and rp.get("null"):
            params.append({"name": pp.name, "kind": "null", "ctype": pp.ctype, "spec_role": sp and sp.role,
                           "notes": ["a null pointer: the MEP passes a buffer instead"]})
        elif pp.kind == "pointer":
            dtype = None if "*" in (pp.pointee or "") else \
                (sp.dtype if sp is not None and sp.dtype else None) or dtype_for(pp.pointee, bindings, typedefs)
            sharing = [n for n in users[int(rp["alloc"])] if n != pp.name]
            params.append(_buffer(raw_dir, rp, allocs[int(rp["alloc"])], pp, dtype, sp and sp.role, stage, sharing,
                                  compress_above))
        else:
            dtype = dtype_for(pp.ctype, bindings, typedefs)
            params.append({"name": pp.name, "kind": "value", "ctype": pp.ctype, "struct": pp.struct,
                           "dtype": dtype if _decode(rp["bytes_hex"], dtype) is not None else None,
                           "value": _decode(rp["bytes_hex"], dtype), "bytes_hex": rp["bytes_hex"],
                           "size": int(rp["size"]), "spec_role": sp and sp.role})
    reached = _reached(raw_dir, raw, users, stage, compress_above)
    relocations = _relocations(raw, plan)
    by_name = {c.name: c for c in plan.constants}
    constants = [_constant(raw_dir, rc, by_name.get(rc["name"]), spec, stage, typedefs or {})
                 for rc in raw.get("constants", [])]
    manifest = {
        "format": FORMAT, "version": VERSION, "kernel": kernel["qualified_name"], "id": kernel["id"],
        "launched_as": raw.get("demangled", ""), "mangled": raw.get("mangled", ""),
        "template_args": spelled_template_args(raw.get("demangled", "")),
        "launch_index": raw.get("launch_index", plan.launch), "selection": raw.get("selection", "index"),
        "launches_timed": raw.get("launches_timed"), "kernel_ms": raw.get("kernel_ms"),
        "after_ms": plan.after_ms, "time_ms": raw.get("time_ms"), "api": raw.get("api"),
        "grid": raw["grid"], "block": raw["block"], "cluster": raw.get("cluster"), "shared_mem": raw["shared_mem"],
        "stream": raw.get("stream"), "params": params, "constants": constants,
        "allocations": [{"id": a["id"], "bytes": a["bytes"], "params": users.get(a["id"], []),
                         "via": a.get("via", ""), "managed": bool(a.get("managed")), **reached.get(a["id"], {})}
                        for a in raw["allocations"]],
        "relocations": relocations,
        "storage": {"compress_above": compress_above,
                    "policy": "every byte of every reachable allocation is kept: inputs as .npy, reference outputs "
                              f"only for what the launch changed, compressed (.npz) above {compress_above} bytes"},
        "bytes_captured": sum(int(a["bytes"]) for a in raw["allocations"]), "capture_ms": raw.get("capture_ms"),
        **(extra or {}),
    }
    (stage / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    if dest.exists():
        shutil.rmtree(dest)
    stage.rename(dest)
    return manifest


def _reached(raw_dir: Path, raw: dict, users: dict[int, list[str]], stage: Path, compress_above: int) -> dict:
    """Allocations no parameter points to, reached through pointers inside arguments or buffers: their bytes."""
    out = {}
    for a in raw["allocations"]:
        if users.get(int(a["id"])):
            continue
        data = {}
        for when in ("before", "after"):
            data[when] = np.fromfile(raw_dir / a[when], dtype=np.uint8)
            if data[when].size != int(a["bytes"]):
                raise MepgenError(f"the capture of allocation {a['id']} is truncated ({data[when].size} of "
                                  f"{a['bytes']} bytes {when})")
        name = f"alloc{a['id']}"
        np.save(stage / "before" / f"{name}.npy", data["before"], allow_pickle=False)
        changed = _changed_elements(data["before"], data["after"])
        out[int(a["id"])] = {"name": name, "before": f"before/{name}.npy", "written": changed > 0,
                             "changed_elements": changed,
                             "after": save_array(stage, f"after/{name}.npy", data["after"], compress_above)
                             if changed else None}
    return out


def _relocations(raw: dict, plan: CapturePlan) -> list[dict]:
    """The raw relocation table with parameters named: {in: param, param, at, target, offset} or
    {in: allocation, allocation, at, target, offset} (byte offsets; `target` an allocation id)."""
    out = []
    for r in raw.get("relocations", []):
        x = {"in": r["in"], "at": int(r["at"]), "target": int(r["target"]), "offset": int(r["offset"])}
        if r["in"] == "param":
            x["param"] = plan.params[int(r["where"])].name
        else:
            x["allocation"] = int(r["where"])
        out.append(x)
    return out


def load_manifest(captured: Path) -> dict:
    """Read a captured folder's manifest, refusing another format or version."""
    path = Path(captured) / MANIFEST
    try:
        m = json.loads(path.read_text())
    except FileNotFoundError:
        raise MepgenError(f"no capture at {path.parent}: run `mepgen capture KERNEL -- ./app ...` first") from None
    except (OSError, json.JSONDecodeError) as e:
        raise MepgenError(f"{path} is unreadable ({e})") from None
    if m.get("format") != FORMAT or m.get("version") != VERSION:
        raise MepgenError(f"{path} is not a version-{VERSION} mepgen capture manifest")
    return m
