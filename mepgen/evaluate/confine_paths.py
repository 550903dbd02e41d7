"""What every sandbox level asks of a path (docs/sandbox.md): the workspace it lies in, whether other users may
use it, the folders a confined process never sees, and `nobody`, whom a candidate runs as when mepgen is root."""
from __future__ import annotations

import glob
import importlib.util
import os
import shutil
import stat
from functools import lru_cache
from pathlib import Path


#: who a candidate runs as under bubblewrap when mepgen runs as root: the kernel never limits root's tasks
#: (RLIMIT_NPROC), and root's own files stay unreadable to it
NOBODY = 65534


def package_folders(name: str) -> list[Path]:
    """The folders Python imports package `name` from here (none where it is not installed)."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return []
    return [Path(loc) for loc in (spec.submodule_search_locations or [])] if spec else []


def workspace_of(path: Path) -> Path | None:
    """The `.mepgen` folder that holds `path`, if any."""
    p = Path(path).resolve()
    for parent in [p, *p.parents]:
        if parent.name == ".mepgen":
            return parent
    return None


def _hidden(extra: tuple[Path, ...]) -> list[Path]:
    """Folders replaced by an empty tmpfs: home, the temporary folders, the workspaces in `extra`."""
    out = [Path.home(), Path("/tmp"), Path("/var/tmp")]
    out += [Path(os.environ[v]) for v in ("TMPDIR", "XDG_RUNTIME_DIR") if os.environ.get(v)]
    out += list(extra)
    seen, keep = set(), []
    for p in out:
        try:
            r = p.resolve()
        except OSError:
            continue
        if r != Path("/") and r.is_dir() and r not in seen:
            seen.add(r)
            keep.append(r)
    return keep


@lru_cache(maxsize=None)
def nobody_can_run() -> bool:
    """Whether a candidate can run as `nobody` here: setpriv is installed, the files mepgen writes are
    readable by others (umask), and the GPU's device nodes are open to every user (as the driver makes them
    by default; a site that limits them to a group keeps candidates as root, inside the namespaces)."""
    mask = os.umask(0)
    os.umask(mask)
    nodes = glob.glob("/dev/nvidia*")
    open_nodes = all(os.stat(n).st_mode & 0o006 == 0o006 for n in nodes if not os.path.isdir(n))
    return shutil.which("setpriv") is not None and not mask & 0o005 and open_nodes


def _open_to_others(p: Path) -> bool:
    """A file others may read, or a folder they may list and enter (a path that is not there: nothing to read)."""
    try:
        mode = os.stat(p).st_mode
    except OSError:
        return True
    need = 0o005 if stat.S_ISDIR(mode) else 0o004
    return mode & need == need


def open_to_others(p: Path, hidden: list[Path]) -> bool:
    """Whether another user can use `p` inside the sandbox: read it (a folder: list and enter it) and enter the
    folders above it; those in a hidden folder are the sandbox's own (mode 0755)."""
    try:
        p = Path(p).resolve()
        need = 0o005 if p.is_dir() else 0o004
        if p.stat().st_mode & need != need:
            return False
        for a in p.parents:
            if any(h == a or h in a.parents for h in hidden):
                continue
            if not a.stat().st_mode & 0o001:
                return False
    except OSError:
        return False
    return True
