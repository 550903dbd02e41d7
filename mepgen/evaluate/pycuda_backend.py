"""The pycuda backend: kernels compiled to cubins, launched by a worker process that keeps its CUDA
context and the input sets on the GPU across candidates (no process start, no context creation, no input
upload per candidate: that is where its throughput comes from).

The worker is killed and restarted on a hang (no reply within the time-out), a crash (the pipe closes)
or any CUDA error (sticky: the context is unusable). It runs candidate code on the GPU, so it runs in the
sandbox as the native harness does (confined.for_worker, docs/sandbox.md) and talks JSON and .npy (wire.py),
never pickle: mepgen unpickles nothing from it. Needs the `mepgen[gpu]` extra (pycuda).
"""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.connection import Connection
from pathlib import Path

import numpy as np

from .. import datagen
from ..errors import MepgenError
from ..spec import Launch, Spec
from .backend import Backend, Built, InputSet, RunOutput, TimingOutput, TimingPlan
from .launchcfg import device_arch, with_arch, with_flags, with_launch
from .. import perturb
from . import confined, device_compare, guards, l2_flush, process, sandbox, wire
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
        # device verification (device_compare.py): input set -> {output: reference .npy}, and per output
        # [kernel, rtol, atol, poisoned]; set by the evaluator once the references exist (use_references)
        self.refs_of = None
        self.ref_rules: dict[str, list] = {}
        self.refs_held: dict[int, list[str]] = {}      # input set -> outputs the worker holds references of
        self._helpers = None     # the L2 flush and comparison cubins, built in the background (_build_helpers)

    def compile(self, kernel_file: Path, launch: Launch | None = None, flags=()) -> Built | CompileFailed:
        """The cubin; with `launch`, its launch geometry comes from that configuration instead of mep.yaml's;
        `flags`: extra nvcc flags (the cubin's cache key covers every flag)."""
        spec = with_flags(self.spec if launch is None else with_launch(self.spec, launch), flags)
        arch = device_arch(spec.build.arch, self.device)     # `native`: this GPU's, as the harness gets it
        spec = with_arch(spec, arch)
        if self._helpers is None:     # the first build (the original's): mepgen's own kernels meanwhile
            self._helpers = _HELPERS.submit(_build_helpers, arch, self.build_dir, self.compile_timeout)
        return build_cubin(spec, self.mep_dir, Path(kernel_file), self.build_dir, self.compile_timeout,
                           level=self.sandbox_level)

    # --- the worker ---------------------------------------------------------------------------------

    def _start(self) -> RuntimeFault | None:
        """Start the worker in the sandbox (confined.for_worker: the level the evaluator chose), its end of a
        socket pair passed as a descriptor; its stdout and stderr go to an unlinked file (the tail says why it
        died)."""

        level = self.sandbox_level or sandbox.resolve("auto")
        ours, theirs = socket.socketpair()
        self.conn = Connection(ours.detach())
        child = theirs.detach()
        argv, confine = self._confined(level, [
            sys.executable, *(["-P"] if sys.version_info >= (3, 11) else []), "-s", "-m",
            "mepgen.evaluate.pycuda_worker", str(child), str(self.device), *([self.entry] if self.entry else [])])
        env = process.candidate_env()
        env["PYTHONPATH"] = os.pathsep.join(str(p) for p in worker_path())
        self.log_file = tempfile.TemporaryFile()
        env = confine.environment(env)
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
        self.sets_loaded, self.modules, self.refs_held = set(), [], {}
        reply = self._receive(self.start_timeout, "starting the worker")
        if isinstance(reply, RuntimeFault):
            return reply
        params, buffers, symbols = worker_layout(self.spec)
        if self._helpers is not None:
            self._helpers.result()
        try:
            arch = device_arch(self.spec.build.arch, self.device)
            flush_cubin = l2_flush.build_cubin(arch, self.build_dir, self.compile_timeout).read_bytes()
        except MepgenError as e:
            return RuntimeFault("harness_error", str(e))
        reply = self._call("setup", params, flush_cubin, self._compare_cubin(), buffers, symbols)
        if isinstance(reply, RuntimeFault):
            return reply
        self.info = reply
        return None

    def _confined(self, level: str, argv: list[str]):
        """(argv, Confinement) of the worker's process (memcheck_worker.py runs it under compute-sanitizer)."""
        return argv, confined.for_worker(level, hide=[self.mep_dir, self.build_dir])

    def use_references(self, refs_of, rules: dict[str, list]) -> None:
        """Compare outputs with the references on the GPU from now on: `refs_of(k)` gives input set k's reference
        files (name -> .npy), `rules` each output's [kernel, rtol, atol, poisoned] (device_compare.kernel_for,
        verify.tolerance_for, role `out`); an output without a rule is compared in the parent."""
        self.refs_of, self.ref_rules, self.refs_held = refs_of, dict(rules), {}
        cubin = self._compare_cubin()
        if cubin is not None and self._alive():
            reply = self._call("compare", cubin)
            if isinstance(reply, RuntimeFault):     # the worker restarts with them at its next request
                self._kill()

    def recheck_references(self, k: int, names: list[str]) -> None:
        """Outputs the GPU called different from set k's references and the parent's comparison found equal: the
        references on the GPU are not what they were (a candidate wrote past its buffers), so they are sent again
        before the next run on set k."""
        if any(n in self.refs_held.get(k, []) for n in names):
            self.refs_held.pop(k, None)

    def _compare_cubin(self) -> bytes | None:
        """device_compare.py's kernels when the outputs are to be compared on the GPU; None: in the parent (also
        when nvcc cannot build them: the parent's comparison is the same rule)."""
        if self.refs_of is None or not self.ref_rules:
            return None
        if self._helpers is not None:
            self._helpers.result()       # built in the background since the first compile: waits, then cached
        try:
            arch = device_arch(self.spec.build.arch, self.device)
            return device_compare.build_cubin(arch, self.build_dir, self.compile_timeout).read_bytes()
        except MepgenError:
            return None

    def warm(self) -> None:
        """Start the worker ahead of its first request (the evaluator does it while the original builds). Nothing
        is raised or kept here: a worker that did not start is started, and its fault said, by that request."""
        try:
            if not self._alive() and self._start() is not None:
                self._kill()
        except Exception:  # noqa: BLE001 (a warm-up: the first request starts the worker again and says why not)
            self._kill()

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
        held = [p for p in self.spec.params if p.is_buffer and p.dtype] + list(self.spec.buffers)
        largest = max([self.spec.count(p) * np.dtype(p.dtype).itemsize for p in held], default=0)
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
        fault = self.load_sets(*sets)
        if fault is not None:
            return fault
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

    def load_sets(self, *sets: InputSet) -> RuntimeFault | None:
        """The worker started (if it is not running) and input sets `sets` on the GPU."""
        if not self._alive():
            self._kill()
            fault = self._start()
            if fault is not None:
                return fault
        for s in sets:
            if s.index not in self.sets_loaded:
                # the worker reads the .npy files itself (hundreds of MiB through the pipe cost seconds per set),
                # from descriptors opened here: it sees no workspace
                inputs = {p.name: Path(s.data_dir) / f"{p.name}.npy"
                          for p in [*self.spec.inputs, *self.spec.chain_inputs]}
                consts = {}
                for c in self.spec.constants:
                    f = Path(s.data_dir) / datagen.const_file_name(c.name)
                    if c.init is not None:
                        consts[f.name[:-len(".npy")]] = f
                reply = self._send_set(s.index, inputs, consts)
                if isinstance(reply, RuntimeFault):
                    return reply
                self.sets_loaded.add(s.index)
            if self.refs_of is not None and self.ref_rules and s.index not in self.refs_held:
                reply = self._send_refs(s.index)
                if isinstance(reply, RuntimeFault):
                    return reply
                self.refs_held[s.index] = list(reply or [])
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

    def _send_refs(self, k: int):
        """Input set k's references to the worker as descriptors; the names it holds on the GPU."""
        paths = self.refs_of(k) or {}
        names = [n for n in self.ref_rules if n in paths and Path(paths[n]).is_file()]
        files = []
        try:
            for n in names:
                files.append(os.open(paths[n], os.O_RDONLY))
        except OSError as e:
            for fd in files:
                os.close(fd)
            return RuntimeFault("harness_error", f"reference outputs of input set {k}: {e}")
        try:
            return self._call("load_refs", k, names, {n: self.ref_rules[n] for n in names}, files=files)
        finally:
            for fd in files:
                os.close(fd)

    # --- the interface ------------------------------------------------------------------------------

    def load(self, built: Built, *sets: InputSet) -> RuntimeFault | None:
        """The cubin and the input sets onto the GPU now (a run would load them itself): the `load` phase."""
        fault = self._ensure(built, *sets)
        if fault is not None and sets:
            fault.input_set = sets[0].index
        return fault

    def run(self, built: Built, inputs: InputSet, out_dir: Path) -> RunOutput:
        fault = self._ensure(built, inputs)
        reply = fault or self._call("run", built.key, inputs.index, bool(self.refs_held.get(inputs.index)))
        if isinstance(reply, RuntimeFault):
            reply.input_set = inputs.index
            return RunOutput(fault=reply)
        if reply.get("guard"):          # a write into a guard zone (guards.py): out of bounds
            return RunOutput(fault=RuntimeFault("out_of_bounds", guards.describe(reply["guard"]), inputs.index))
        return RunOutput(outputs=reply["outputs"], inputs_changed=reply["inputs_changed"],
                         matched=list(reply.get("matched") or []),
                         record={"device": reply["device"], "run_ms": reply.get("run_ms")})

    def time(self, baseline: Built, candidate: Built | None, inputs: InputSet, plan: TimingPlan,
             out_dir: Path, recheck: InputSet | None = None) -> TimingOutput:
        """One call to the worker; with `plan.stop` (sequential timing) one call per round, asking `plan.stop`
        after each whether the verdict is settled, then one that runs the re-checks."""
        self.pinned = baseline.key
        sets = [inputs] + ([recheck] if recheck is not None else [])
        fault = self._ensure(baseline, *sets) or (self._ensure(candidate, *sets) if candidate else None)
        if fault is not None:
            fault.input_set = inputs.index
            return TimingOutput(fault=fault)
        cand = candidate.key if candidate else None
        common = (baseline.key, cand, inputs.index)
        tail = (plan.flush_l2, recheck.index if recheck else None, plan.perturb_seed, plan.control)
        check = bool(self.refs_held.get((recheck or inputs).index))   # the re-check's outputs compared on the GPU
        if plan.stop is None or candidate is None:
            reply = self._call("time", *common, plan.warmup, plan.reps, plan.rounds, *tail, True, 0, check,
                               timeout=self.run_timeout * (1 + plan.rounds))
            return self._timing(reply, inputs, plan)
        base_rounds, cand_rounds, step = [], [], 0
        for r in range(plan.rounds):
            reply = self._call("time", *common, plan.warmup if r == 0 else 0, plan.reps, 1, *tail, False, step,
                               timeout=self.run_timeout * 2)
            if isinstance(reply, RuntimeFault):
                return self._timing(reply, inputs, plan)
            base_rounds += reply["baseline_rounds"]
            cand_rounds += reply["candidate_rounds"]
            step = reply["step"]
            if plan.stop(cand_rounds):
                break
        reply = self._call("time", *common, 0, plan.reps, 0, *tail, True, step, check, timeout=self.run_timeout * 2)
        if not isinstance(reply, RuntimeFault):
            reply["baseline_rounds"], reply["candidate_rounds"] = base_rounds, cand_rounds
        return self._timing(reply, inputs, plan)

    @staticmethod
    def _timing(reply, inputs: InputSet, plan: TimingPlan) -> TimingOutput:
        if isinstance(reply, RuntimeFault):
            reply.input_set = inputs.index
            return TimingOutput(fault=reply)
        if reply.get("guard"):
            return TimingOutput(fault=RuntimeFault("out_of_bounds", guards.describe(reply["guard"]), inputs.index))
        return TimingOutput(baseline_rounds=reply["baseline_rounds"], candidate_rounds=reply["candidate_rounds"],
                            after=reply["after"], after_input_set=reply["after_input_set"],
                            after_matched=list(reply.get("after_matched") or []),
                            inputs_changed=reply["inputs_changed"], device=reply["device"],
                            l2_bytes=reply["l2_bytes"], perturbed=reply.get("perturbed") or {},
                            perturbed_ref=reply.get("perturbed_ref") or {},
                            perturbed_summary=reply.get("perturbed_summary"),
                            perturbed_buffers=reply.get("perturbed_buffers") or 0, warmup=plan.warmup, reps=plan.reps)

    def close(self) -> None:
        if self.conn is not None and self._alive():
            try:
                wire.send(self.conn, ["exit"])
                self.proc.wait(timeout=10)
            except (BrokenPipeError, OSError, subprocess.TimeoutExpired):
                pass
        self._kill()


