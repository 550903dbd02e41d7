"""The `.mepgen/` workspace at an application's root: where every stage reads and writes its files.

All writes go through :func:`write_atomic`, so an interrupted stage never leaves a half-written file.
"""
from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path

from .errors import MepgenError

WORKSPACE_DIR = ".mepgen"
INVENTORY_FILE = "inventory.json"


def _umask() -> int:
    """The process's umask, read without changing it (os.umask sets it: a race with other threads)."""
    try:
        status = Path("/proc/self/status").read_text()
    except OSError:
        status = ""
    m = re.search(r"^Umask:\s*([0-7]+)", status, re.M)
    if m:
        return int(m.group(1), 8)
    # no /proc (not Linux): read it by setting it and putting it back
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_atomic(path: Path, data: str | bytes) -> None:
    """Write `data` to `path` through a temporary file in the same folder and an atomic rename. The file gets
    the mode a plain open() gives (0666 less the umask), not mkstemp's 0600: a confined candidate runs as
    another user (evaluate/sandbox.py) and must read the MEP's sources."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = "wb" if isinstance(data, bytes) else "w"
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, mode) as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def write_json(path: Path, obj) -> None:
    write_atomic(path, json.dumps(obj, indent=1, sort_keys=False) + "\n")


class Workspace:
    """The `.mepgen/` folder of one application."""

    def __init__(self, app_root: Path):
        self.app_root = Path(app_root).resolve()
        self.root = self.app_root / WORKSPACE_DIR

    @property
    def inventory_path(self) -> Path:
        return self.root / INVENTORY_FILE

    @property
    def cache_dir(self) -> Path:
        return self.root / "cache"

    def mep_dir(self, kernel: str) -> Path:
        return self.root / "meps" / kernel

    def ensure(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        gitignore = self.root / ".gitignore"
        if not gitignore.exists():
            write_atomic(gitignore, "# mepgen's workspace: generated files\ncache/\n")

    @classmethod
    def find(cls, start: Path | None = None) -> "Workspace":
        """The workspace of the application containing `start` (default: the current folder)."""
        here = Path(start or os.getcwd()).resolve()
        for d in (here, *here.parents):
            if (d / WORKSPACE_DIR / INVENTORY_FILE).is_file():
                return cls(d)
        raise MepgenError(
            f"no {WORKSPACE_DIR}/{INVENTORY_FILE} in {here} or above: run `mepgen extract APP/` first"
        )
