"""Run a child process with a hard time-out that really kills it.

A hung kernel keeps its process in the driver; `subprocess.run(timeout=)` kills only the direct child
and then waits on pipes a grandchild may still hold. Here the child starts in its own session, and on
time-out the whole process group gets SIGKILL. Its stdout and stderr go to unlinked temporary files, not
pipes: nothing can hold them open, and a child that prints without end meets its file-size limit
(confinement.Limits) instead of filling mepgen's memory; only the head and tail are read back.

Every compiler and candidate process is started here; `confine` (confinement.Confinement) wraps it in the
sandbox level the evaluator chose and sets its resource limits.
"""
from __future__ import annotations

import select
import os
import re
import shutil
import signal
import subprocess
import tempfile
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
    via_init: bool = False          # a sandbox's init ran it: a death by signal N comes back as exit 128 + N

    @property
    def signal_name(self) -> str | None:
        """SIGSEGV, SIGABRT... when the child died of a signal."""
        number = None
        if self.returncode is not None and self.returncode < 0:
            number = -self.returncode
        elif self.via_init and self.returncode is not None and 128 < self.returncode <= 128 + 64:
            number = self.returncode - 128
        if number is None:
            return None
        try:
            return signal.Signals(number).name
        except ValueError:
            return f"signal {number}"


def _clip(data: bytes) -> str:
    text = data.decode("utf-8", errors="replace")
    if len(text) > MAX_OUTPUT:
        half = MAX_OUTPUT // 2
        text = text[:half] + "\n... [output clipped] ...\n" + text[-half:]
    return text


def _read_back(fh) -> str:
    """The head and tail of a child's output file (it may be as large as its file-size limit)."""
    size = fh.seek(0, os.SEEK_END)
    fh.seek(0)
    if size <= MAX_OUTPUT:
        return _clip(fh.read())
    half = MAX_OUTPUT // 2
    head = fh.read(half)
    fh.seek(size - half)
    return _clip(head) + f"\n... [output clipped: {size} bytes] ...\n" + _clip(fh.read(half))


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the child's whole process group (it leads its own session)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        try:
            proc.kill()
        except ProcessLookupError:
            pass


_SECRET = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH_SOCK|AGENT_INFO|DBUS_SESSION", re.I)


def candidate_env(base: dict | None = None) -> dict:
    """The environment for compilers and candidates: mepgen's own, without anything that looks like a
    secret (API keys, tokens) or leads to one (the ssh and gpg agents', the session bus's sockets): a candidate
    is untrusted code and needs none of them."""
    return {k: v for k, v in (os.environ if base is None else base).items() if not _SECRET.search(k)}


def wait_exit(proc: subprocess.Popen, timeout: float) -> bool:
    """Wait for `proc` to exit, at most `timeout` seconds; True when it did. Woken by the exit itself (a pidfd,
    Linux >= 5.3): Popen.wait(timeout) polls with sleeps doubling up to 50 ms, which added up to that much to
    every candidate process."""
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        try:
            proc.wait(timeout=timeout)
            return True
        except subprocess.TimeoutExpired:
            return False
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        if not poller.poll(max(0.0, timeout) * 1000):
            return False
    finally:
        os.close(fd)
    proc.wait()
    return True


def run(args: list[str], timeout: float, cwd: Path | None = None, env: dict | None = None,
        confine=None) -> Completed:
    """Run `args`; never raises for the child's failure, only for a program that does not exist. The child
    never sees secrets from the environment (see candidate_env); `confine` (confinement.Confinement): the
    sandbox and resource limits it runs under (None: neither)."""
    start = time.monotonic()
    env = candidate_env(env)
    args = [str(a) for a in args]
    if confine is not None and confine.level != "off" and shutil.which(args[0]) is None:
        raise FileNotFoundError(args[0])          # as Popen would say without the sandbox (or prlimit) in front
    if confine is not None:
        env = confine.environment(env)
        confine.prepare()
    argv = confine.command(args) if confine is not None else args
    preexec = confine.preexec() if confine is not None else None
    with tempfile.TemporaryFile() as out_f, tempfile.TemporaryFile() as err_f:
        try:
            proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=out_f, stderr=err_f, stdin=subprocess.DEVNULL,
                                    start_new_session=True, preexec_fn=preexec,
                                    pass_fds=tuple(confine.pass_fds) if confine is not None else ())
        finally:
            if confine is not None:
                confine.close()
        timed_out = not wait_exit(proc, timeout)
        if timed_out:
            kill_group(proc)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        out, err = _read_back(out_f), _read_back(err_f)
    return Completed(args, None if timed_out else proc.returncode, out, err, time.monotonic() - start, timed_out,
                     via_init=confine is not None and confine.level in ("bwrap", "unshare"))
