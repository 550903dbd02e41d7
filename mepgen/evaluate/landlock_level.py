"""The `landlock` sandbox level: confinement without namespaces (docs/sandbox.md).

Where bubblewrap is missing or unprivileged user namespaces are off (many clusters; GPU drivers that refuse a
CUDA context inside a user namespace), a candidate's process still runs confined: `confine_exec.py` (a bare
interpreter, in the child, before the exec) sets no_new_privs, a Landlock ruleset (Linux >= 5.13, no privilege
needed) and the strict seccomp filter, then execs the command. What the process keeps:

- reading: the files and folders its Confinement names (binary, input sets, toolkit; the worker's Python), the
  system's libraries and data (`/usr/lib*`, `/lib*`, `/usr/share`, `/etc`), `/sys`, a few `/proc` files
  and its own `/proc/self` (its threads' files under `/proc/self/task` also writable: the CUDA driver names its
  threads); never the home folder, `/tmp`, a workspace or `/usr/bin` (the programs);
- writing: its scratch folder(s) alone (also its HOME and TMPDIR), the GPU's device nodes (ioctl) and `/dev/shm`;
- executing: the command's own file and its ELF interpreter; a compiler also the toolchain's (Confinement
  `programs`: `/usr`, `/bin`, the toolkit);
- as root: `nobody` where every path it uses is open to others, else root without any capability;
- sockets: none (seccomp refuses `socket` for every family, AF_UNIX included: Landlock does not confine
  connecting to a named unix socket such as the session bus; `socketpair` stays), no TCP (Landlock ABI >= 4, a
  second net), no abstract unix socket or signal outside its own processes (ABI >= 6); a GPU process whose driver needs
  more (a unix socket, an older ABI's rules) gets the strongest rules it accepts (sandbox.gpu_policy).
"""
from __future__ import annotations

import atexit
import ctypes
import hashlib
import tempfile
import threading
import glob
import os
import shutil
import socket
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

from .. import usercache
from . import seccomp_filter
from .confine_paths import NOBODY, open_to_others, package_folders, workspace_of

LAUNCHER = Path(__file__).with_name("confine_exec.py")       # confine_exec.c beside it: the same, in C
#: the system's libraries and read-only data every process may read (not the programs: /usr/bin, /bin)
SYSTEM_READ = ("/usr/lib", "/usr/lib32", "/usr/lib64", "/usr/libx32", "/usr/libexec", "/lib", "/lib32", "/lib64",
               "/libx32", "/usr/share", "/usr/local/lib", "/etc", "/sys", "/proc/cpuinfo", "/proc/meminfo",
               "/proc/stat", "/proc/modules", "/proc/devices", "/proc/filesystems", "/proc/driver", "/proc/sys",
               "/proc/loadavg", "/proc/version")
#: /etc for a process that stays root (without capabilities: a file it must read is closed to others): it owns
#: /etc/shadow, the SSH host keys and the TLS private keys, so it gets these entries only, not the folder (what
#: the loader, nvcc, gcc, Python and the CUDA driver read there; traced with strace)
ETC_FOR_ROOT = ("/etc/ld.so.cache", "/etc/ld.so.preload", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime",
                "/etc/timezone", "/etc/malloc.conf", "/etc/nsswitch.conf", "/etc/passwd", "/etc/group",
                "/etc/hosts", "/etc/host.conf", "/etc/gai.conf", "/etc/os-release", "/etc/lsb-release",
                "/etc/debian_version", "/etc/redhat-release", "/etc/machine-id", "/etc/locale.alias",
                "/etc/alternatives", "/etc/nvidia", "/etc/OpenCL", "/etc/vulkan", "/etc/glvnd")
#: what a compiler may run besides its own file: the toolchain (gcc, as, ld, the shell nvcc uses)
TOOLCHAIN = ("/usr", "/bin", "/sbin")
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")