_HELPERS = ThreadPoolExecutor(max_workers=2, thread_name_prefix="mepgen-helpers")


def _build_helpers(arch: str, build_dir: Path, timeout: float) -> None:
    """The L2 flush and the comparison kernels for `arch` into the build folder's cache, while the original
    compiles and its input sets and references are made (each costs an nvcc run of a second or two); a failure
    is said again where the cubin is needed."""
    for build in (l2_flush.build_cubin, device_compare.build_cubin):
        try:
            build(arch, build_dir, timeout)
        except (MepgenError, OSError):
            pass        # a prebuild only: the build that needs it runs again and reports its error


def worker_layout(spec: Spec) -> tuple[list[dict], list[dict], list[dict]]:
    """What the worker's `setup` gets: the parameters in kernel order (role, dtype, element count, placement, index
    among the perturbed, captured pointers inside), mep.yaml `buffers` (the allocations those pointers reach;
    a chain's are refused before), and the `__device__` variables the kernel writes (constants with role inout)."""
    order = perturb.names(spec)
    params = [{"name": p.name, "role": p.role, "dtype": p.dtype, "count": spec.count(p) if p.is_buffer else 0,
               "placement": p.placement, "perturb": order.index(p.name) if p.name in order else None,
               "relocate": p.relocate or []} for p in spec.params]
    buffers = [{"name": b.name, "role": b.role, "dtype": b.dtype, "count": spec.count(b), "relocate": b.relocate or []}
               for b in spec.buffers]
    symbols = [{"name": c.name, "role": "inout", "dtype": c.dtype, "count": spec.count(c)}
               for c in spec.constants if c.role == "inout"]
    return params, buffers, symbols


def worker_path() -> list[Path]:
    """PYTHONPATH for the worker: this interpreter's sys.path (the worker runs with -s and -P: no user site,
    no current folder), so it imports the same mepgen, numpy and pycuda."""
    out = []
    for e in sys.path:
        if e:
            p = Path(e).resolve()
            if p not in out:
                out.append(p)
    return out
