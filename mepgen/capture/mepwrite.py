"""A complete MEP from one recorded launch: mep.yaml, kernel.cu, harness.cu, Makefile and data/in.

Everything the run answered is settled, so the MEP needs no person: the launch (grid, block, dynamic shared
memory), every scalar (the recorded argument bytes: numbers as literals, structs as their bytes), every buffer's
element count and data (`init: {kind: file}` on the captured `before/` files), its role from what the launch
changed (a buffer the launch changed is `inout`, reset to its captured state before every run, unless the static
analysis says `out` and the launch changed every element; a buffer the launch left as it was is `in`, unless static
analysis says the kernel writes it without reading it: then `out`, the launch having written the values it held),
the constants, and the build flags of the translation unit (its include folders and macros, as the application was
built). Static analysis is the static MEP's where one was written, else static completion's, asked only when the
launch left a buffer as it was.

Device pointers inside arguments and buffers (a struct passed by value, an array of pointers) are never passed as
the application's addresses: each allocation they reach becomes a buffer of the MEP (`buffers: reachedN`, its
captured bytes), and the relocation table becomes `relocate` entries, so the harness writes its own addresses
there. What cannot be replayed faithfully stays a todo with the reason (a pointer before the start of the buffer
that holds its allocation, thread-block clusters).
"""
from __future__ import annotations

import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import MepgenError
from ..spec import DTYPES, PLACEMENT_SPAN, Spec, load_spec, validate_dict
from ..workspace import write_atomic
from .use import BACKUP_SUFFIX, bytes_expression, literal
from ..mep.assemble import _callee, assemble
from ..mep.project import Project
from ..mep.buildcfg import build_config, kept_flags
from ..evaluate.verify import poison_like
from .convert import load_array
from ..mep import writer
from ..mep.kernelsrc import render_kernel_file
from ..harness import render_harness, render_makefile
from ..mep.render import render_yaml
from ..datagen import make_inputs

#: float tolerances of a captured MEP's outputs when static analysis gives none (rtol, atol)
DEFAULT_FLOAT_TOL = {"float32": (1e-5, 1e-6), "float64": (1e-12, 1e-14), "float16": (1e-3, 1e-3)}


@dataclass
class Written:
    path: Path
    spec: Spec
    todo: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    backup: Path | None = None


def include_flags(inventory: dict, kernel: dict, app_root: Path | None = None) -> list[str]:
    """`-I` for each include folder the kernel's translation unit was parsed with (as the application builds it),
    so headers kernel.cu includes by name are found; folders inside the application follow it when it moved."""
    tu = next((t for t in inventory.get("translation_units", []) if t["file"] == kernel["file"]), {})
    old_root = Path(inventory.get("app_root") or "/nonexistent")
    out = []
    for d in tu.get("include_dirs", []):
        path = Path(d)
        if app_root is not None and path.is_relative_to(old_root):
            path = Path(app_root) / path.relative_to(old_root)
        if path.is_dir() and f"-I{path}" not in out:
            out.append(f"-I{path}")
    return out


def _role(mp: dict, static_role: str | None, poison_like: int | None = 0) -> tuple[str, str]:
    """`out` only where it is proven: static analysis says the kernel does not read it before writing, the launch
    changed every element (an element written with its old value cannot be told from one left alone, so part of
    it changed is `inout`), and no element of the result holds the poison's bits (`poison_like`; None: unknown),
    which `mepgen run` would count as unwritten."""
    if not mp["written"]:
        if static_role == "out" and poison_like == 0:
            # the launch wrote what the buffer held already (a launch after a warm-up, or results that were there):
            # as `in` the MEP would check nothing the kernel writes; as `out` every run starts from the poison, so
            # the kernel must write it again, and what it writes is compared
            return "out", ("out: the launch left it as it was, but static analysis says the kernel writes it without "
                           "reading it first (it wrote the values it held): every run starts from the poison")
        return "in", "in: the launch did not change it"
    if static_role == "out" and mp["changed_elements"] == mp["count"]:
        if poison_like is None or poison_like > 0:
            return "inout", ("inout: the launch changed every element, but " +
                             (f"{poison_like} of them hold" if poison_like else "its result could not be read to "
                              "check whether any holds") + " the bits an `out` buffer is poisoned with, which would "
                             "read as unwritten; every run starts from the captured state")
        return "out", "out: the launch changed every element, and the kernel does not read it before writing"
    return "inout", (f"inout: the launch changed {mp['changed_elements']} of its {mp['count']} elements; every run "
                     "starts from the captured state")


