"""Helpers of the fault-injection tests: run a mepgen command in a forked child (so a SIGKILL at a fault point,
or a drop to an unprivileged user, ends only the child), and small kernel variants of the heatcg example."""
from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

AXPY = '''namespace cg {
template <typename T>
__global__ void axpy(int n, T a, const T* x, T* y)
{
    const int stride = blockDim.x * gridDim.x;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        y[i] = y[i] + a * x[i];   // the variant
    }
}
}
'''

XPAY = '''namespace cg {
__global__ void xpay(int n, const float* x, float beta, float* p)
{
    const int stride = blockDim.x * gridDim.x;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        p[i] = beta * p[i] + x[i];   // the variant
    }
}
}
'''


def variants(folder: Path) -> dict[str, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    out = {}
    for name, text in (("axpy", AXPY), ("xpay", XPAY)):
        out[name] = folder / f"{name}.cu"
        out[name].write_text(text)
    return out


def cli(args: list[str], env: dict | None = None, uid: int | None = None, cwd: Path | None = None):
    """`mepgen ARGS` in a forked child: (exit status, or -signal when killed; its stdout+stderr)."""
    pid, out = spawn(args, env, uid, cwd)
    return wait(pid, out)


def wait(pid: int, out) -> tuple[int, str]:
    _, status = os.waitpid(pid, 0)
    rc = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
    out.seek(0)
    return rc, out.read().decode(errors="replace")


def spawn(args: list[str], env: dict | None = None, uid: int | None = None, cwd: Path | None = None):
    """`mepgen ARGS` started in a forked child: (its pid, the file collecting its output)."""
    from mepgen.cli import main

    out = tempfile.TemporaryFile()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:   # the child: never returns
        code = 99
        try:
            os.dup2(out.fileno(), 1)
            os.dup2(out.fileno(), 2)
            sys.stdout = open(1, "w", closefd=False)   # not pytest's capture
            sys.stderr = open(2, "w", closefd=False)
            os.environ.update(env or {})
            if cwd is not None:
                os.chdir(cwd)
            if uid is not None:
                os.setgroups([])
                os.setgid(uid)
                os.setuid(uid)
            try:
                main.main(args=list(args), prog_name="mepgen", standalone_mode=True)
                code = 0
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        except BaseException as e:  # noqa: BLE001 - report anything, exit
            print(f"child: {type(e).__name__}: {e}", file=sys.stderr)
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    return pid, out


def slow_facts(path, args, app):
    """Stands in for the parser in a worker process: says it started (a file named by its pid), then parses
    for a minute."""
    import time
    Path(os.environ["MEPGEN_TEST_PIDS"], str(os.getpid())).write_text(path)
    time.sleep(60)


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


KILLED = -signal.SIGKILL


@contextlib.contextmanager
def read_only(folder: Path):
    """`folder` read-only for this process: its mode for an ordinary user; for root (whom modes do not stop) a
    read-only bind mount of it, or the test is skipped where mounting is not allowed."""
    import pytest

    if os.getuid() != 0:
        mode = os.stat(folder).st_mode
        os.chmod(folder, 0o555)
        try:
            yield
        finally:
            os.chmod(folder, mode)
        return
    mount = shutil.which("mount")
    if not mount or subprocess.run([mount, "--bind", str(folder), str(folder)], capture_output=True).returncode:
        pytest.skip("running as root and cannot bind-mount read-only here")
    try:
        if subprocess.run([mount, "-o", "remount,bind,ro", str(folder)], capture_output=True).returncode:
            pytest.skip("running as root and cannot remount read-only here")
        yield
    finally:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True)


import pytest  # noqa: E402


@pytest.fixture(scope="session")
def heatcg_template(tmp_path_factory) -> Path:
    """examples/heatcg copied and extracted once; tests get copies of it (workspace included: the inventory's
    paths follow the copy, see inventory.relocate)."""
    from conftest import copy_example
    from mepgen.extract import ExtractOptions, extract

    app = copy_example("heatcg", tmp_path_factory.mktemp("faults"))
    extract(app, ExtractOptions(jobs=2))
    return app


@pytest.fixture
def app(heatcg_template, tmp_path) -> Path:
    """A fresh extracted copy of the bundled example."""
    return Path(shutil.copytree(heatcg_template, tmp_path / "heatcg", symlinks=True))
