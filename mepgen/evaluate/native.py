"""The native backend: nvcc builds the MEP's harness with the kernel file; each run is a fresh process.

The process is the worker: a crash, a hang (hard time-out, process group killed) or a sticky CUDA error
dies with it and the next run starts clean. Timing alternates baseline and candidate processes round by
round (A B A B ...); each harness process times its launches with CUDA events after L2 flushes
(docs/mep-format.md, "The harness protocol").
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from pathlib import Path

import numpy as np

from .. import mepbuild
from ..spec import Launch, Spec
from . import confined, guards, output_digest, process, sandbox
from .backend import Backend, Built, InputSet, RunOutput, TimingOutput, TimingPlan
from .. import perturb
from .launchcfg import candidate_harness, device_arch, with_arch, with_flags
from .plan import MIN_REPS
from .ptxas import kernel_info
from .results import CompileFailed, RuntimeFault
from .symbols import callee
from .verify import unchanged

RESULT_PREFIX = "MEPGEN_RESULT "
#: harness flag that writes `in` buffers back to `--out`/in/ (and after/in/); support is read from harness.cu
CHECK_INPUTS_FLAG = "--check-inputs"
#: harness flag: the post-timing re-check reads another input set (a kernel caching results then fails)
RECHECK_FLAG = "--recheck-data"
#: harness flags: an output whose digest is the reference's is not written back (output_digest.py); a harness with them also
#: compares its loaded `in` buffers itself (--check-inputs)
SKIP_FLAG, SKIP_AFTER_FLAG = "--skip", "--skip-after"
_ILLEGAL = ("cudaErrorIllegalAddress", "cudaErrorMisalignedAddress", "cudaErrorIllegalInstruction",
            "cudaErrorInvalidAddressSpace", "cudaErrorInvalidPc", "cudaErrorHardwareStackError")


def compile_message(log: str, limit: int = 30) -> str:
    """The error lines of an nvcc log (what a person or a prompt needs), else its tail."""
    lines = [ln for ln in log.splitlines() if ln.strip()]
    errors = [ln for ln in lines if " error" in ln or ln.startswith("error") or "fatal" in ln]
    chosen = errors or lines[-limit:]
    return "\n".join(chosen[:limit]) or "nvcc failed without a message"


def parse_result_line(stdout: str) -> dict | None:
    """The JSON of the harness's `MEPGEN_RESULT {...}` line, or None when there is none (or it is broken)."""
    for line in reversed(stdout.splitlines()):
        if line.startswith(RESULT_PREFIX):
            try:
                obj = json.loads(line[len(RESULT_PREFIX):])
            except json.JSONDecodeError:
                return None
            return obj if isinstance(obj, dict) else None
    return None


def classify(done: process.Completed, timeout: float) -> tuple[dict, RuntimeFault | None]:
    """The harness's record and, when the run failed, a typed fault with the runtime's own message."""
    tail = (done.stderr[-4000:] + ("\n" + done.stdout[-2000:] if done.stdout else "")).strip()
    if done.timed_out:
        return {}, RuntimeFault("timeout", f"no result within {timeout:g} s: killed (a hang or an endless loop)",
                                log=tail)
    record = parse_result_line(done.stdout) or {}
    if done.signal_name:
        return record, RuntimeFault("crash", f"the harness died of {done.signal_name}", log=tail)
    status = record.get("status")
    if status == "ok" and done.returncode == 0:
        return record, None
    if status == "cuda_error":
        err = record.get("error", "")
        msg = f"{err}: {record.get('message', '')} (in {record.get('call', '?')})".strip()
        kind = "illegal_address" if err in _ILLEGAL or "illegal" in msg.lower() else "cuda_error"
        return record, RuntimeFault(kind, msg, log=tail)
    if status == "memory_error":      # a write into a guard zone (templates/harness/guards.h)
        return record, RuntimeFault("out_of_bounds", guards.describe(guards.hit_of_record(record)), log=tail)
    if done.returncode == 2:
        return record, RuntimeFault("harness_error", record.get("message") or _last_line(done.stderr)
                                    or "the harness rejected its inputs (exit 2)", log=tail)
    return record, RuntimeFault("crash", f"the harness exited with {done.returncode} without a result line",
                                log=tail)


