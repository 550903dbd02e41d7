"""Writing an MEP folder all at once: built next to its place, then swapped in with renames.

A stage that dies half-way never leaves a half-written MEP. mep.yaml is the one file a person edits, so
mepgen keeps the hash of the mep.yaml it wrote (`.mepgen-yaml.sha256`) and refuses to overwrite an edited
one unless forced (and then keeps a backup). Files a person added to the folder (their own input data,
captures, backups) are carried over; what mepgen renders is replaced. A folder whose rendered files would not
change is not touched at all (a built `mep` binary and `data/out` stay).

`.mepgen-origin.json` says who wrote mep.yaml: `{"by": "capture"}` (`mepgen capture --use`, from a recorded
launch) or `{"by": "mep", "sizes": {...}}` (static completion, with the sizes a person gave by `--size`), so
later runs (`mepgen ready`, `mepgen mep --keep-edits`) keep what a capture or a person settled.
"""
from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
import time
from pathlib import Path

from ..errors import MepgenError
from ..workspace import glob_escape, mep_of_path, restore_interrupted  # noqa: F401  (kept importable here)
from ..faults import point

HASH_FILE = ".mepgen-yaml.sha256"
ORIGIN_FILE = ".mepgen-origin.json"
REGENERATED = ("data/in", "data/out", "mep", HASH_FILE, ORIGIN_FILE)
CAPTURE_MARK = "written by `mepgen capture`"      # in the header of a captured mep.yaml


def origin_text(by: str, sizes: dict[str, int] | None = None) -> str:
    """The origin file's content: `by` is "capture" or "mep"; `sizes`: those a person gave (`--size`)."""
    return json.dumps({"by": by, "sizes": dict(sizes or {})}, sort_keys=True) + "\n"


def origin(mep_dir: Path) -> dict:
    """Who wrote the MEP's mep.yaml: {"by": "capture" | "mep" | "unknown", "sizes": {...}}. A captured MEP
    written before the origin file existed is known by its record and the header capture writes."""
    mep_dir = Path(mep_dir)
    try:
        data = json.loads((mep_dir / ORIGIN_FILE).read_text())
        if isinstance(data, dict) and data.get("by") in ("capture", "mep"):
            sizes = data.get("sizes") if isinstance(data.get("sizes"), dict) else {}
            return {"by": data["by"], "sizes": {str(k): int(v) for k, v in sizes.items() if isinstance(v, int)}}
    except (OSError, ValueError):
        pass        # no readable origin record: what the folder holds decides below
    try:
        head = (mep_dir / "mep.yaml").read_text(errors="replace")[:2000]
    except OSError:
        head = ""
    if CAPTURE_MARK in head and (mep_dir / "data" / "captured" / "manifest.json").is_file():
        return {"by": "capture", "sizes": {}}
    return {"by": "unknown", "sizes": {}}


def captured(mep_dir: Path) -> bool:
    """Whether mep.yaml was written by `mepgen capture` from a recorded launch."""
    return origin(mep_dir)["by"] == "capture"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def yaml_edited(mep_dir: Path) -> bool:
    """Whether mep.yaml differs from what mepgen last wrote there."""
    yaml_path, hash_path = mep_dir / "mep.yaml", mep_dir / HASH_FILE
    if not yaml_path.exists():
        return False
    if not hash_path.exists():
        return True
    return sha256(yaml_path.read_bytes()) != hash_path.read_text().strip()


def guard_overwrite(mep_dir: Path, force: bool) -> str | None:
    """Refuse to replace a hand-edited mep.yaml unless forced; when forced, back it up and say where."""
    by_capture = (mep_dir / "mep.yaml").exists() and captured(mep_dir)
    if not yaml_edited(mep_dir) and not by_capture:
        return None
    if not force:
        if by_capture:
            raise MepgenError(f"{mep_dir / 'mep.yaml'} was written by `mepgen capture` from a recorded launch: "
                              "`--keep-edits` keeps it, `--force` replaces it with static completion (keeping a "
                              "backup)")
        raise MepgenError(f"{mep_dir / 'mep.yaml'} was edited by hand: `--refresh` keeps it and renders the rest "
                          f"again, `--force` regenerates it (keeping a backup)")
    backup = mep_dir / f"mep.yaml.bak-{time.strftime('%Y%m%d-%H%M%S')}"
    shutil.copy2(mep_dir / "mep.yaml", backup)
    return str(backup)








def write_folder(mep_dir: Path, files: dict[str, str | bytes], fill=None, yaml_hash: str | None = None) -> None:
    """Replace `mep_dir` with `files` (relative path -> content), then `fill(tmp_dir)` (input data), carrying
    over whatever else a person put in the old folder. Nothing is written when every file would stay as it is
    (and the inputs are there): the built binary and the last outputs are kept."""
    mep_dir = Path(mep_dir)
    if _unchanged(mep_dir, files, fill, yaml_hash):
        return
    mep_dir.parent.mkdir(parents=True, exist_ok=True)
    restore_interrupted(mep_dir)
    tmp = Path(tempfile.mkdtemp(prefix=f".{mep_dir.name}.tmp-", dir=mep_dir.parent))
    tmp.chmod(0o755)   # mkdtemp makes it private; an MEP folder is an ordinary folder
    try:
        if mep_dir.exists():
            _carry_over(mep_dir, tmp, set(files))
        for rel, content in files.items():
            path = tmp / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content if isinstance(content, bytes) else content.encode())
        if yaml_hash is not None:
            (tmp / HASH_FILE).write_text(yaml_hash + "\n")
        if fill is not None:
            fill(tmp)
        _swap(tmp, mep_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _unchanged(mep_dir: Path, files: dict[str, str | bytes], fill, yaml_hash: str | None) -> bool:
    if not mep_dir.is_dir():
        return False
    for rel, content in files.items():
        data = content if isinstance(content, bytes) else content.encode()
        try:
            if (mep_dir / rel).read_bytes() != data:
                return False
        except OSError:
            return False
    if yaml_hash is not None:
        try:
            if (mep_dir / HASH_FILE).read_text().strip() != yaml_hash:
                return False
        except OSError:
            return False
    return fill is None or (mep_dir / "data" / "in").is_dir()


def _carry_over(old: Path, new: Path, rendered: set[str]) -> None:
    for path in old.rglob("*"):
        rel = path.relative_to(old).as_posix()
        if rel in rendered or any(rel == r or rel.startswith(r + "/") for r in REGENERATED) or path.is_dir():
            continue
        target = new / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)


def _swap(tmp: Path, target: Path) -> None:
    if not target.exists():
        tmp.rename(target)
        return
    old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old-", dir=target.parent))
    old.rmdir()
    target.rename(old)
    point("mep-swap-between-renames")
    try:
        tmp.rename(target)
    except BaseException:
        old.rename(target)
        raise
    shutil.rmtree(old, ignore_errors=True)
