"""What the GPU probe of the landlock level found (sandbox.gpu_policy), remembered per boot.

Each probe starts a confined Python that makes a CUDA context (0.3 s or more on an H200 host), and gpu_policy tries
up to four of them strongest first, plus one unconfined: a second or more at the start of every `mepgen optimize`,
a few percent of a short search. The answer depends only on the machine as booted, so it is kept in
`$XDG_CACHE_HOME/mepgen/gpu-policy.json` (default `~/.cache`) under a key of what decides it: the boot (its id:
a reboot, a new driver loaded, asks again), the kernel, the driver's version, the user, the Landlock ABI, and the
sources of the confinement (launcher, filter, rules): a change to any of them asks again. Candidates never write
there (under landlock and bwrap they write their scratch folder only). `MEPGEN_PROBE_MEMO=0` turns it off (the
tests do: they stand in for the driver).
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from .. import usercache
from ..workspace import write_atomic

SOCKET_RULES = ("none", "unix-local", "unix", "any")
_SOURCES = ("confine_exec.c", "seccomp_filter.py", "landlock_level.py", "sandbox.py", "gpu_probe.py")


#: `mepgen doctor` sets it: it probes again (and remembers what it found)
ask_again = False


def enabled() -> bool:
    return os.environ.get("MEPGEN_PROBE_MEMO", "1") != "0"


def path() -> Path:
    return usercache.folder("gpu-policy.json")


def _read(p: str) -> str:
    try:
        return Path(p).read_text(errors="replace")
    except OSError:
        return ""


def key(abi: int) -> str:
    h = hashlib.sha256()
    here = Path(__file__).resolve().parent
    for part in (_read("/proc/sys/kernel/random/boot_id"), os.uname().release, _read("/proc/driver/nvidia/version"),
                 str(os.geteuid()), str(abi), *(_read(str(here / name)) for name in _SOURCES)):
        h.update(hashlib.sha256(part.encode()).digest())
    return h.hexdigest()


def load(abi: int) -> tuple[bool, tuple[int, str] | None]:
    """(found, policy): the policy remembered for this boot, or found False."""
    if not enabled() or ask_again:
        return False, None
    try:
        data = json.loads(path().read_text())
    except (OSError, ValueError):
        return False, None
    if not isinstance(data, dict) or data.get("key") != key(abi) or "policy" not in data:
        return False, None
    policy = data["policy"]
    if policy is None:
        return True, None
    if (isinstance(policy, list) and len(policy) == 2 and isinstance(policy[0], int) and policy[0] >= 0
            and policy[1] in SOCKET_RULES):
        return True, (policy[0], policy[1])
    return False, None


def save(abi: int, policy: tuple[int, str] | None) -> None:
    if not enabled():
        return
    try:
        write_atomic(path(), json.dumps({"key": key(abi), "policy": None if policy is None else list(policy)}) + "\n")
    except OSError:
        pass        # a read-only home: the next run probes again, nothing else changes
