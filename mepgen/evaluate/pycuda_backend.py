"""The pycuda backend: kernels compiled to cubins, launched by a worker process that keeps its CUDA
context and the input sets on the GPU across candidates (no process start, no context creation, no input
upload per candidate: that is where its throughput comes from).

The worker is killed and restarted on a hang (no reply within the time-out), a crash (the pipe closes)
or any CUDA error (sticky: the context is unusable). Needs the `mepgen[gpu]` extra (pycuda).
"""
from __future__ import annotations

import multiprocessing as mp
from pathlib import Path


from .. import datagen
from ..errors import MepgenError
from ..spec import Launch, Spec
from .backend import Backend, Built, InputSet, RunOutput, TimingOutput, TimingPlan
from .launchcfg import with_flags, with_launch
from . import l2_flush, perturb
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
        self.sandbox_level: str | None = None   # nvcc's sandbox (sandbox.py), set by the evaluator; None: auto

    def compile(self, kernel_file: Path, launch: Launch | None = None, flags=()) -> Built | CompileFailed:
        """The cubin; with `launch`, its launch geometry comes from that configuration instead of mep.yaml's;
        `flags`: extra nvcc flags (the cubin's cache key covers every flag)."""
        spec = with_flags(self.spec if launch is None else with_launch(self.spec, launch), flags)
        return build_cubin(spec, self.mep_dir, Path(kernel_file), self.build_dir, self.compile_timeout,
                           level=self.sandbox_level)

    # --- the worker ---------------------------------------------------------------------------------

    def _start(self) -> RuntimeFault | None:
        ctx = mp.get_context("spawn")
        self.conn, child = ctx.Pipe()
        from . import pycuda_worker
        self.proc = ctx.Process(target=pycuda_worker.main, args=(child, self.device), daemon=True)
        self.proc.start()
        child.close()
        self.sets_loaded, self.modules = set(), []
        reply = self._receive(self.start_timeout, "starting the worker")
        if isinstance(reply, RuntimeFault):
            return reply
        order = perturb.names(self.spec)
        params = [{"name": p.name, "role": p.role, "dtype": p.dtype, "count": self.spec.count(p) if p.is_buffer else 0,
                   "placement": p.placement, "perturb": order.index(p.name) if p.name in order else None}
                  for p in self.spec.params]
        try:
            flush_cubin = str(l2_flush.build_cubin(self.spec.build.arch, self.build_dir, self.compile_timeout))
        except MepgenError as e:
            return RuntimeFault("harness_error", str(e))
        reply = self._call("setup", params, flush_cubin)
        if isinstance(reply, RuntimeFault):
            return reply
        self.info = reply
        return None

    def _kill(self) -> None:
        if self.proc is not None:
            if self.proc.is_alive():
                self.proc.kill()
            self.proc.join(timeout=10)
        if self.conn is not None:
            self.conn.close()
        self.proc = self.conn = None

    def _receive(self, timeout: float, what: str):
        if not self.conn.poll(timeout):
            self._kill()
            return RuntimeFault("timeout", f"no reply within {timeout:g} s while {what}: worker killed")
        try:
            status, *payload = self.conn.recv()
        except (EOFError, OSError):
            code = self.proc.exitcode if self.proc is not None else None
            self._kill()
            return RuntimeFault("crash", f"the worker died while {what} (exit code {code})")
        if status == "ok":
            return payload[0]
        message = payload[0]
        self._kill()      # after a CUDA error the context is unusable; after any error, start clean
        if status == "cuda_error":
            kind = "illegal_address" if any(s in message.lower() for s in _ILLEGAL) else "cuda_error"
            return RuntimeFault(kind, message)
        if message.startswith("cannot start the pycuda worker"):
            raise MepgenError(message)
        return RuntimeFault("harness_error", f"pycuda worker: {message}")

    def _call(self, op: str, *args, timeout: float | None = None):
        if self.proc is None or not self.proc.is_alive():
            self._kill()
            fault = self._start()
            if fault is not None:
                return fault
        try:
            self.conn.send((op, *args))
        except (BrokenPipeError, OSError):
            self._kill()
            return RuntimeFault("crash", f"the worker was gone before '{op}'")
        return self._receive(timeout or self.run_timeout, f"running '{op}'")

    def _ensure(self, built: Built, *sets: InputSet) -> RuntimeFault | None:
        if self.proc is None or not self.proc.is_alive():
            self._kill()
            fault = self._start()
            if fault is not None:
                return fault
        for s in sets:
            if s.index not in self.sets_loaded:
                # the worker reads the .npy files itself: an input set of hundreds of MiB pickled through the
                # pipe cost seconds per set
                inputs = {p.name: str(Path(s.data_dir) / f"{p.name}.npy") for p in self.spec.inputs}
                consts = {}
                for c in self.spec.constants:
                    f = Path(s.data_dir) / datagen.const_file_name(c.name)
                    if c.init is not None:
                        consts[f.name[:-len(".npy")]] = str(f)
                reply = self._call("load_set", s.index, inputs, consts)
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
            reply = self._call("load", built.key, str(built.artifact), built.extra)
            if isinstance(reply, RuntimeFault):
                reply.message = f"loading the cubin: {reply.message}"
                return reply
            self.modules.append(built.key)
        return None

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
        if self.conn is not None and self.proc is not None and self.proc.is_alive():
            try:
                self.conn.send(("exit",))
                self.proc.join(timeout=10)
            except (BrokenPipeError, OSError):
                pass
        self._kill()
