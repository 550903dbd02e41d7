"""The `.mepgen/` workspace at an application's root: where every stage reads and writes its files.

All writes go through :func:`write_atomic`, so an interrupted stage never leaves a half-written file.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import sys
import tempfile
import threading
import time
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


def write_into(path: Path, data: bytes) -> None:
    """Replace the content of an application's file, atomically, as a person's editor would keep it: through
    a symlink into its target (the link stays a link), with the file's mode and, where allowed, its owner.
    Raises OSError with nothing changed when it cannot (the folder is read-only, the disk is full)."""
    real = Path(os.path.realpath(path))
    st = real.stat()
    fd, tmp = tempfile.mkstemp(prefix=f".{real.name}.", suffix=".mepgen-tmp", dir=real.parent)
    try:
        os.fchmod(fd, st.st_mode & 0o7777)
        try:
            os.fchown(fd, st.st_uid, st.st_gid)
        except OSError:
            pass    # not ours to give away (not root): the new file keeps this user, with the old mode
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, real)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_json(path: Path, obj) -> None:
    write_atomic(path, json.dumps(obj, indent=1, sort_keys=False) + "\n")


_HELD: set[tuple[str, int, int]] = set()   # (lock file, process, thread) that hold the lock


def read_jsonl(path: Path) -> list[dict]:
    """The JSON lines of `path` (a trajectory, a journal); none where the file is missing. A line that does not
    parse (cut short by a crash) is skipped: what it recorded is done again."""
    if not Path(path).is_file():
        return []
    out = []
    for line in Path(path).read_text(errors="replace").splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out


def _holder(path: Path) -> str:
    try:
        pid, _, command = path.read_text().strip().partition(" ")
    except OSError:
        return "unknown"
    return f"pid {pid}, mepgen {command}" if pid else "unknown"


def check_folder(path: Path) -> None:
    """`path` (a workspace folder) and every folder above it must be folders where they exist."""
    for p in (path, *path.parents):
        if p.exists() and not p.is_dir():
            raise MepgenError(f"{p} is a file where mepgen keeps a folder: move it away (or delete it), then rerun")
        if p.is_dir():
            break


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
        """The MEP folder of a kernel id: always inside this workspace's meps/."""
        if not kernel or "/" in kernel or "\\" in kernel or kernel in (".", "..") or "\0" in kernel:
            raise MepgenError(f"'{kernel}' is not a kernel id (a path?): name the kernel (its id as in "
                              f"`mepgen list`), and give -C APP for the MEPs of another application")
        return self.root / "meps" / kernel

    def ensure(self) -> None:
        check_folder(self.root)
        self.root.mkdir(parents=True, exist_ok=True)
        gitignore = self.root / ".gitignore"
        if not gitignore.exists():
            write_atomic(gitignore, "# mepgen's workspace: generated files\ncache/\nlock\n")

    @contextlib.contextmanager
    def lock(self, command: str, timeout: float | None = None):
        """Hold the application's lock (flock on `.mepgen/lock`) while `command` writes the workspace or the
        sources: a second writer waits (saying for whom), never interleaves. `timeout` (default: the
        environment's MEPGEN_LOCK_TIMEOUT, else no limit) ends the wait with an error."""
        check_folder(self.root)
        self.root.mkdir(parents=True, exist_ok=True)
        path = self.root / "lock"
        key = (str(path), os.getpid(), threading.get_ident())   # a forked child holds nothing
        if key in _HELD:            # this thread holds it already (ready -> extract): no second flock
            yield
            return
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666 & ~_umask())
        try:
            if timeout is None and os.environ.get("MEPGEN_LOCK_TIMEOUT"):
                timeout = float(os.environ["MEPGEN_LOCK_TIMEOUT"])
            deadline, told = None if timeout is None else time.monotonic() + timeout, False
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    holder = _holder(path)
                    if deadline is not None and time.monotonic() >= deadline:
                        raise MepgenError(f"{self.app_root}: another mepgen command ({holder}) is writing this "
                                          f"application; wait for it to end, then rerun") from None
                    if not told:
                        print(f"mepgen: waiting for another mepgen command ({holder}) writing {self.app_root}",
                              file=sys.stderr)
                        told = True
                    time.sleep(0.05)
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
                os.pwrite(fd, f"{os.getpid()} {command}\n".encode(), 0)
            _HELD.add(key)
            try:
                yield
            finally:
                _HELD.discard(key)
        finally:
            os.close(fd)   # releases the lock

    @classmethod
    def find(cls, start: Path | None = None) -> "Workspace":
        """The workspace of the application containing `start` (default: the current folder)."""
        here = Path(start or os.getcwd()).resolve()
        for d in (here, *here.parents):
            if (d / WORKSPACE_DIR / INVENTORY_FILE).exists():   # a folder there is reported by inventory.load
                return cls(d)
        raise MepgenError(
            f"no {WORKSPACE_DIR}/{INVENTORY_FILE} in {here} or above: run `mepgen extract APP/` first"
        )

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