def captured_spec(inventory: dict, kernel: dict, manifest: dict, *, static: Spec | None = None,
                  detect_gpu: bool = True, app_root: Path | None = None) -> tuple[dict, list[str]]:
    """(mep.yaml as a dict, notes) for `kernel` from its capture manifest; `static` (the MEP static completion
    wrote, when there is one) lends roles and tolerances where the capture agrees with it."""

    if manifest["kernel"] != kernel["qualified_name"]:
        raise MepgenError(f"the capture is of {manifest['kernel']}, not {kernel['qualified_name']}")
    notes: list[str] = []
    todo: list[dict] = []
    static_params = {p.name: p for p in static.params} if static is not None else {}
    by_name = {p["name"]: p for p in manifest["params"]}
    targs = [str(a) for a in manifest.get("template_args") or []] if kernel.get("is_template") else []
    allocs = {int(a["id"]): a for a in manifest.get("allocations", [])}
    holder_of = {}                  # allocation id -> (buffer parameter, its byte offset into the allocation)
    sharers: dict[int, list[str]] = {}
    for mp in manifest["params"]:      # the parameter pointing first into it holds it (the others lie inside)
        if mp["kind"] == "buffer":
            aid = int(mp["allocation"])
            sharers.setdefault(aid, []).append(mp["name"])
            if aid not in holder_of or int(mp["offset_bytes"]) < holder_of[aid][1]:
                holder_of[aid] = (mp["name"], int(mp["offset_bytes"]))

    params, reached = [], {}
    bindings = dict(zip([t["name"] for t in kernel.get("template_params", [])], targs))

    def reached_buffer(aid: int) -> str | None:
        a = allocs[aid]
        if not a.get("before"):
            return None
        if aid not in reached:
            name = f"reached{aid}"
            while name in by_name:
                name += "_"
            reached[aid] = {"name": name, "ctype": "unsigned char", "dtype": "uint8", "count": str(a["bytes"]),
                            "init": {"kind": "file", "path": f"data/captured/{a['before']}"},
                            "note": f"an allocation of {a['bytes']} bytes reached only through device pointers "
                                    "inside the arguments (captured bytes)"}
            if a.get("written"):     # the kernel writes it: reset before every run, checked as an output (bytes)
                reached[aid]["role"] = "inout"
                reached[aid]["note"] += f"; the launch changed {a.get('changed_elements')} of its bytes"
        return reached[aid]["name"]

    def target(r: dict, where: str) -> tuple[str, int] | None:
        aid, off = int(r["target"]), int(r["offset"])
        if aid in holder_of and off >= holder_of[aid][1]:
            return holder_of[aid][0], off - holder_of[aid][1]
        name = reached_buffer(aid)
        if name is None:
            todo.append({"field": where, "reason": f"a device pointer at byte {r['at']} points {off} bytes into "
                         f"allocation {aid}, before the part the parameter {holder_of[aid][0]} holds: the MEP "
                         "cannot place it"})
            return None
        return name, off

    relocate: dict[str, list[dict]] = {}    # holder (parameter or reached buffer) -> its relocations
    for j, r in enumerate(manifest.get("relocations", [])):
        if r["in"] == "param":
            holder, at = r["param"], int(r["at"])
        else:
            aid = int(r["allocation"])
            if aid in holder_of and int(r["at"]) >= holder_of[aid][1]:
                holder, at = holder_of[aid][0], int(r["at"]) - holder_of[aid][1]
            else:
                holder, at = reached_buffer(aid), int(r["at"])
                if holder is None:
                    todo.append({"field": "params", "reason": f"relocation {j}: a pointer lies before the part of "
                                 f"allocation {aid} the parameter {holder_of[aid][0]} holds"})
                    continue
        t = target(r, f"relocations[{j}]")
        if t is not None:
            relocate.setdefault(holder, []).append({"at": at, "buffer": t[0], "offset": t[1]})

    for kp in kernel["params"]:
        mp = by_name.get(kp["name"])
        ctype = kp.get("type") or kp.get("written", "")
        sp = static_params.get(kp["name"])
        if mp is None:
            raise MepgenError(f"the capture has no parameter {kp['name']} of {kernel['qualified_name']}: "
                              "capture again after `mepgen extract`")
        if mp["kind"] == "null":
            params.append({"name": kp["name"], "role": "scalar", "ctype": ctype, "value": "nullptr",
                           "note": "a null pointer in the captured launch"})
        elif mp["kind"] == "value":
            struct_type = mp.get("struct") or re.sub(r"\b(const|volatile)\b", " ", ctype).strip()
            for name, arg in bindings.items():      # `T` of a template kernel: the launched instantiation's type
                struct_type = re.sub(rf"\b{re.escape(name)}\b", arg, struct_type)
            value = literal(mp.get("value"), mp.get("dtype"), " ".join(struct_type.split()), mp["bytes_hex"])
            p = {"name": kp["name"], "role": "scalar", "ctype": ctype, "value": value,
                 "note": "the captured argument" + (" (its bytes)" if mp.get("value") is None else "")}
            if mp.get("dtype"):
                p["dtype"] = mp["dtype"]
            if kp["name"] in relocate:
                p["relocate"] = relocate.pop(kp["name"])
                p["note"] += f"; {len(p['relocate'])} device pointer(s) inside rewritten to the MEP's buffers"
            params.append(p)
        elif holder_of[int(mp["allocation"])][0] != kp["name"]:
            # the application passed a pointer into an allocation another parameter holds (an in-place sort's
            # source and destination): the MEP passes the same pointer into that parameter's buffer, so the kernel
            # reads what it writes there as it did in the application
            holder, base = holder_of[int(mp["allocation"])]
            ptr_type = re.sub(r"\b__restrict__\b|\b__restrict\b", " ", ctype)
            for name, arg in bindings.items():
                ptr_type = re.sub(rf"\b{re.escape(name)}\b", arg, ptr_type)
            p = {"name": kp["name"], "role": "scalar", "ctype": ctype,
                 "value": f"static_cast<{' '.join(ptr_type.split())}>(nullptr)",
                 "relocate": [{"at": 0, "buffer": holder, "offset": int(mp["offset_bytes"]) - base}],
                 "note": f"the application passed a pointer {int(mp['offset_bytes']) - base} bytes into the "
                         f"allocation '{holder}' points to: the same pointer into the MEP's buffer {holder} "
                         f"(what the launch changed through it is checked there)"}
            if sp is not None and sp.role in ("in", "out", "inout"):
                notes.append(f"{kp['name']}: static analysis says a {sp.role} buffer; the application passed it "
                             f"inside {holder}'s allocation (aliased)")
            params.append(p)
        else:
            role, why = _role(mp, sp.role if sp is not None else None, _poison_like(manifest, mp))
            if role == "out" and len(sharers[int(mp["allocation"])]) > 1:
                role, why = "inout", (f"inout: {', '.join(n for n in sharers[int(mp['allocation'])] if n != kp['name'])} "
                                      "point(s) into the same allocation, so the kernel may read what it holds")
            p = {"name": kp["name"], "role": role, "ctype": ctype, "dtype": mp["dtype"], "count": str(mp["count"]),
                 "note": f"{why}; count: the captured allocation ({mp['count']} elements from the pointer on)"}
            if role in ("in", "inout"):
                p["init"] = {"kind": "file", "path": f"data/captured/{mp['before']}"}
            if isinstance(mp.get("address"), int) and mp["address"] % PLACEMENT_SPAN % mp["itemsize"] == 0:
                p["placement"] = mp["address"] % PLACEMENT_SPAN
            if mp["dtype"] == "uint8" and mp.get("notes") and any("raw bytes" in n for n in mp["notes"]):
                p["lanes"] = 1      # records kept as bytes: the harness passes them as the kernel's pointer type
                p["note"] += "; elements kept as raw bytes"
            elif " ".join((kp.get("pointee_type") or "").split()) != DTYPES[mp["dtype"]]:
                p["lanes"] = 1      # `char`, `size_t`, `long`, `T`: same bytes, another spelling than the harness's
                                    # `signed char`, `unsigned long long`...: passed as the kernel's pointer type
            if kp["name"] in relocate:
                p["relocate"] = relocate.pop(kp["name"])
                if role == "out":
                    p["role"] = "inout"
                    p["init"] = {"kind": "file", "path": f"data/captured/{mp['before']}"}
            if sp is not None and sp.role != role and not (sp.role == "inout" and role == "out"):
                notes.append(f"{kp['name']}: static analysis says {sp.role}, the capture {role}")
            params.append(p)
    buffers = []
    for aid, b in sorted(reached.items()):
        if b["name"] in relocate:
            b["relocate"] = relocate.pop(b["name"])
        buffers.append(b)

    constants = []
    written = {g["qualified_name"] for g in kernel.get("closure", {}).get("globals", [])
               if g.get("written") and g.get("space") == "device"}
    for mc in manifest.get("constants", []):
        c = {"name": mc["name"], "ctype": mc.get("ctype") or "", "note": "captured from the kernel's module"}
        if not any("raw bytes" in n for n in mc.get("notes", [])):
            c.update(dtype=mc["dtype"], count=str(mc["count"]),
                     init={"kind": "file", "path": f"data/captured/{mc['file']}"})
            if mc["name"] in written and mc["name"] not in {p["name"] for p in params}:
                c.update(role="inout", note=c["note"] + "; the kernel writes it (static analysis): compared as an "
                                                       "output")
        else:
            raw = np.load(Path(manifest["_dir"]) / mc["file"], allow_pickle=False).tobytes().hex()
            c["value"] = bytes_expression(f"decltype({mc['name']})", raw)
        constants.append(c)

    if kernel.get("unreadable"):
        todo.append({"field": "kernel", "reason": f"extract could not read the kernel ({kernel['unreadable']}): the "
                     "launch, its arguments and data are the capture's, but kernel.cu comes from a parse with an "
                     "error in it; fix what the parse lacks (or the source), `mepgen extract` again, then "
                     f"`mepgen capture {kernel['qualified_name']} --use`"})
    grid, block = manifest["grid"], manifest["block"]
    if any(manifest.get("cluster") or []):
        todo.append({"field": "launch", "reason": f"the application launched with thread-block clusters "
                     f"{manifest['cluster']}; the MEP's <<<>>> launch has none"})
    build = build_config(inventory, kernel, set(), detect_gpu)
    tu = next((t for t in inventory.get("translation_units", []) if t["file"] == kernel["file"]), {})
    if str(inventory.get("flags_source", "")).startswith("defaults") and not kept_flags(tu.get("nvcc_args", [])):
        notes.append("build flags: the application's compile commands were not known to `mepgen extract` (no "
                     "compile_commands.json, no nvcc option in its build files), so the MEP builds with mepgen's "
                     "defaults; a kernel the application "
                     "builds with other flags (-use_fast_math, another -O) may not reproduce its output bit for bit: "
                     "extract with -p compile_commands.json")
    flags = list(build.nvcc_flags) + [f for f in include_flags(inventory, kernel, app_root) if f not in build.nvcc_flags]
    tolerance = {}
    for p in [*params, *(c for c in constants if c.get("role") == "inout")]:
        if p.get("role") in ("out", "inout") and p["dtype"] in DEFAULT_FLOAT_TOL:
            st = static.verify.tolerance.get(p["name"]) if static is not None else None
            rtol, atol = (st.rtol, st.atol) if st is not None else DEFAULT_FLOAT_TOL[p["dtype"]]
            tolerance[p["name"]] = {"rtol": float(rtol), "atol": float(atol)}
    src = kernel
    d = {
        "version": 1,
        "kernel": {"name": src["qualified_name"], "id": src["id"], "source": src["file"],
                   "source_sha256": inventory.get("files", {}).get(src["file"], ""),
                   "start_byte": src["start_byte"], "end_byte": src["end_byte"], **({"template_args": targs}
                                                                                    if targs else {})},
        "sizes": {},
        "params": params,
        "constants": constants,
        "launch": {"grid": [str(x) for x in _trim(grid)], "block": [str(x) for x in _trim(block)],
                   "shared_mem": str(manifest["shared_mem"]), "callee": _callee(kernel, targs),
                   **_observed(manifest, notes)},
        "build": {"arch": build.arch, "std": build.std, "defines": build.defines, "nvcc_flags": flags},
        "verify": {"input_sets": 1, "seed": 1, "tolerance": tolerance},
        "timing": {"warmup": 5, "reps": 50, "flush_l2": True},
        "todo": todo,
    }
    if buffers:
        d["buffers"] = buffers
    return d, notes