@lru_cache(maxsize=None)
def abi() -> int:
    """Landlock's ABI version here (0: none). Asked in a child: the launcher holds the syscall code."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    v = libc.syscall(444, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    return int(v) if v > 0 else 0


def _resolve(program: str) -> str:
    found = shutil.which(program)
    return str(Path(found).resolve()) if found else program


@lru_cache(maxsize=None)
def library_folders() -> list[str]:
    """LD_LIBRARY_PATH's folders, and wherever the dynamic loader finds the GPU driver's libraries (a container
    mounts them outside /usr/lib, e.g. /usr/local/nvidia/lib64: without them cuInit fails under Landlock)."""
    out = []
    for e in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep):
        if e and os.path.isdir(e):
            out.append(str(Path(e).resolve()))
    try:
        listed = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        listed = ""
    for line in listed.splitlines():
        name, _, path = line.partition("=>")
        if ("libcuda.so" in name or "libnvidia" in name) and path.strip():
            for f in {Path(path.strip()).parent, Path(path.strip()).resolve().parent}:
                if str(f) not in out:
                    out.append(str(f))
    return out


def policy(c, args: list[str], scratch: list[Path]) -> list[str]:
    """The launcher's arguments for the process of Confinement `c` running `args` (confine_exec.c's usage)."""
    system = SYSTEM_READ
    if os.geteuid() == 0 and not c.drops_root:
        system = tuple(p for p in SYSTEM_READ if p != "/etc") + tuple(p for p in ETC_FOR_ROOT if os.path.exists(p))
    read = [p for p in (*system, *library_folders()) if workspace_of(Path(p)) is None]
    read += [str(Path(p).resolve()) for p in c.read]
    write = [str(Path(p).resolve()) for p in [*c.write, *scratch, *getattr(c, "system_write", [])]]
    dev = list(DEVICES)
    if c.gpu:
        dev += sorted(glob.glob("/dev/nvidia*"))
        write.append("/dev/shm")
    exe = [_resolve(args[0])] + [str(Path(p).resolve()) for p in c.programs]
    out = ["-p", exe[0]]
    if c.drops_root:
        out += ["-u", str(NOBODY)]
    elif c.keep_caps:
        out += ["-k", "1"]
    cap = getattr(c, "abi_cap", None)
    if cap is None and c.gpu:
        cap = _gpu_cap
    if cap and cap > 0:
        out += ["-A", str(cap)]
    for flag, paths in (("-r", read), ("-w", write), ("-x", exe), ("-d", dev)):
        for p in paths:
            out += [flag, p]
    return out


def nobody_can_use(paths, gpu: bool) -> bool:
    """Whether `nobody` can use every path (read it, enter the folders above it) and, for a GPU process, the
    device nodes: then a process started as root runs as `nobody` (root keeps no capability in any case)."""
    if gpu and not all(os.stat(n).st_mode & 0o006 == 0o006 for n in glob.glob("/dev/nvidia*")
                       if not os.path.isdir(n)):
        return False
    return all(open_to_others(Path(p), []) for p in paths if Path(p).exists())


def prefix(c, args: list[str], scratch: list[Path]) -> list[str]:
    """The command prefix: the launcher (confine_exec.c built here, else confine_exec.py in a bare interpreter)
    with the policy; the seccomp program goes in a descriptor that `c.pass_fds` carries to the child."""
    flags = policy(c, args, scratch)
    sockets = getattr(c, "gpu_sockets", None) or (_gpu_sockets if c.gpu else "none")
    fd = seccomp_filter.open_fd(strict=sockets != "any", families=SOCKET_FAMILIES[sockets],
                                local=sockets == "unix-local") if c.seccomp else None
    if fd is not None:
        c.pass_fds.append(fd)
        flags += ["-s", str(fd)]
    native = launcher_binary()
    head = [str(native)] if native is not None else [sys.executable, "-I", "-S", "-B", str(LAUNCHER)]
    return head + flags + ["--"]


def _ours(p: Path) -> bool:
    """Owned by this user and writable by no one else (a launcher someone else could replace is never run)."""
    try:
        st = os.lstat(p)
    except OSError:
        return False
    return st.st_uid == os.getuid() and not st.st_mode & 0o022 and not os.path.islink(p)


@lru_cache(maxsize=None)
def launcher_binary() -> Path | None:
    """confine_exec.c built once per machine with the host compiler (the one nvcc uses: it is there wherever
    mepgen builds), kept in the user's cache folder under the source's hash; None without a compiler."""
    source = LAUNCHER.with_suffix(".c")
    if not source.is_file():
        return None
    digest = hashlib.sha256(source.read_bytes()).hexdigest()[:16]
    cache = usercache.folder()
    for folder in (cache, Path(tempfile.gettempdir()) / f"mepgen-{os.getuid()}"):
        target = folder / f"confine-exec-{digest}"
        if folder.is_dir() and not _ours(folder):
            continue                # made by someone else (a shared /tmp): never run what it holds
        if target.is_file() and os.access(target, os.X_OK):
            if _ours(target):
                return target
            continue
        compiler = next((shutil.which(c) for c in ("cc", "gcc", "clang") if shutil.which(c)), None)
        if compiler is None:
            return None
        try:
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            tmp = folder / f".confine-exec-{os.getpid()}.tmp"
            done = subprocess.run([compiler, "-O2", "-o", str(tmp), str(source)], capture_output=True,
                                  timeout=120, stdin=subprocess.DEVNULL)
            if done.returncode != 0:
                tmp.unlink(missing_ok=True)
                return None
            os.replace(tmp, target)
            if not _ours(folder):
                continue
            return target
        except (OSError, subprocess.SubprocessError):
            continue
    return None


#: what each Landlock ABI adds to the rules of the one before (what a process keeps when the ABI is capped below)
ABI_ADDS = {2: "refer (renames and links across folders)", 3: "truncate", 4: "no TCP bind or connect",
            5: "ioctl on device nodes", 6: "no abstract unix socket and no signal outside its own processes"}

#: the socket families a process under this level may create: "none" (the strict seccomp filter), "unix-local"
#: (AF_UNIX, but no connect and no send to an address: it reaches no named socket), "unix" (AF_UNIX only), "any"
#: (no socket rule; Landlock ABI >= 4 still refuses TCP bind and connect)
SOCKET_FAMILIES = {"none": (), "unix-local": (socket.AF_UNIX,), "unix": (socket.AF_UNIX,), "any": None}
SOCKET_RULES = {"unix-local": "unix sockets allowed, none reached by name (no connect, no send to an address)",
                "unix": "unix sockets allowed", "any": "sockets of every family allowed (no TCP still)"}

#: what a GPU process is confined with here: the newest Landlock ABI (0: the kernel's own) and its sockets.
#: sandbox.resolve sets them from its probe (sandbox.gpu_policy) when it chooses this level: some drivers refuse a
#: CUDA context under a newer ABI's rules or without a socket (CUDA_ERROR_OPERATING_SYSTEM)
_gpu_cap = 0
_gpu_sockets = "none"


def use_gpu_policy(cap: int, sockets: str = "none") -> None:
    global _gpu_cap, _gpu_sockets
    _gpu_cap, _gpu_sockets = max(int(cap), 0), sockets


def gpu_note(cap: int, sockets: str = "none") -> str:
    """One line on what GPU processes give up under ABI `cap` and socket rule `sockets` ('' when nothing)."""
    lost = [ABI_ADDS[v] for v in range(cap + 1, abi() + 1) if v in ABI_ADDS] if cap > 0 else []
    if sockets != "none":
        lost.append(SOCKET_RULES[sockets])
    if not lost:
        return ""
    return (f"GPU processes under Landlock ABI {cap or abi()} of {abi()}"
            f"{'' if sockets == 'none' else ', ' + sockets + ' sockets'}: the driver refuses a CUDA context under the "
            f"stricter rules (given up: {'; '.join(lost)})")


@lru_cache(maxsize=None)
def worker_scratch() -> str:
    """One private folder (mode 0700) for the HOME and TMPDIR of this mepgen's workers under landlock."""
    path = tempfile.mkdtemp(prefix="mepgen-scratch-")
    atexit.register(shutil.rmtree, path, True)
    return path


def worker_site(packages) -> Path:
    """A folder of links to the packages the worker imports, first on its PYTHONPATH. Python lists a sys.path
    folder before it imports from it, and a folder holding a workspace or the home folder is not readable under
    landlock: its packages are found through these links (whose targets confined.python_paths allows)."""
    site = Path(worker_scratch()) / "site"
    site.mkdir(exist_ok=True)
    for name in packages:
        for loc in package_folders(name)[:1]:
            link, target = site / name, loc.resolve()
            if link.is_symlink() and Path(os.readlink(link)) == target:
                continue
            # made, or made again where the package is found elsewhere now (sys.path changed in this process):
            # a link left to the old folder would name files the worker's rules no longer allow
            fresh = site / f".{name}.{os.getpid()}.{threading.get_ident()}"
            fresh.unlink(missing_ok=True)
            fresh.symlink_to(target, target_is_directory=True)
            os.replace(fresh, link)
    return site
