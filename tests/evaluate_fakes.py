"""Helpers for the evaluator's tests: an axpy MEP whose "harness" is tests/evaluate_fixtures/fake_harness.py.

FakeNative is the real NativeBackend (process isolation, time-outs, result parsing, output reading) with
one change: "compiling" a kernel file writes a script that runs the fake harness in the mode named by
the file's `// MODE: <mode>` line. So the whole pipeline runs with real processes and no GPU.
"""
from __future__ import annotations

import os
import re
import shutil
import sys
import threading
from pathlib import Path

from mepgen.evaluate import peaks as peaks_mod
from mepgen.evaluate.backend import Built
from mepgen.evaluate.native import NativeBackend
from mepgen.evaluate.results import CompileFailed, CompileInfo

FIXTURES = Path(__file__).resolve().parent / "evaluate_fixtures"
FAKE_HARNESS = FIXTURES / "fake_harness.py"


class FakeNative(NativeBackend):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # the fake harness is a Python script: inside the sandbox it needs the interpreter and its packages
        # (and the script and the mepgen it imports: a checkout under /tmp lies in a folder the sandbox hides)
        self.runtime_read = sorted({Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve(),
                                    Path(sys.executable).resolve().parent.parent, FIXTURES,
                                    FIXTURES.parent.parent / "mepgen"})
        if sandbox_level_of(self) == "landlock":      # Python lists a sys.path folder before importing from it
            self.runtime_read.append(FIXTURES.parent.parent)
        # and it is a shell script starting Python: under the landlock level both must be allowed to run
        self.runtime_programs = [Path(shutil.which("sh") or "/bin/sh").resolve(), Path(sys.executable).resolve()]

    def compile(self, kernel_file: Path, launch=None, flags=()):
        text = Path(kernel_file).read_text()
        if "#error" in text:
            return CompileFailed("kernel.cu(1): error: #error directive", "kernel.cu(1): error: #error directive")
        m = re.search(r"// MODE: (\w+)", text)
        mode = m.group(1) if m else "good"
        # like the real backend: the launch and the flags are part of the build key, and the binary is
        # written to a temporary name and renamed (two threads may build the same text with other launches,
        # and rewriting a script another thread is executing fails with ETXTBSY)
        extra = repr((launch, tuple(flags))) if (launch is not None or flags) else None
        key = self.build_key(kernel_file, None if extra is None else self.harness_text + extra)
        out = self.build_dir / key
        out.mkdir(parents=True, exist_ok=True)
        script = out / "mep"
        if not script.is_file():
            tmp = out / f"mep.{os.getpid()}.{threading.get_ident()}.tmp"
            tmp.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE_HARNESS}" --mode {mode} "$@"\n')
            tmp.chmod(0o755)
            os.replace(tmp, script)
        return Built(Path(kernel_file), script, key, CompileInfo(seconds=0.01, registers=16, spill_stores=0,
                                                                 spill_loads=0), "")


def sandbox_level_of(backend) -> str:
    from mepgen.evaluate import sandbox
    return backend.sandbox_level or sandbox.strongest()[0]


def make_mep(tmp: Path, check_inputs: bool = True, digests: bool = False) -> Path:
    """An axpy MEP folder: mep.yaml, kernel.cu (MODE good) and a harness.cu mentioning --check-inputs (and with
    `digests`, --skip-after: outputs whose digests are the references' not written back, output_digest.py)."""
    mep = tmp / "cg.axpy"
    mep.mkdir(parents=True)
    shutil.copy(FIXTURES / "axpy" / "mep.yaml", mep / "mep.yaml")
    shutil.copy(FIXTURES / "axpy" / "kernel.cu", mep / "kernel.cu")
    (mep / "harness.cu").write_text("// fake harness supporting --recheck-data, --perturb-seed"
                                    + (" and --check-inputs" if check_inputs else "")
                                    + (" and --skip, --skip-after\n" if digests else "\n"))
    return mep


def variant(mep: Path, mode: str, extra: str = "") -> Path:
    f = mep.parent / f"variant_{mode}.cu"
    f.write_text((mep / "kernel.cu").read_text() + f"\n// MODE: {mode}\n{extra}")
    return f


