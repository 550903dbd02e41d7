"""The Confinement of each kind of process mepgen starts on a candidate (docs/sandbox.md): a compiler run
(for_build), a candidate's run (for_run), the pycuda worker (for_worker); and reading back what one wrote."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import stat
from functools import lru_cache
from pathlib import Path

import numpy as np

from . import landlock_level
from .confine_paths import _hidden, open_to_others, package_folders, workspace_of
from .confinement import Confinement, Limits


def _include_dirs(cmd: list[str]) -> list[Path]:
    out, take = [], False
    for a in cmd:
        if take:
            out.append(Path(a))
            take = False
        elif a in ("-I", "-isystem", "--include-path"):
            take = True
        elif a.startswith("-I"):
            out.append(Path(a[2:]))
        elif a.startswith("-isystem"):
            out.append(Path(a[len("-isystem"):]))
        elif a.startswith("--include-path="):
            out.append(Path(a.split("=", 1)[1]))
    return out


@lru_cache(maxsize=None)
def toolkit_root(exe: str) -> Path | None:
    """The CUDA toolkit folder of compiler `exe`: nvcc's own TOP (it may be a wrapper script elsewhere),
    else bin/nvcc's parent's parent."""
    found = shutil.which(exe)
    if found is None:
        return None
    try:
        done = subprocess.run([found, "--dryrun", "-x", "cu", "-E", os.devnull], capture_output=True, text=True,
                              timeout=60, stdin=subprocess.DEVNULL)
        for line in done.stderr.splitlines() + done.stdout.splitlines():
            if line.startswith("#$ TOP="):
                return Path(line[len("#$ TOP="):].strip().strip('"')).resolve()
    except (OSError, subprocess.SubprocessError):
        pass            # nvcc cannot say its TOP: the toolkit is the folder above its bin/, as it is laid out
    return Path(found).resolve().parent.parent


def for_build(level: str, cmd: list[str], mep_dir: Path, out_dir: Path, sources: list[Path]) -> Confinement:
    """A compiler run on a candidate: it reads the sources, the MEP's own source files (never its data/,
    eval/ or mep.yaml), the -I folders outside any workspace and the toolkit; it writes only `out_dir`."""
    mep_dir = Path(mep_dir).resolve()
    read = [Path(s) for s in sources]
    read += [f for f in sorted(mep_dir.iterdir()) if f.is_file() and f.name != "mep.yaml"] if mep_dir.is_dir() else []
    for d in _include_dirs(cmd):
        d = (mep_dir / d).resolve() if not d.is_absolute() else d.resolve()
        if workspace_of(d) is None:
            read.append(d)
    root = toolkit_root(cmd[0])
    if root is not None:
        read.append(root)
    found = shutil.which(cmd[0])
    if found is not None:
        read.append(Path(found))          # the compiler as invoked (a wrapper script, say)
    hide = {w for w in (workspace_of(mep_dir), workspace_of(out_dir), *map(workspace_of, read)) if w is not None}
    programs = [Path(p) for p in landlock_level.TOOLCHAIN] + ([root] if root is not None else [])
    return Confinement(level, read=read, write=[Path(out_dir)], hide=sorted(hide), programs=programs)


def for_run(level: str, args: list, out_dir: Path, file_bytes: int, gpu: bool = True, read=(),
            programs=()) -> Confinement:
    """A candidate's process: it reads the files its arguments name (binary, input sets) and `read`, writes
    only `out_dir`, sees the GPU and no workspace otherwise; under landlock it runs no program but its own
    binary and `programs`."""
    out_dir = Path(out_dir).resolve()
    read = [Path(r) for r in read]
    for a in args:
        p = Path(str(a))
        if p.is_absolute() and p.exists() and out_dir not in (p.resolve(), *p.resolve().parents):
            read.append(p)
    hide = {w for w in (workspace_of(out_dir), *map(workspace_of, read)) if w is not None}
    return Confinement(level, read=read, write=[out_dir], hide=sorted(hide), gpu=gpu,
                       limits=Limits(file_bytes=file_bytes), programs=[Path(p) for p in programs])


#: the largest file the pycuda worker may write (it writes none; its stderr goes to a file)
WORKER_FILE_LIMIT = 64 << 20


#: the packages the pycuda worker imports, bound alone when the folder holding them cannot be
WORKER_PACKAGES = ("mepgen", "numpy", "pycuda")


def library_paths(hidden: list[Path]) -> list[Path]:
    """LD_LIBRARY_PATH's folders that the sandbox would hide (a driver or a CUDA library unpacked under /tmp or
    home), except those holding or inside a workspace."""
    out = []
    for e in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep):
        if not e:
            continue
        try:
            p = Path(e).resolve()
        except OSError:
            continue
        holds_hidden = any(h == p or p in h.parents for h in hidden)
        if p.is_dir() and p not in out and workspace_of(p) is None and not holds_hidden and any(h in p.parents
                                                                                                for h in hidden):
            out.append(p)
    return out


def python_paths(hidden: list[Path], packages=WORKER_PACKAGES) -> list[Path]:
    """What a Python child of this interpreter reads: its installation and every folder on sys.path (site
    folders, PYTHONPATH entries: a wheel unpacked under /tmp, say). A folder that holds a hidden one (the
    current folder above an application's `.mepgen`, the home folder) or lies in a workspace is not bound as
    a whole: only the `packages` found in it are."""
    roots = [Path(sys.prefix), Path(sys.base_prefix), Path(sys.exec_prefix),
             Path(sys.executable).resolve().parent.parent]
    entries = [Path(e) if e else Path.cwd() for e in sys.path]
    out: list[Path] = []
    for p in [*roots, *entries]:
        try:
            p = p.resolve()
        except OSError:
            continue
        if not p.exists() or p in out or p == Path("/"):
            continue
        if workspace_of(p) is not None:
            continue
        if any(h == p or p in h.parents for h in hidden):
            for name in packages:
                for loc in package_folders(name):
                    loc = loc.resolve()
                    if p in loc.parents and workspace_of(loc) is None and loc not in out:
                        out.append(loc)
            continue
        out.append(p)
    return out


def for_worker(level: str, hide=(), gpu: bool = True) -> Confinement:
    """The pycuda worker: it reads the Python installation and packages it imports (python_paths) and the
    libraries LD_LIBRARY_PATH names in hidden folders (library_paths), nothing of any workspace (its input
    files come as open descriptors, its cubins as bytes), writes only its own empty /tmp, sees the GPU."""
    hide = sorted({w for w in map(workspace_of, hide) if w is not None} | {Path(h).resolve() for h in hide
                                                                           if workspace_of(h) is None})
    hidden = _hidden(tuple(hide))
    read = python_paths(hidden) + library_paths(hidden)
    # as root the worker runs as `nobody`, unless a folder it imports from is closed to other users (a wheel
    # unpacked into a folder of mode 0700): then as root inside its namespaces, without capabilities
    keep_root = os.geteuid() == 0 and not all(open_to_others(p, hidden if level != "landlock" else [])
                                              for p in read)
    c = Confinement(level, read=read, hide=hide, gpu=gpu, limits=Limits(file_bytes=WORKER_FILE_LIMIT),
                    keep_root=keep_root)
    if level == "landlock":
        c.python_site = landlock_level.worker_site(WORKER_PACKAGES)
    return c


def read_output(f: Path, owned: int = 3):
    """An array a candidate's process wrote (the harness protocol's .npy), or None when there is none. The
    candidate owns its scratch folder, so the file and the `owned` folders above it must be what they seem:
    a symbolic link there (to a reference output, say) or anything but a regular file is no output."""
    f = Path(f)
    for p in [f, *list(f.parents)[:owned - 1]]:
        if p.is_symlink():
            return None
    try:   # O_NONBLOCK: a FIFO left as an output must not hang mepgen (a regular file ignores it)
        fd = os.open(f, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return None
    with os.fdopen(fd, "rb") as fh:
        try:
            return np.load(fh, allow_pickle=False)
        except (ValueError, OSError, EOFError):
            return None
