"""Run a child process with a hard time-out that really kills it.

A hung kernel keeps its process in the driver; `subprocess.run(timeout=)` kills only the direct child
and then waits on pipes a grandchild may still hold. Here the child starts in its own session, and on
time-out the whole process group gets SIGKILL before the pipes are drained.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

#: cap on the output kept from a child (a crashing candidate may print without end)
MAX_OUTPUT = 256 * 1024


@dataclass
class Completed:
    args: list[str]
    returncode: int | None          # None when killed on time-out
    stdout: str
    stderr: str
    seconds: float
    timed_out: bool = False

    @property
    def signal_name(self) -> str | None:
        """SIGSEGV, SIGABRT... when the child died of a signal."""
        if self.returncode is not None and self.returncode < 0:
            try:
                return signal.Signals(-self.returncode).name
            except ValueError:
                return f"signal {-self.returncode}"
        return None


def _clip(data: bytes) -> str:
    text = data.decode("utf-8", errors="replace")
    if len(text) > MAX_OUTPUT:
        half = MAX_OUTPUT // 2
        text = text[:half] + "\n... [output clipped] ...\n" + text[-half:]
    return text


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the child's whole process group (it leads its own session)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        try:
            proc.kill()
        except ProcessLookupError:
            pass


_SECRET = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL", re.I)


def candidate_env(base: dict | None = None) -> dict:
    """The environment for compilers and candidates: mepgen's own, without anything that looks like a
    secret (API keys, tokens): a candidate is untrusted code and needs none of them."""
    return {k: v for k, v in (os.environ if base is None else base).items() if not _SECRET.search(k)}


def run(args: list[str], timeout: float, cwd: Path | None = None, env: dict | None = None) -> Completed:
    """Run `args`; never raises for the child's failure, only for a program that does not exist. The child
    never sees secrets from the environment (see candidate_env)."""
    start = time.monotonic()
    env = candidate_env(env)
    proc = subprocess.Popen([str(a) for a in args], cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        kill_group(proc)
        try:
            out, err = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:  # a grandchild holds the pipes open: give up on its output
            out, err = b"", b""
        timed_out = True
    return Completed([str(a) for a in args], None if timed_out else proc.returncode, _clip(out or b""),
                     _clip(err or b""), time.monotonic() - start, timed_out)