def _poison_like(manifest: dict, mp: dict) -> int | None:
    """Elements of the buffer's captured after-state that hold the poison's bits (None: no after-state to read); a
    buffer the launch left as it was has its before-state as its after-state."""
    state = mp.get("after") or (mp.get("before") if mp.get("written") is False else None)
    if not state or not manifest.get("_dir"):
        return None
    try:
        return poison_like(load_array(Path(manifest["_dir"]), state))
    except (OSError, ValueError, KeyError):
        return None


def _observed(manifest: dict, notes: list[str]) -> dict:
    """`launch.observed`: the configurations the run launched the kernel with, where there were several (the MEP
    measures and verifies the recorded one; patch refuses what cannot hold at the others)."""
    configs = [c for c in (manifest.get("app_gpu") or {}).get("configs") or [] if "grid" in c]
    more = sum(c.get("more", 0) for c in (manifest.get("app_gpu") or {}).get("configs") or [])
    if len(configs) < 2 and not more:
        return {}
    notes.append(f"launch: the application launched this kernel with {len(configs)}{'+' if more else ''} "
                 "configurations (launch.observed); this MEP measures and verifies the recorded one only"
                 + (f"; {more} launch(es) of configurations past the injector's 32 are not listed" if more else ""))
    return {"observed": [{"grid": list(c["grid"]), "block": list(c["block"]), "shared_mem": int(c["shared_mem"]),
                          "launches": int(c["launches"]), "total_ms": float(c["total_ms"])} for c in configs]}


