"""How one confined process runs (docs/sandbox.md): its level, the files it reads, its scratch folders and its
resource limits; `Confinement.command()` + `Confinement.preexec()` start it (process.run does both)."""
from __future__ import annotations

import os
import resource
import shutil
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from . import landlock_level, namespace_levels
from .confine_paths import NOBODY, _open_to_others, nobody_can_run


#: the largest file a build may write (nvcc's objects and binaries are megabytes)
BUILD_FILE_LIMIT = 2 << 30


#: tasks (processes and threads) a candidate may add to those that exist when it starts
EXTRA_TASKS = 512


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
                pass    # a limit this kernel does not know or lets no one lower: the others still hold


def _own_tree(folder: Path, uid: int) -> None:
    """Everything under `folder` owned by `uid` (its group the same), links themselves not followed."""
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            f = os.path.join(root, name)
            try:
                if os.lstat(f).st_uid != uid:
                    os.lchown(f, uid, uid)
            except OSError:
                pass        # gone meanwhile (another worker's cleanup): nothing left to own


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
    # landlock: written but never made or owned here (the sanitizer's /proc, whose targets name their threads)
    system_write: list[Path] = field(default_factory=list)
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
            return limits + namespace_levels.bwrap_prefix(self) + ["--", *args]
        if self.level == "landlock":
            return limits + landlock_level.prefix(self, list(args), self.scratch) + list(args)
        if self.level == "unshare":
            # a shell as the namespace's init (PID 1): the kernel drops signals that init sends itself without a
            # handler, so a candidate run as PID 1 that raises SIGSEGV or SIGABRT on itself would carry on; under
            # the shell it dies as anywhere else, and the shell exits with 128 + N (process.Completed.via_init)
            return limits + namespace_levels.unshare_prefix() + ["--", shutil.which("sh") or "/bin/sh", "-c", '"$@"; exit $?',
                                                "mepgen-init", *args]
        return limits + list(args)

    def close(self) -> None:
        for fd in self.pass_fds:
            try:
                os.close(fd)
            except OSError:
                pass    # already closed (by the child's start): nothing left to release
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
            if p in self.scratch and os.geteuid() == 0:
                # and what an earlier worker left in it, owned by the other user, is this one's too (a file a
                # nobody worker wrote could not be written again by one kept root: seen on an H200 host)
                _own_tree(Path(p), NOBODY if self.drops_root else 0)

    def preexec(self):
        return None if self.level == "off" or prlimit_executable() else self.limits.apply
