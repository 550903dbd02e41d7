"""Applying and reverting a patch with a backup; the state lives in `.mepgen/patches/ID/`.

    .mepgen/patches/ID.diff            the reviewable diff (git apply / patch -p1 from the app root)
    .mepgen/patches/ID/manifest.json   file, original and patched sha256, variant, when applied
    .mepgen/patches/ID/backup/FILE     the file as it was before --apply
"""
from __future__ import annotations

import datetime
import json
import shutil
from pathlib import Path

from ..errors import MepgenError
from ..workspace import Workspace, write_atomic, write_json
from .splice import Plan, sha256


def patch_dir(ws: Workspace, kernel_id: str) -> Path:
    return ws.root / "patches" / kernel_id


def diff_path(ws: Workspace, kernel_id: str) -> Path:
    return ws.root / "patches" / f"{kernel_id}.diff"


def manifest(ws: Workspace, kernel_id: str) -> dict | None:
    path = patch_dir(ws, kernel_id) / "manifest.json"
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, json.JSONDecodeError) as e:
        raise MepgenError(f"{path} is unreadable ({e}); the backup beside it is untouched") from None


def status(ws: Workspace, plan: Plan, current: bytes) -> str:
    """'applied' (the file is the patched one), 'pristine' (as extracted) or 'changed' (neither)."""
    cur = sha256(current)
    if cur == plan.patched_sha and not plan.unchanged:
        return "applied"
    if cur == plan.recorded_sha:
        return "pristine"
    return "changed"


def apply(ws: Workspace, plan: Plan, variant: Path) -> str:
    target = ws.app_root / plan.file
    current = target.read_bytes()
    st = status(ws, plan, current)
    if st == "applied":
        return "already applied: nothing to do"
    if st == "changed":
        raise MepgenError(f"{plan.file} changed since `mepgen extract` (sha256 {sha256(current)[:12]}, extracted "
                          f"{plan.recorded_sha[:12]}): rerun `mepgen extract` and check the MEP before patching")
    pdir = patch_dir(ws, plan.kernel_id)
    backup = pdir / "backup" / plan.file
    backup.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(backup, current)  # before touching the user's file
    write_json(pdir / "manifest.json", {
        "kernel": plan.kernel, "file": plan.file, "original_sha256": plan.recorded_sha,
        "patched_sha256": plan.patched_sha, "variant": str(variant), "new_helpers": plan.new_helpers,
        "applied": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    })
    write_atomic(target, plan.patched)
    return f"applied to {plan.file} (backup in {backup.relative_to(ws.app_root)})"


def revert(ws: Workspace, kernel_id: str, force: bool = False) -> str:
    m = manifest(ws, kernel_id)
    if m is None:
        raise MepgenError(f"no applied patch for {kernel_id} (.mepgen/patches/{kernel_id}/manifest.json)")
    target = ws.app_root / m["file"]
    backup = patch_dir(ws, kernel_id) / "backup" / m["file"]
    if not backup.is_file():
        raise MepgenError(f"the backup {backup} is missing: cannot revert")
    current = target.read_bytes()
    if sha256(current) == m["original_sha256"]:
        return f"{m['file']} is already the original: nothing to do"
    if sha256(current) != m["patched_sha256"]:
        if not force:
            raise MepgenError(f"{m['file']} changed after the patch was applied; --force reverts anyway and "
                              f"keeps the changed file beside the backup")
        stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
        shutil.copy2(target, backup.with_name(backup.name + f".changed-{stamp}"))
    write_atomic(target, backup.read_bytes())
    (patch_dir(ws, kernel_id) / "manifest.json").unlink()
    return f"reverted {m['file']} to the original"
