"""The pycuda backend: kernels compiled to cubins, launched by a worker process that keeps its CUDA
context and the input sets on the GPU across candidates (no process start, no context creation, no input
upload per candidate: that is where its throughput comes from).

The worker is killed and restarted on a hang (no reply within the time-out), a crash (the pipe closes)
or any CUDA error (sticky: the context is unusable). It runs candidate code on the GPU, so it runs in the
sandbox as the native harness does (sandbox.for_worker, docs/sandbox.md) and talks JSON and .npy (wire.py),
never pickle: mepgen unpickles nothing from it. Needs the `mepgen[gpu]` extra (pycuda).
"""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import numpy as np

from .. import datagen
from ..errors import MepgenError
from ..spec import Launch, Spec
from .backend import Backend, Built, InputSet, RunOutput, TimingOutput, TimingPlan
from .launchcfg import with_flags, with_launch
from .. import perturb
from . import l2_flush, process, sandbox, wire
from .pycuda_entry import build_cubin
from .results import CompileFailed, RuntimeFault

#: cubins kept loaded in the worker besides the baseline
MAX_MODULES = 6
_ILLEGAL = ("illegal memory access", "misaligned address", "illegal instruction", "invalid program counter",
            "illegal address", "hardware stack error")


class PycudaBackend(Backend):
    name = "pycuda"

    def __init__(self, spec: Spec, mep_dir: Path, build_dir: Path, device: int | None = None,
                 run_timeout: float = 60.0, compile_timeout: float = 300.0, start_timeout: float = 120.0):
        if spec.chain:
            names = ", ".join(c.kernel for c in spec.chain)
            raise MepgenError(f"unsupported by the pycuda backend: the MEP runs a chain ({names}) before the "
                              "target; use --backend native")
        if spec.buffers or any(p.relocate for p in spec.params):
            raise MepgenError("unsupported by the pycuda backend: the MEP rewrites captured device pointers "
                              "(mep.yaml `buffers`, `relocate`); use --backend native")
        for p in spec.params:
            if p.role == "scalar" and p.value is None:
                raise MepgenError(f"unsupported by the pycuda backend: scalar parameter {p.name} has no value")
        self.spec = spec
        self.mep_dir = Path(mep_dir).resolve()
        self.build_dir = Path(build_dir)
        self.device = device or 0
        self.run_timeout = run_timeout
        self.compile_timeout = compile_timeout
        self.start_timeout = start_timeout
        self.proc = None
        self.conn = None
        self.info: dict = {}
        self.sets_loaded: set[int] = set()
        self.modules: list[str] = []        # loaded cubins, oldest first
        self.pinned: str | None = None      # the baseline's key: never evicted
        self.sandbox_level: str | None = None   # the sandbox of nvcc and the worker (sandbox.py), set by the
        #                                         evaluator; None: auto
        self.level: str | None = None           # the level the running worker got
        self.log_file = None                    # the worker's stdout and stderr
        self.entry: str | None = None           # another worker function, MODULE:FUNCTION (tests)

    def compile(self, kernel_file: Path, launch: Launch | None = None, flags=()) -> Built | CompileFailed:
        """The cubin; with `launch`, its launch geometry comes from that configuration instead of mep.yaml's;
        `flags`: extra nvcc flags (the cubin's cache key covers every flag)."""
        spec = with_flags(self.spec if launch is None else with_launch(self.spec, launch), flags)
        return build_cubin(spec, self.mep_dir, Path(kernel_file), self.build_dir, self.compile_timeout,
                           level=self.sandbox_level)

    # --- the worker ---------------------------------------------------------------------------------

    def _start(self) -> RuntimeFault | None:
        """Start the worker in the sandbox (sandbox.for_worker: the level the evaluator chose), its end of a
        socket pair passed as a descriptor; its stdout and stderr go to an unlinked file (the tail says why it
        died)."""
        import socket
        import subprocess
        import sys
        import tempfile
        from multiprocessing.connection import Connection

        level = self.sandbox_level or sandbox.resolve("auto")
        confine = sandbox.for_worker(level, hide=[self.mep_dir, self.build_dir])
        ours, theirs = socket.socketpair()
        self.conn = Connection(ours.detach())
        child = theirs.detach()
        argv = [sys.executable, *(["-P"] if sys.version_info >= (3, 11) else []), "-s", "-m",
                "mepgen.evaluate.pycuda_worker", str(child), str(self.device), *([self.entry] if self.entry else [])]
        env = process.candidate_env()
        env["PYTHONPATH"] = os.pathsep.join(str(p) for p in worker_path())
        self.log_file = tempfile.TemporaryFile()
        confine.prepare()
        try:
            self.proc = subprocess.Popen(confine.command(argv), env=env, cwd="/", stdin=subprocess.DEVNULL,
                                         stdout=self.log_file, stderr=self.log_file, start_new_session=True,
                                         preexec_fn=confine.preexec(), pass_fds=(child, *confine.pass_fds))
        except OSError as e:
            raise MepgenError(f"cannot start the pycuda worker: {e}") from None
        finally:
            confine.close()
            os.close(child)
        self.level = level
        self.sets_loaded, self.modules = set(), []
        reply = self._receive(self.start_timeout, "starting the worker")
        if isinstance(reply, RuntimeFault):
            return reply
        order = perturb.names(self.spec)
        params = [{"name": p.name, "role": p.role, "dtype": p.dtype, "count": self.spec.count(p) if p.is_buffer else 0,
                   "placement": p.placement, "perturb": order.index(p.name) if p.name in order else None}
                  for p in self.spec.params]
        try:
            flush_cubin = l2_flush.build_cubin(self.spec.build.arch, self.build_dir, self.compile_timeout).read_bytes()
        except MepgenError as e:
            return RuntimeFault("harness_error", str(e))
        reply = self._call("setup", params, flush_cubin)
        if isinstance(reply, RuntimeFault):
            return reply
        self.info = reply
        return None

    def _alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def _kill(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                process.kill_group(self.proc)
            try:
                self.proc.wait(timeout=10)
            except Exception:      # noqa: BLE001 (a process stuck in the driver: it dies with its group)
                pass
        if self.conn is not None:
            self.conn.close()
        if self.log_file is not None:
            self.log_file.close()
        self.proc = self.conn = self.log_file = None

    def _log_tail(self, size: int = 2000) -> str:
        """The end of what the worker printed (why it died), one line."""
        if self.log_file is None:
            return ""
        try:
            end = self.log_file.seek(0, os.SEEK_END)
            self.log_file.seek(max(0, end - size))
            text = self.log_file.read().decode("utf-8", errors="replace").strip()
        except (OSError, ValueError):
            return ""
        lines = [ln for ln in text.splitlines() if ln.strip()]
        return lines[-1][-300:] if lines else ""

    def _limit(self) -> wire.Limit:
        """The largest message the worker may send: an output buffer per frame (outputs come back whole)."""
        largest = max([self.spec.count(p) * np.dtype(p.dtype).itemsize for p in self.spec.params
                       if p.is_buffer and p.dtype], default=0)
        return wire.Limit(blob_bytes=largest + (1 << 20))

    def _receive(self, timeout: float, what: str):
        if not self.conn.poll(timeout):
            self._kill()
            return RuntimeFault("timeout", f"no reply within {timeout:g} s while {what}: worker killed")
        try:
            reply = wire.recv(self.conn, self._limit())
            status, message = reply if isinstance(reply, list) and len(reply) == 2 else (None, None)
            if status not in ("ok", "cuda_error", "error") or (status != "ok" and not isinstance(message, str)):
                raise wire.ProtocolError("not a reply")
        except (EOFError, OSError):
            try:
                code = self.proc.wait(timeout=5) if self.proc is not None else None
            except Exception:     # noqa: BLE001
                code = None
            tail = self._log_tail()
            self._kill()
            return RuntimeFault("crash", f"the worker died while {what} (exit code {code})"
                                + (f": {tail}" if tail else ""))
        except wire.ProtocolError as e:
            self._kill()
            return RuntimeFault("harness_error", f"the pycuda worker broke the protocol while {what} ({e}): "
                                "worker killed")
        if status == "ok":
            return message
        self._kill()      # after a CUDA error the context is unusable; after any error, start clean
        if status == "cuda_error":
            kind = "illegal_address" if any(s in message.lower() for s in _ILLEGAL) else "cuda_error"
            return RuntimeFault(kind, message)
        if message.startswith("cannot start the pycuda worker"):
            raise MepgenError(message + (f" (in the sandbox, level {self.level}: `evaluate.sandbox: off` tells "
                                         "whether it is the cause; docs/sandbox.md)" if self.level != "off" else ""))
        return RuntimeFault("harness_error", f"pycuda worker: {message}")

    def _call(self, op: str, *args, timeout: float | None = None, files=()):
        """Send one request (and `files`, open descriptors, after it) and wait for the reply."""
        if not self._alive():
            self._kill()
            fault = self._start()
            if fault is not None:
                return fault
        try:
            wire.send(self.conn, [op, *args])
            if files:
                wire.send_fds(self.conn, list(files))
        except (BrokenPipeError, OSError):
            self._kill()
            return RuntimeFault("crash", f"the worker was gone before '{op}'")
        return self._receive(timeout or self.run_timeout, f"running '{op}'")

    def _ensure(self, built: Built, *sets: InputSet) -> RuntimeFault | None:
        if not self._alive():
            self._kill()
            fault = self._start()
            if fault is not None:
                return fault
        for s in sets:
            if s.index not in self.sets_loaded:
                # the worker reads the .npy files itself (hundreds of MiB through the pipe cost seconds per set),
                # from descriptors opened here: it sees no workspace
                inputs = {p.name: Path(s.data_dir) / f"{p.name}.npy" for p in self.spec.inputs}
                consts = {}
                for c in self.spec.constants:
                    f = Path(s.data_dir) / datagen.const_file_name(c.name)
                    if c.init is not None:
                        consts[f.name[:-len(".npy")]] = f
                reply = self._send_set(s.index, inputs, consts)
                if isinstance(reply, RuntimeFault):
                    return reply
                self.sets_loaded.add(s.index)
        if built.key not in self.modules:
            while len(self.modules) >= MAX_MODULES:
                victim = next((k for k in self.modules if k != self.pinned), None)
                if victim is None:
                    break
                self.modules.remove(victim)
                self._call("unload", victim)
            reply = self._call("load", built.key, Path(built.artifact).read_bytes(), built.extra)
            if isinstance(reply, RuntimeFault):
                reply.message = f"loading the cubin: {reply.message}"
                return reply
            self.modules.append(built.key)
        return None

    def _send_set(self, k: int, inputs: dict, consts: dict):
        files = []
        try:
            for f in [*inputs.values(), *consts.values()]:
                files.append(os.open(f, os.O_RDONLY))
        except OSError as e:
            for fd in files:
                os.close(fd)
            return RuntimeFault("harness_error", f"input set {k}: {e}")
        try:
            return self._call("load_set", k, list(inputs), list(consts), files=files)
        finally:
            for fd in files:
                os.close(fd)

    # --- the interface ------------------------------------------------------------------------------

    def run(self, built: Built, inputs: InputSet, out_dir: Path) -> RunOutput:
        fault = self._ensure(built, inputs)
        reply = fault or self._call("run", built.key, inputs.index)
        if isinstance(reply, RuntimeFault):
            reply.input_set = inputs.index
            return RunOutput(fault=reply)
        return RunOutput(outputs=reply["outputs"], inputs_changed=reply["inputs_changed"],
                         record={"device": reply["device"], "run_ms": reply.get("run_ms")})

    def time(self, baseline: Built, candidate: Built | None, inputs: InputSet, plan: TimingPlan,
             out_dir: Path, recheck: InputSet | None = None) -> TimingOutput:
        self.pinned = baseline.key
        sets = [inputs] + ([recheck] if recheck is not None else [])
        fault = self._ensure(baseline, *sets) or (self._ensure(candidate, *sets) if candidate else None)
        if fault is None:
            budget = self.run_timeout * (1 + plan.rounds)
            reply = self._call("time", baseline.key, candidate.key if candidate else None, inputs.index, plan.warmup,
                               plan.reps, plan.rounds, plan.flush_l2, recheck.index if recheck else None,
                               plan.perturb_seed, timeout=budget)
        else:
            reply = fault
        if isinstance(reply, RuntimeFault):
            reply.input_set = inputs.index
            return TimingOutput(fault=reply)
        return TimingOutput(baseline_rounds=reply["baseline_rounds"], candidate_rounds=reply["candidate_rounds"],
                            after=reply["after"], after_input_set=reply["after_input_set"],
                            inputs_changed=reply["inputs_changed"], device=reply["device"],
                            l2_bytes=reply["l2_bytes"], perturbed=reply.get("perturbed") or {},
                            perturbed_ref=reply.get("perturbed_ref") or {},
                            perturbed_buffers=reply.get("perturbed_buffers") or 0, warmup=plan.warmup, reps=plan.reps)

    def close(self) -> None:
        if self.conn is not None and self._alive():
            try:
                wire.send(self.conn, ["exit"])
                self.proc.wait(timeout=10)
            except (BrokenPipeError, OSError, subprocess.TimeoutExpired):
                pass
        self._kill()


def worker_path() -> list[Path]:
    """PYTHONPATH for the worker: this interpreter's sys.path (the worker runs with -s and -P: no user site,
    no current folder), so it imports the same mepgen, numpy and pycuda."""
    import sys
    out = []
    for e in sys.path:
        if e:
            p = Path(e).resolve()
            if p not in out:
                out.append(p)
    return out
