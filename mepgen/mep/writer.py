"""Writing an MEP folder all at once: built next to its place, then swapped in with renames.

A stage that dies half-way never leaves a half-written MEP. mep.yaml is the one file a person edits, so
mepgen keeps the hash of the mep.yaml it wrote (`.mepgen-yaml.sha256`) and refuses to overwrite an edited
one unless forced (and then keeps a backup). Files a person added to the folder (their own input data,
captures, backups) are carried over; what mepgen renders is replaced.
"""
from __future__ import annotations

import hashlib
import shutil
import tempfile
import time
from pathlib import Path

from ..errors import MepgenError
from ..faults import point

HASH_FILE = ".mepgen-yaml.sha256"
REGENERATED = ("data/in", "data/out", "mep", HASH_FILE)


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
    if not yaml_edited(mep_dir):
        return None
    if not force:
        raise MepgenError(f"{mep_dir / 'mep.yaml'} was edited by hand: `--refresh` keeps it and renders the rest "
                          f"again, `--force` regenerates it (keeping a backup)")
    backup = mep_dir / f"mep.yaml.bak-{time.strftime('%Y%m%d-%H%M%S')}"
    shutil.copy2(mep_dir / "mep.yaml", backup)
    return str(backup)


def restore_interrupted(mep_dir: Path) -> str | None:
    """Finish what a killed swap left (see `_swap`): the old folder goes back in place when the new one never
    arrived (a person's mep.yaml and files are in it), and is removed when the new one (which carries them
    over) is in place; half-built `.ID.tmp-*` folders are removed. Returns what was restored, if anything."""
    mep_dir = Path(mep_dir)
    parent = mep_dir.parent
    if not parent.is_dir():
        return None
    restored = None
    olds = sorted(parent.glob(f".{glob_escape(mep_dir.name)}.old-*"), key=lambda p: p.stat().st_mtime)
    for old in olds:
        if not mep_dir.exists() and (old / "mep.yaml").exists():
            old.rename(mep_dir)
            restored = str(mep_dir)
        else:
            shutil.rmtree(old, ignore_errors=True)
    for tmp in parent.glob(f".{glob_escape(mep_dir.name)}.tmp-*"):
        if time.time() - tmp.stat().st_mtime > 1:   # not one being built this very moment
            shutil.rmtree(tmp, ignore_errors=True)
    return restored


def glob_escape(name: str) -> str:
    return "".join(f"[{c}]" if c in "*?[" else c for c in name)


def mep_of_path(ws, path: Path) -> str:
    """The kernel id of a path to one of this workspace's MEP folders; another application's is refused."""
    real = path.resolve()
    if real.parent == (ws.root / "meps").resolve():
        return real.name
    raise MepgenError(f"{path} is not an MEP folder of {ws.app_root} (.mepgen/meps/ID): give the kernel's id, and "
                      f"-C APP to run the MEPs of another application in its own workspace")


def write_folder(mep_dir: Path, files: dict[str, str | bytes], fill=None, yaml_hash: str | None = None) -> None:
    """Replace `mep_dir` with `files` (relative path -> content), then `fill(tmp_dir)` (input data), carrying
    over whatever else a person put in the old folder."""
    mep_dir = Path(mep_dir)
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
