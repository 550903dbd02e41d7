"""Applying and reverting patches, several per file, each on its own; the state lives in `.mepgen/patches/`.

    .mepgen/patches/ID.diff            the reviewable diff (git apply / patch -p1 from the app root)
    .mepgen/patches/ID/manifest.json   the applied patch: file, original sha256, its edits of the original
    .mepgen/patches/ID/backup/FILE     the file as `mepgen extract` saw it (the original the edits apply to)

Every patch is a list of edits (start, end, new bytes) of the file as extracted, so the kernels of one file
patch one after another: the file's content is always the original with the edits of every applied patch of
that original, and reverting one patch writes the original with the others' edits. A change is journaled:
`pending.json` is written before the file and renamed to `manifest.json` after it; a revert renames
`manifest.json` to `reverting.json` before the file and deletes it after. A run killed between the two steps
is settled by the next command from what the file holds (`settle`), so the record never says applied for a
file that is not, nor the reverse.
"""
from __future__ import annotations

import datetime
import json
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import MepgenError
from ..faults import point
from ..workspace import Workspace, write_atomic, write_into, write_json
from .splice import Plan, sha256

Edit = tuple[int, int, bytes]


def patch_dir(ws: Workspace, kernel_id: str) -> Path:
    return ws.root / "patches" / kernel_id


def diff_path(ws: Workspace, kernel_id: str) -> Path:
    return ws.root / "patches" / f"{kernel_id}.diff"