def _trim(dims: list[int]) -> list[int]:
    n = 1 + max((k for k in range(3) if dims[k] != 1), default=0)
    return list(dims[:n])


def static_completion(ws, inventory: dict, kernel: dict) -> Spec:
    """Static completion of `kernel` now (`mepgen mep`'s analysis, nothing written); a failure of its own is a
    MepgenError naming it."""
    try:
        project = Project(ws.app_root, inventory["translation_units"], host_sources=inventory.get("host_sources"))
        spec, _ = assemble(project, inventory, kernel, {}, False)
    except MepgenError:
        raise
    except Exception as e:  # static completion's own failure: name it, the capture stands on its own
        raise MepgenError(f"static completion of {kernel['qualified_name']} failed ({type(e).__name__}: {e})") \
            from None
    return spec


def _left_alone(manifest: dict) -> bool:
    """Whether the launch left a buffer argument as it was (its role then rests on what static analysis says)."""
    return any(p.get("kind") == "buffer" and p.get("written") is False for p in manifest.get("params", []))


def write_captured_mep(ws, inventory: dict, kernel: dict, manifest: dict, *, detect_gpu: bool = True) -> Written:
    """Write the MEP of `kernel` from its capture (in ws.mep_dir(id)/data/captured/); an existing mep.yaml (static
    completion's, or a person's) is kept as mep.yaml.before-capture."""

    mep_dir = ws.mep_dir(kernel["id"])
    spec_path = mep_dir / "mep.yaml"
    backup = spec_path.with_name(spec_path.name + BACKUP_SUFFIX)
    static = None
    source = backup if backup.is_file() else spec_path if spec_path.is_file() else None
    if source is not None:
        try:
            static = load_spec(source)
        except MepgenError:
            static = None
    elif _left_alone(manifest):
        # no static MEP written (`mepgen tune`, `capture --all` straight after extract): a buffer the launch left as
        # it was is an output only where static analysis says the kernel writes it, so ask static completion now
        try:
            static = static_completion(ws, inventory, kernel)
        except MepgenError:
            static = None
    manifest = {**manifest, "_dir": str(mep_dir / "data" / "captured")}
    d, notes = captured_spec(inventory, kernel, manifest, static=static, detect_gpu=detect_gpu,
                             app_root=ws.app_root)
    spec = validate_dict(d, str(spec_path))
    header = [f"MEP of {kernel['qualified_name']}, {writer.CAPTURE_MARK} from launch {manifest['launch_index']} "
              f"of the application ({'the longest' if manifest.get('selection') == 'longest' else 'by index'}):",
              "every value below is what that launch used; data: data/captured/ (manifest.json says what it holds).",
              f"The version static completion wrote (if any): {backup.name}. Compare: mepgen capture --compare "
              f"{kernel['qualified_name']}"] + notes
    yaml_text = render_yaml(spec, header)
    spec = load_spec(spec_path, yaml_text)
    if spec_path.is_file() and not backup.exists():
        shutil.copy2(spec_path, backup)
    files = {"mep.yaml": yaml_text, "kernel.cu": render_kernel_file(ws.app_root, kernel, spec),
             "harness.cu": render_harness(spec), "Makefile": render_makefile(spec),
             writer.ORIGIN_FILE: writer.origin_text("capture")}
    mep_dir.mkdir(parents=True, exist_ok=True)
    for rel, text in files.items():
        write_atomic(mep_dir / rel, text)
    shutil.rmtree(mep_dir / "data" / "in", ignore_errors=True)
    make_inputs(spec, mep_dir, spec.verify.seed, mep_dir / "data" / "in")
    write_atomic(mep_dir / writer.HASH_FILE, writer.sha256(yaml_text.encode()) + "\n")
    return Written(mep_dir, spec, [f"{t.field}: {t.reason}" for t in spec.todo], notes,
                   backup if backup.exists() else None)