def install(monkeypatch, bandwidth_gbs: float = 1000.0) -> None:
    """Pretend one GPU exists, serve every backend with FakeNative, and give fixed peaks."""
    import mepgen.evaluate.evaluator as ev_mod

    monkeypatch.setattr(ev_mod, "list_gpus", lambda: ([0], ""))
    monkeypatch.setattr(ev_mod.peaks_mod, "gpu_identity", lambda d: "FAKE GPU|0|0")
    monkeypatch.setattr(ev_mod, "make_backend", lambda name, spec, mep_dir, build_dir, device, rt, ct:
                        FakeNative(spec, mep_dir, build_dir, device=device, run_timeout=rt, compile_timeout=ct))
    fake = peaks_mod.Peaks("FAKE GPU", bandwidth_gbs, 50000.0, 1 << 20, {})
    monkeypatch.setattr(ev_mod.peaks_mod, "get", lambda device, build_dir: fake)


def fake_worker_main(conn, device: int) -> None:
    """Stands in for pycuda_worker.main in the worker process (PycudaBackend.entry = FAKE_WORKER): speaks the
    same protocol (wire.py) and behaves as the module key says."""
    import os
    import signal
    import time

    import numpy as np

    from mepgen.evaluate import wire

    me = int.from_bytes(os.urandom(3), "little")   # who answers (the PID is 2 in every sandboxed worker)
    wire.send(conn, ["ok", {"device": "FAKE GPU"}])
    while True:
        try:
            msg = wire.recv(conn)
        except EOFError:
            return
        op = msg[0]
        if op == "exit":
            return
        if op == "setup":
            wire.send(conn, ["ok", {"device": "FAKE GPU", "l2_bytes": 1 << 20}])
        elif op == "load_set":
            for fd in wire.recv_fds(conn, len(msg[2]) + len(msg[3])):
                os.close(fd)
            wire.send(conn, ["ok", None])
        elif op in ("load", "unload"):
            wire.send(conn, ["ok", None])
        elif op == "run":
            key = msg[1]
            if key == "hang":
                time.sleep(3600)
            if key == "segv":
                os.kill(os.getpid(), signal.SIGSEGV)
            if key == "illegal":
                wire.send(conn, ["cuda_error", "cuCtxSynchronize failed: an illegal memory access was encountered"])
                os._exit(3)
            wire.send(conn, ["ok", {"outputs": {"y": np.full(4, me, np.float32)}, "inputs_changed": [],
                                    "device": "FAKE GPU"}])


FAKE_WORKER = "evaluate_fakes:fake_worker_main"


def unstartable_worker_main(conn, device: int) -> None:
    """A worker whose packages are out of its reach: it says so, as pycuda_worker.main does, and ends."""
    from mepgen.evaluate import wire
    wire.send(conn, ["error", "cannot start the pycuda worker: ModuleNotFoundError: No module named 'pycuda'"])


def rogue_worker_main(conn, device: int) -> None:
    """A worker that candidate code took over: it answers with a pickle that would run code in mepgen."""
    import os
    import pickle

    from mepgen.evaluate import wire

    class Payload:      # unpickled, it creates the file MEPGEN_TEST_PWNED names
        def __reduce__(self):
            return (open, (os.environ["MEPGEN_TEST_PWNED"], "w"))

    wire.send(conn, ["ok", {"device": "FAKE GPU"}])
    while True:
        try:
            msg = wire.recv(conn)
        except EOFError:
            return
        if msg[0] == "exit":
            return
        if msg[0] == "load_set":
            wire.recv_fds(conn, len(msg[2]) + len(msg[3]))
        conn.send_bytes(pickle.dumps(("ok", Payload())))


def axpy_workspace(tmp: Path) -> Path:
    """An application's workspace holding the axpy MEP (mep.yaml and kernel.cu of the fixtures): the MEP's folder."""
    mep = tmp / "app" / ".mepgen" / "meps" / "cg.axpy"
    mep.mkdir(parents=True)
    for f in ("mep.yaml", "kernel.cu"):
        shutil.copy(FIXTURES / "axpy" / f, mep / f)
    return mep


def axpy_desc() -> dict:
    """The pycuda worker's launch description of the axpy fixture (pycuda_entry.describe's form)."""
    import numpy as np
    return {"entry": "axpy", "constants": [], "shared": 0, "grid": [4096, 1, 1], "block": [256, 1, 1],
            "params": [{"name": "n", "role": "scalar", "size": 4, "align": 4,
                        "bytes": (1 << 20).to_bytes(4, "little").hex()},
                       {"name": "a", "role": "scalar", "size": 4, "align": 4, "bytes": np.float32(0.5).tobytes().hex()},
                       {"name": "x", "role": "in", "size": 8, "align": 8},
                       {"name": "y", "role": "inout", "size": 8, "align": 8}]}