def _read(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise MepgenError(f"{path} is unreadable ({e}); the backup beside it is untouched") from None


def manifest(ws: Workspace, kernel_id: str) -> dict | None:
    return _read(patch_dir(ws, kernel_id) / "manifest.json")


def encode_edits(edits: list[Edit]) -> list[list]:
    return [[lo, hi, new.decode("utf-8", "surrogateescape")] for lo, hi, new in edits]


def decode_edits(rows: list[list]) -> list[Edit]:
    return [(int(lo), int(hi), new.encode("utf-8", "surrogateescape")) for lo, hi, new in rows]


def compose(original: bytes, patches: list[tuple[str, list[Edit]]]) -> bytes:
    """`original` with every patch's edits; edits of two patches that overlap are refused, naming both."""
    flat = sorted(((lo, hi, seq, who, new) for seq, (who, edits) in enumerate(patches) for lo, hi, new in edits),
                  key=lambda e: (e[0], e[1], e[2]))
    for a, b in zip(flat, flat[1:]):
        if a[3] != b[3] and b[0] < a[1]:
            raise MepgenError(f"the patch of {b[3]} and the applied patch of {a[3]} change the same bytes "
                              f"({a[0]}-{a[1]}, {b[0]}-{b[1]}): revert {a[3]} first, or patch them by hand")
    out = original
    for lo, hi, _, _, new in reversed(flat):
        out = out[:lo] + new + out[hi:]
    return out


@dataclass
class FileState:
    """The patches of one file recorded against one original."""
    file: str
    original: bytes | None                           # None: no record has it (see `legacy`)
    applied: list[dict] = field(default_factory=list)    # manifests, in the order they were applied
    legacy: list[dict] = field(default_factory=list)     # manifests without edits (an older mepgen)

    def content(self, exclude: str | None = None, extra: tuple[str, list[Edit]] | None = None) -> bytes:
        patches = [(m["id"], decode_edits(m["edits"])) for m in self.applied if m["id"] != exclude]
        return compose(self.original, patches + ([extra] if extra else []))


def _records(ws: Workspace, file: str) -> list[tuple[str, str, dict]]:
    """(kernel id, kind, record) of every manifest/pending/reverting record of `file`."""
    out = []
    root = ws.root / "patches"
    if not root.is_dir():
        return out
    for d in sorted(p for p in root.iterdir() if p.is_dir()):
        for kind in ("manifest", "pending", "reverting"):
            m = _read(d / f"{kind}.json")
            if m is not None and m.get("file") == file:
                m["id"] = d.name
                out.append((d.name, kind, m))
    return out


def _backup(ws: Workspace, m: dict) -> bytes | None:
    path = patch_dir(ws, m["id"]) / "backup" / m["file"]
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    return data if sha256(data) == m["original_sha256"] else None


def file_state(ws: Workspace, file: str, original_sha: str, current: bytes) -> FileState:
    """The applied patches of `file` against the original of sha `original_sha`, after settling what an
    interrupted apply or revert left journaled (under the application's lock)."""
    recs = _records(ws, file)
    original = current if sha256(current) == original_sha else None
    for _, _, m in recs:
        if original is None and m.get("original_sha256") == original_sha:
            original = _backup(ws, m)
    state = FileState(file, original)
    state.legacy = [m for _, kind, m in recs if kind == "manifest" and "edits" not in m]
    mine = [(kid, kind, m) for kid, kind, m in recs if "edits" in m and m.get("original_sha256") == original_sha]
    state.applied = sorted((m for _, kind, m in mine if kind == "manifest"), key=lambda m: m.get("seq", 0))
    if original is None:
        return state
    for kid, kind, m in mine:
        if kind == "manifest":
            continue
        pdir = patch_dir(ws, kid)
        others = [a for a in state.applied if a["id"] != kid]
        base = FileState(file, original, others)
        with_it = base.content(extra=(kid, decode_edits(m["edits"])))
        if current == with_it:              # the file has it: the change happened, the record follows it
            os.replace(pdir / f"{kind}.json", pdir / "manifest.json")
            m_applied = {**m}
            state.applied = sorted(others + [m_applied], key=lambda a: a.get("seq", 0))
        elif current == base.content():     # the file has not: the change did not happen
            (pdir / f"{kind}.json").unlink()
            state.applied = others
    return state


def status(state: FileState, kernel_id: str, edits: list[Edit], current: bytes) -> str:
    """'applied' (the file has this patch), 'pristine' (it has the other applied patches only, ready for this
    one) or 'changed' (neither: someone edited it)."""
    if state.original is None:
        return "changed"
    if current == state.content(exclude=kernel_id, extra=(kernel_id, edits)):
        return "applied"
    if current == state.content(exclude=kernel_id):
        return "pristine"
    return "changed"


def _refuse_changed(file: str, current: bytes, original_sha: str) -> MepgenError:
    return MepgenError(f"{file} changed since `mepgen extract` and the patches mepgen applied (sha256 "
                       f"{sha256(current)[:12]}, extracted {original_sha[:12]}): rerun `mepgen extract` and check "
                       f"the MEP before patching")


def _write_source(target: Path, data: bytes, rel: str, undo: str) -> None:
    try:
        write_into(target, data)
    except OSError as e:
        raise MepgenError(f"cannot write {rel} ({e.strerror or e}){undo}; make it (and its folder) writable or free "
                          f"space, then rerun") from None


def apply(ws: Workspace, plan: Plan, variant: Path) -> str:
    """Apply `plan` on top of the file's other applied patches. The file is written before the record and
    put back when the record cannot be written."""
    target = ws.app_root / plan.file
    current = target.read_bytes()
    state = file_state(ws, plan.file, plan.recorded_sha, current)
    if state.legacy:
        raise MepgenError(f"{plan.file} carries a patch applied by an older mepgen ({state.legacy[0]['id']}): "
                          f"`mepgen patch {state.legacy[0]['id']} --revert` it first")
    st = status(state, plan.kernel_id, plan.edits, current)
    if st == "applied":
        return "already applied: nothing to do"
    if st == "changed":
        raise _refuse_changed(plan.file, current, plan.recorded_sha)
    patched = state.content(exclude=plan.kernel_id, extra=(plan.kernel_id, plan.edits))
    pdir = patch_dir(ws, plan.kernel_id)
    backup = pdir / "backup" / plan.file
    write_atomic(backup, state.original)  # the original the edits apply to, before touching the user's file
    record = {"version": 2, "kernel": plan.kernel, "file": plan.file, "original_sha256": plan.recorded_sha,
              "patched_sha256": sha256(patched), "edits": encode_edits(plan.edits), "seq": time.time_ns(),
              "variant": str(variant), "new_helpers": plan.new_helpers,
              "applied": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
    point("patch-after-backup")
    write_json(pdir / "pending.json", record)
    point("patch-after-journal")
    try:
        _write_source(target, patched, plan.file, ": the file is unchanged and nothing was recorded")
    except BaseException:
        (pdir / "pending.json").unlink(missing_ok=True)
        raise
    point("patch-after-source")
    try:
        os.replace(pdir / "pending.json", pdir / "manifest.json")
    except OSError as e:
        _write_source(target, current, plan.file, ", and the patched file could not be put back either")
        (pdir / "pending.json").unlink(missing_ok=True)
        raise MepgenError(f"cannot record the patch in {pdir} ({e.strerror or e}): {plan.file} was put back as it "
                          f"was; free space or fix the permissions of .mepgen, then rerun") from None
    return f"applied to {plan.file} (backup in {backup.relative_to(ws.app_root)})"


def revert(ws: Workspace, kernel_id: str, force: bool = False) -> str:
    """Take this kernel's patch out of its file, keeping the file's other patches."""
    pdir = patch_dir(ws, kernel_id)
    m = manifest(ws, kernel_id) or _read(pdir / "pending.json") or _read(pdir / "reverting.json")
    if m is None:
        raise MepgenError(f"no applied patch for {kernel_id} (.mepgen/patches/{kernel_id}/manifest.json)")
    target = ws.app_root / m["file"]
    if "edits" not in m:
        return _revert_legacy(ws, kernel_id, m, target, force)
    current = target.read_bytes()
    state = file_state(ws, m["file"], m["original_sha256"], current)
    if state.original is None:
        raise MepgenError(f"the backup of {m['file']} in {pdir / 'backup'} is missing or not the original: cannot "
                          f"revert")
    if not any(a["id"] == kernel_id for a in state.applied):
        return f"{m['file']} does not hold the patch of {kernel_id}: nothing to do"
    edits = decode_edits(m["edits"])
    st = status(state, kernel_id, edits, current)
    if st == "pristine":      # the file is already without it (reverted by hand): the record follows
        (pdir / "manifest.json").unlink()
        return f"{m['file']} does not hold the patch of {kernel_id} any more: nothing to do"
    if st != "applied":
        if not force:
            raise MepgenError(f"{m['file']} changed after the patch was applied; --force reverts anyway and "
                              f"keeps the changed file beside the backup")
        stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
        backup = pdir / "backup" / m["file"]
        shutil.copy2(target, backup.with_name(backup.name + f".changed-{stamp}"))
    others = [a["id"] for a in state.applied if a["id"] != kernel_id]
    os.replace(pdir / "manifest.json", pdir / "reverting.json")
    point("revert-after-journal")
    try:
        _write_source(target, state.content(exclude=kernel_id), m["file"], ": the patch stays applied")
    except BaseException:
        os.replace(pdir / "reverting.json", pdir / "manifest.json")
        raise
    point("revert-after-source")
    (pdir / "reverting.json").unlink()
    if not others:
        return f"reverted {m['file']} to the original"
    return f"reverted the patch of {kernel_id} in {m['file']} (keeping the patches of {', '.join(others)})"


def _revert_legacy(ws: Workspace, kernel_id: str, m: dict, target: Path, force: bool) -> str:
    backup = patch_dir(ws, kernel_id) / "backup" / m["file"]
    if not backup.is_file():
        raise MepgenError(f"the backup {backup} is missing: cannot revert")
    current = target.read_bytes()
    if sha256(current) == m["original_sha256"]:
        (patch_dir(ws, kernel_id) / "manifest.json").unlink()
        return f"{m['file']} is already the original: nothing to do"
    if sha256(current) != m["patched_sha256"]:
        if not force:
            raise MepgenError(f"{m['file']} changed after the patch was applied; --force reverts anyway and "
                              f"keeps the changed file beside the backup")
        stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
        shutil.copy2(target, backup.with_name(backup.name + f".changed-{stamp}"))
    _write_source(target, backup.read_bytes(), m["file"], ": the patch stays applied")
    (patch_dir(ws, kernel_id) / "manifest.json").unlink()
    return f"reverted {m['file']} to the original"


def applied_ids(ws: Workspace) -> list[str]:
    """Every kernel with an applied patch (or one a killed run left journaled: revert settles it), the most
    recently applied first."""
    root = ws.root / "patches"
    found = []
    for d in (root.iterdir() if root.is_dir() else []):
        if not d.is_dir():
            continue
        m = _read(d / "manifest.json") or _read(d / "reverting.json") or _read(d / "pending.json")
        if m is not None:
            found.append((m.get("seq", 0), d.name))
    return [kid for _, kid in sorted(found, reverse=True)]