class _Inputs(dict):
    """An input set's `in` buffers, each read from its .npy on first use."""

    def __init__(self, folder: Path):
        super().__init__()
        self.folder = folder

    def __missing__(self, name: str):
        self[name] = np.load(self.folder / f"{name}.npy", allow_pickle=False)
        return self[name]


def _last_line(text: str) -> str:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else ""


class NativeBackend(Backend):
    name = "native"

    def __init__(self, spec: Spec, mep_dir: Path, build_dir: Path, device: int | None = None,
                 compile_timeout: float = 300.0, run_timeout: float = 60.0):
        self.spec = spec
        self.mep_dir = Path(mep_dir).resolve()
        self.build_dir = Path(build_dir)
        self.device = device
        self.compile_timeout = compile_timeout
        self.run_timeout = run_timeout
        harness = self.mep_dir / mepbuild.HARNESS_FILE
        self.harness_text = harness.read_text(errors="replace") if harness.is_file() else ""
        self.check_inputs = CHECK_INPUTS_FLAG in self.harness_text
        self.recheck_data = RECHECK_FLAG in self.harness_text
        self.perturb = perturb.FLAG in self.harness_text
        self.digested = SKIP_AFTER_FLAG in self.harness_text         # rendered by a mepgen with digests (2026-11-28)
        self.ref_digests: dict[int, dict[str, list[str]]] = {}      # use_digests: set -> output -> [lane A, lane B]
        self.sandbox_level: str | None = None      # set by the evaluator (config evaluate.sandbox); None: auto
        #: what a harness process reads besides its arguments: the toolkit (a harness built with -cudart shared)
        self.runtime_read: list[Path] = [r for r in [confined.toolkit_root(mepbuild.nvcc_executable())] if r]
        #: what a harness process may start besides itself (landlock level; nothing for a real harness)
        self.runtime_programs: list[Path] = []

    def use_digests(self, k: int, digests: dict[str, list[str]]) -> None:
        """The digests of input set k's reference outputs (output_digest.py), from the original's own runs: from now on an
        output with them is not written back, and taken as matched when the harness reports both lanes."""
        if self.digested:
            self.ref_digests[k] = {n: list(v) for n, v in digests.items()}

    def _skip_flags(self, k: int, after: int | None) -> list[str]:
        """--skip for the run on input set k, --skip-after for the re-check after timing on set `after`: lane A of
        each reference digest (lane B stays here: output_digest.py)."""
        flags = []
        for flag, index in ((SKIP_FLAG, k), (SKIP_AFTER_FLAG, after)):
            for name, lanes in sorted(self.ref_digests.get(index, {}).items()) if index is not None else []:
                flags += [flag, f"{name}:{lanes[0]}"]
        return flags

    def _matched(self, record: dict, key: str, k: int | None) -> list[str]:
        """Outputs whose digests in the harness's record (`digests`, `after_digests`) are input set k's references'."""
        if k is None:
            return []
        return output_digest.matched(record.get(key), self.ref_digests.get(k, {}), [p.name for p in self.spec.outputs])

    def _level(self) -> str:
        if self.sandbox_level is None:
            self.sandbox_level = sandbox.resolve("auto")
        return self.sandbox_level

    def _file_limit(self) -> int:
        """The largest file a harness run writes: its largest buffer as .npy (plus room for the header), or
        stdout's clipped record. The MEP's own buffers count too (those a captured struct's pointers reach,
        chain buffers): the harness writes them back like parameters (SIGXFSZ killed such runs)."""
        sizes = [self.spec.count(p) * np.dtype(p.dtype).itemsize for p in self.spec.params if p.is_buffer]
        sizes += [self.spec.count(b) * np.dtype(b.dtype).itemsize for b in self.spec.buffers
                  if b.dtype is not None and b.count is not None]
        return max(sizes, default=0) + (1 << 20)

    # --- compile ----------------------------------------------------------------------------------

    def build_key(self, kernel_file: Path, harness_text: str | None = None, spec: Spec | None = None) -> str:
        cmd = mepbuild.nvcc_command(spec or self.spec, self.mep_dir, Path("KERNEL"), Path("OUT"))
        h = hashlib.sha256()
        harness = self.harness_text if harness_text is None else harness_text
        for part in (Path(kernel_file).read_bytes(), harness.encode(), json.dumps(cmd).encode(),
                     (shutil.which(cmd[0]) or cmd[0]).encode()):
            h.update(hashlib.sha256(part).digest())
        return h.hexdigest()[:24]

    def compile(self, kernel_file: Path, launch: Launch | None = None, flags=()) -> Built | CompileFailed:
        """Build the harness with `kernel_file`; with `launch`, a harness rendered for that launch instead;
        `flags`: extra nvcc flags after mep.yaml's (they are part of the command, hence of the build key)."""
        kernel_file = Path(kernel_file).resolve()
        spec = with_flags(self.spec, flags)
        # `arch: native`: this GPU's own (a confined nvcc cannot ask the driver and would build for its default)
        spec = with_arch(spec, device_arch(spec.build.arch, self.device or 0, physical=self.device is not None,
                                           only=("native",)))
        harness, harness_text = None, None
        if launch is not None:
            harness, harness_text = candidate_harness(self.spec, self.mep_dir, launch, self.build_dir)
            if harness is None:
                return CompileFailed(harness_text, "")
        key = self.build_key(kernel_file, harness_text, spec)
        out_dir = self.build_dir / key
        binary, log_file = out_dir / "mep", out_dir / "compile.log"
        if binary.is_file() and log_file.is_file():
            info = kernel_info(log_file.read_text(), callee(self.spec), 0.0)
            info.cached = True
            return Built(kernel_file, binary, key, info, log_file.read_text())
        out_dir.mkdir(parents=True, exist_ok=True)
        tmp = out_dir / f"mep.{os.getpid()}.{time.monotonic_ns()}.tmp"
        cmd = mepbuild.nvcc_command(spec, self.mep_dir, kernel_file, tmp, harness) + ["-Xptxas", "-v"]
        try:
            confine = confined.for_build(self._level(), cmd, self.mep_dir, out_dir,
                                        [kernel_file] + ([harness] if harness is not None else []))
            done = process.run(cmd, timeout=self.compile_timeout, cwd=self.mep_dir, confine=confine)
        except FileNotFoundError:
            return CompileFailed(f"{cmd[0]} not found: install the CUDA toolkit or set $NVCC", "")
        log = (done.stdout + done.stderr).strip()
        if done.timed_out:
            return CompileFailed(f"nvcc did not finish within {self.compile_timeout:g} s", log)
        if done.returncode != 0 or not tmp.is_file():
            tmp.unlink(missing_ok=True)
            return CompileFailed(compile_message(log), log)
        log_file.write_text(log)
        os.replace(tmp, binary)
        return Built(kernel_file, binary, key, kernel_info(log, callee(self.spec), done.seconds), log)

    # --- run ----------------------------------------------------------------------------------------

    def _env(self) -> dict:
        env = dict(os.environ, CUDA_DEVICE_ORDER="PCI_BUS_ID")   # the numbering nvidia-smi uses
        # modules loaded at start-up: the first launch's run_ms (the timing plan's probe) is the kernel's alone
        env.setdefault("CUDA_MODULE_LOADING", "EAGER")
        if self.device is not None:
            env["CUDA_VISIBLE_DEVICES"] = str(self.device)
        return env

    def _launch(self, built: Built, inputs: InputSet, out_dir: Path, extra: list[str],
                after: int | None = None) -> tuple[dict, RunOutput]:
        """One harness process; `after`: the input set of its re-check after timing (with --time)."""
        if out_dir.exists():
            shutil.rmtree(out_dir)
        out_dir.mkdir(parents=True)
        args = [built.artifact, "--data", inputs.data_dir, "--out", out_dir, *extra,
                *self._skip_flags(inputs.index, after)]
        if self.check_inputs:
            args.append(CHECK_INPUTS_FLAG)
        timeout = self.run_timeout
        confine = confined.for_run(self._level(), args, out_dir, self._file_limit(), read=self.runtime_read,
                                  programs=self.runtime_programs)
        done = process.run(args, timeout=timeout, cwd=out_dir, env=self._env(), confine=confine)
        record, fault = classify(done, timeout)
        result = RunOutput(record=record, fault=fault)
        if fault is not None:
            fault.input_set = inputs.index
            return record, result
        result.matched = self._matched(record, "digests", inputs.index)
        result.outputs, missing = self._read(out_dir, [p.name for p in self.spec.outputs if p.name not in result.matched])
        if self.check_inputs:     # a harness with digests compares the loaded ones itself (any binary: a candidate's
            # own launch renders the current template even where the MEP's harness.cu is older); an older one writes
            # them to in/
            result.inputs_changed = self._named(record, "inputs_changed", self._in_names())
            result.inputs_after, _ = self._read(out_dir / "in", self._in_names())
            result.inputs_changed += [n for n in self._fed_changed(out_dir / "in", out_dir / "fed")
                                      if n not in result.inputs_changed]
        if missing:
            result.fault = RuntimeFault("harness_error", f"the harness wrote no {', '.join(missing)} into {out_dir}",
                                        input_set=inputs.index)
        return record, result

    @staticmethod
    def _named(record: dict, key: str, known: list[str]) -> list[str]:
        """The names of list `key` of the harness's record that are among `known` (anything else is ignored)."""
        got = record.get(key)
        return [n for n in known if isinstance(got, list) and n in got]

    def _in_names(self) -> list[str]:
        """`in` buffers read from the input set (those the chain computes are checked by _fed_changed)."""
        return [p.name for p in self.spec.inputs if p.role == "in"]

    def _fed_changed(self, in_dir: Path, fed_dir: Path) -> list[str]:
        """Fed `in` buffers the kernel modified: what --check-inputs wrote back against what the chain computed."""
        names = [p.name for p in self.spec.fed if p.role == "in"]
        now, _ = self._read(in_dir, names)
        fed, _ = self._read(fed_dir, names)
        return [n for n in names if n in now and n in fed and not unchanged(fed[n], now[n])]

    @staticmethod
    def _read(folder: Path, names: list[str]) -> tuple[dict[str, np.ndarray], list[str]]:
        arrays, missing = {}, []
        for name in names:
            arr = confined.read_output(folder / f"{name}.npy")
            if arr is not None:
                arrays[name] = arr
            else:
                missing.append(name)
        return arrays, missing

    def run(self, built: Built, inputs: InputSet, out_dir: Path) -> RunOutput:
        return self._launch(built, inputs, Path(out_dir), [])[1]

    def time(self, baseline: Built, candidate: Built | None, inputs: InputSet, plan: TimingPlan,
             out_dir: Path, recheck: InputSet | None = None) -> TimingOutput:
        flags = ["--time", "--warmup", str(plan.warmup), "--reps", str(plan.reps)]
        if not plan.flush_l2:
            flags.append("--no-flush")
        result = TimingOutput(after_input_set=inputs.index, warmup=plan.warmup, reps=plan.reps)
        if plan.perturb_seed is not None and self.perturb:
            flags += [perturb.FLAG, str(plan.perturb_seed)]
        elif plan.perturb_seed is not None:
            result.notes.append(f"this harness has no {perturb.FLAG} (rendered by an older mepgen): timed launches saw "
                                f"the same inputs and there was no perturbation re-check; `mepgen mep "
                                f"{self.spec.kernel.id} --refresh` renders it again")
        checked = candidate if candidate is not None else baseline     # whose re-check goes to `after`
        extra = {}
        if recheck is not None and self.recheck_data:
            extra = {"candidate": ["--recheck-data", str(recheck.data_dir)]}
            result.after_input_set = recheck.index
        elif recheck is not None:
            result.notes.append("this harness has no --recheck-data: the re-check after timing used the timed inputs")
        in_names = self._in_names()
        timed_inputs = _Inputs(Path(inputs.data_dir))      # read only where an older harness writes in/ back
        last = last_base = None
        after_matched: list[str] = []
        # against the original's stored timing (plan.control), its control launches run in one process, the first
        control = None if plan.control is None or candidate is None else max(1, plan.control)
        base_flags = flags if control is None else ["--time", "--warmup", str(min(plan.warmup, control)), "--reps",
                                                    str(control), *flags[5:]]
        # and a candidate whose round is many launches (a kernel under ROUND_MS / MIN_REPS) runs every round in one
        # process: a process (context, inputs, outputs) costs more than such a round; a longer one keeps a process a
        # round, so that plan.stop can end the session early. The original timed alone (session.py) likewise.
        alone = candidate is None
        single = (control is not None or alone) and plan.reps > MIN_REPS
        many = ["--time", "--warmup", str(plan.warmup), "--reps", str(plan.reps * plan.rounds), *flags[5:]]
        cand_flags = many if single else flags
        if alone and single:
            base_flags = many
        for r in range(plan.rounds):
            sides = [("baseline", baseline)] if control is None or r == 0 else []
            sides += [("candidate", candidate)] if candidate is not None else []
            for side, built in sides:
                folder = Path(out_dir) / f"round{r}-{side}"
                record, out = self._launch(built, inputs, folder, (base_flags if side == "baseline" else cand_flags)
                                           + extra.get(side, []), result.after_input_set if side in extra
                                           else inputs.index)
                if out.fault is not None:
                    if side == "baseline":
                        out.fault.message = f"baseline failed while timing: {out.fault.message}"
                    result.fault = out.fault
                    return result
                if side == "baseline":
                    last_base = folder
                result.perturbed_buffers = int(record.get("perturbed") or 0)
                times = [float(t) for t in record.get("times_ms", [])]
                if single and (side == "candidate" or alone):      # the process's launches, a round per plan.reps
                    (result.candidate_rounds if side == "candidate" else result.baseline_rounds).extend(
                        times[i:i + plan.reps] for i in range(0, len(times), plan.reps))
                else:
                    (result.baseline_rounds if side == "baseline" else result.candidate_rounds).append(times)
                result.device = record.get("device", result.device)
                result.l2_bytes = record.get("l2_bytes", result.l2_bytes)
                if built is checked:
                    if record.get("sync_ms") is not None:
                        result.sync_ms.append(float(record["sync_ms"]))
                    after_matched = self._matched(record, "after_digests", result.after_input_set)
                    if self.check_inputs:
                        result.inputs_changed += [n for n in self._named(record, "after_inputs_changed", in_names)
                                                  if n not in result.inputs_changed]
                    result.inputs_changed += [n for n, a in out.inputs_after.items()
                                              if n not in result.inputs_changed and not unchanged(timed_inputs[n], a)]
                    result.inputs_changed += [n for n in out.inputs_changed if n not in result.inputs_changed]
                    last = folder
            if single or plan.stop is not None and candidate is not None and plan.stop(result.candidate_rounds):
                break
        if last is not None and result.perturbed_buffers and candidate is not None:
            names = [p.name for p in self.spec.outputs]
            result.perturbed, missing = self._read(last / "perturbed", names)
            result.perturbed_ref, missing_ref = self._read(last_base / "perturbed", names)
            if missing or missing_ref:
                result.fault = RuntimeFault("harness_error", "the harness wrote no perturbed/"
                                            + ", ".join(missing or missing_ref), input_set=inputs.index)
                return result
        if last is not None:
            result.after_matched = after_matched
            result.after, missing = self._read(last / "after", [p.name for p in self.spec.outputs
                                                                if p.name not in after_matched])
            if missing:
                result.fault = RuntimeFault("harness_error", f"the harness wrote no after/{', '.join(missing)}",
                                            input_set=inputs.index)
            if self.check_inputs:
                result.inputs_after, _ = self._read(last / "after" / "in", in_names)
                fed = last / "after" / "fed" if (last / "after" / "fed").is_dir() else last / "fed"
                result.inputs_changed += [n for n in self._fed_changed(last / "after" / "in", fed)
                                          if n not in result.inputs_changed]
        return result
