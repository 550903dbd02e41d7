"""The evaluation pipeline of one MEP: lint -> compile -> run -> verify -> time, against the original kernel.

`prepare()` makes the input sets, builds the original kernel.cu (the baseline) and computes its reference
outputs once per input set (cached by content; references.py). `check(candidate)` then takes a built candidate through
the GPU stages on one backend; batch.py spreads many candidates over CPU cores (compiles) and GPUs.
"""
from __future__ import annotations

import dataclasses
import sys
import time
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from ..errors import MepgenError
from ..spec import Launch, Spec
from . import estimate, launchcfg
from . import peaks as peaks_mod
from .. import perturb
from . import plan as plan_mod
from . import profile as profile_mod
from . import baseline, references, rules, sandbox, session
from .backend import Built, InputSet, TimingPlan
from .decide import MIN_GAIN, decide, round_range, summarize, timer_escape
from .devices import choose_backend, list_gpus, make_backend
from .results import CompileFailed, EvalResult, Impossible, Mismatch, RuntimeFault, Timed, WrongResult
from .store import Store, digest
from .recheck import recheck
from .verify import compare, tolerance_for, unchanged

KERNEL_FILE = "kernel.cu"
RESULT_VERSION = 1


@dataclass
class Options:
    backend: str = "auto"                 # native | pycuda | auto
    input_sets: int | None = None         # default: verify.input_sets of mep.yaml
    warmup: int | None = None             # count-based timing: warm-up launches (default: timing.warmup)
    reps: int | None = None               # count-based timing: launches per round and side (default: timing.reps)
    timing: str = "time"                  # time: counts from a first measured launch (plan.py); count: reps/warmup
    round_ms: float = plan_mod.ROUND_MS   # time-based: kernel time per round and side
    perturb: bool = True                  # inputs change between timed launches; perturbation re-check after
    rounds: int = 3                       # baseline/candidate alternations
    flush_l2: bool | None = None          # default: timing.flush_l2
    min_gain: float = MIN_GAIN
    run_timeout: float = 60.0
    compile_timeout: float = 300.0
    profile: bool = False
    jobs: int = 0                         # parallel compiles; 0: one per CPU core
    devices: list[int] | None = None      # GPUs to use; None: all that nvidia-smi lists
    use_cache: bool = True
    check_peaks: bool = True
    sandbox: str = "auto"                 # auto | require | off (config evaluate.sandbox; sandbox.py)
    baseline_once: bool = True            # the original timed once per run, candidates against it (session.py)
    verify_on_device: bool = True         # outputs compared on the GPU: pycuda device_compare, native output_digest


@dataclass
class Worker:
    """One GPU and the backend that owns it, with the baseline built for that backend."""
    device: int | None
    backend: object
    baseline: Built | None = None
    peaks: peaks_mod.Peaks | None = None
    notes: list[str] = field(default_factory=list)
    stored: session.Stored | None = None      # the original's timing on this GPU (session.py)


class Evaluator:
    def __init__(self, spec: Spec, mep_dir: Path, options: Options | None = None,
                 log: Callable[[str], None] | None = None):
        self.spec = spec
        self.mep_dir = Path(mep_dir).resolve()
        self.opts = options or Options()
        self.log = log or (lambda msg: None)
        self.store = Store(self.mep_dir, spec)
        self.original = self.mep_dir / KERNEL_FILE
        if not self.original.is_file():
            raise MepgenError(f"{self.original} is missing: run `mepgen mep {spec.kernel.id}` first")
        self.original_text = self.original.read_text(errors="replace")
        self.backend_name, self.backend_why = choose_backend(self.opts.backend, spec)
        self.k = self.opts.input_sets or spec.verify.input_sets
        if self.k < 1:
            raise MepgenError("at least one input set is needed (verify.input_sets or --input-sets)")
        t = spec.timing
        self.by_time = self.opts.timing == "time" and self.opts.reps is None and self.opts.warmup is None
        flush = t.flush_l2 if self.opts.flush_l2 is None else self.opts.flush_l2
        self.plan = plan_mod.by_count(self.opts.warmup if self.opts.warmup is not None else t.warmup,
                                      self.opts.reps or t.reps, max(1, self.opts.rounds), flush)
        self.first_ms: float | None = None    # the original's first launch (time-based plans start from it)
        self.floor_broken: str | None = None  # why the peak check is off for this MEP (_timed)
        self.spent: dict[str, float] = {}      # the baseline's phases so far, seconds (said when it cannot finish)
        probing = time.monotonic()
        self.sandbox = sandbox.resolve(self.opts.sandbox)      # (said with the first build: compile_baseline)
        self._spend("sandbox", probing)
        gpus, self.no_gpu_reason = list_gpus()
        self.gpus = [d for d in gpus if self.opts.devices is None or d in self.opts.devices]
        devices: list[int | None] = list(self.gpus) or [None]
        self.workers = [Worker(d, make_backend(self.backend_name, spec, self.mep_dir, self.store.build_dir, d,
                                               self.opts.run_timeout, self.opts.compile_timeout)) for d in devices]
        for w in self.workers:
            w.backend.sandbox_level = self.sandbox
        self.sets: list[InputSet] = []
        self.refs: dict[int, dict[str, np.ndarray]] = {}
        self.ref_notes: list[str] = []      # outputs the original writes only in part (verify.written_region)
        self.inputs: dict[int, dict[str, np.ndarray]] = {}
        self.ref_key = digest("reference", self.original_text, spec.to_dict())
        self.gpu_ids = [peaks_mod.gpu_identity(d) for d in self.gpus]
        # --time-limit (optimize): what was measured so far, to start no phase that cannot finish in time
        self.deadline: tuple[float, float] | None = None     # (start, seconds), time.monotonic()
        self.gen_s: float | None = None       # making one input set
        self.run_s: float | None = None       # one run of the original: launch, outputs back, checks
        self.runs_seen = 0
        self.todo = {"gen": self.k, "ref": self.k, "verify": self.k, "time": 1}
        self.warming: list = []               # the workers' start, begun by warm_ahead (prepare waits for it)

    # --- set-up -------------------------------------------------------------------------------------

    @property
    def has_gpu(self) -> bool:
        return bool(self.gpus)

    def require_gpu(self) -> None:
        if not self.gpus:
            raise MepgenError(f"no CUDA device: {self.no_gpu_reason}", exit_code=4)

    def compile_baseline(self) -> Built:
        """Build the original kernel.cu; its failure is the MEP's problem, so it is a user error."""
        sandbox.resolve(self.opts.sandbox, log=_say)         # which confinement: said once, when it starts to matter
        t0 = time.monotonic()
        built = self.workers[0].backend.compile(self.original)
        self._spend("build", t0)
        if isinstance(built, CompileFailed):
            raise MepgenError(f"the MEP's own {KERNEL_FILE} does not compile:\n{built.message}", exit_code=3)
        for w in self.workers:
            w.baseline = built if w is self.workers[0] else w.backend.compile(self.original)
        return built

    def warm_ahead(self) -> None:
        """Start the workers now, on threads of their own, where a caller has more to set up before `prepare`
        (optimize: the evaluation pipeline, its rule workers, the first round's proposing): the pycuda worker's start
        (a Python, pycuda, a CUDA context: about a second) then overlaps that too. Once only; prepare waits for it."""
        if self.warming or not self.gpus:
            return
        ours = [w for w in self.workers if hasattr(w.backend, "warm")]
        if ours:
            pool = ThreadPoolExecutor(len(ours), thread_name_prefix="mepgen-warm")
            self.warming = [pool.submit(w.backend.warm) for w in ours]
            pool.shutdown(wait=False)

    def prepare(self) -> None:
        """Inputs, baseline build and references; MEP problems raise MepgenError with the evidence."""
        if self.workers[0].baseline is None and not self.gpus:
            self.compile_baseline()          # its failure first: it is the MEP's, the missing GPU the machine's
        self.require_gpu()
        building = None
        if self.workers[0].baseline is None:      # nvcc builds the original while the input sets are made,
            self.warm_ahead()                     # and the workers start (pycuda: ~1 s), unless a caller began it
            with ThreadPoolExecutor(1) as pool:
                building = pool.submit(self.compile_baseline)
                references.make_inputs(self)
                wait([building])
                waited = time.monotonic()        # what the workers' start adds after the build and the inputs
                wait(self.warming)
                if self.warming:
                    self._spend("worker", waited)
            building.result()        # the build's MepgenError, when the original does not compile
        else:
            references.make_inputs(self)
            wait(self.warming)           # a start begun by warm_ahead: done before the first run
        references.compute(self)        # the original's outputs on every input set (references.py)
        references.equip(self)

    # --- timing plans -------------------------------------------------------------------------------

    def _spend(self, phase: str, since: float) -> None:
        self.spent[phase] = round(self.spent.get(phase, 0.0) + time.monotonic() - since, 3)

    def _saw_baseline(self, out) -> None:
        ms = out.record.get("run_ms") if out.record else None
        if ms is not None and ms > 0:
            self.first_ms = float(ms) if self.first_ms is None else min(self.first_ms, float(ms))

    def _saw_run(self, seconds: float) -> None:
        """The latest run's wall time, from the second run on: the first also starts the backend's worker
        (process, CUDA context), which a short kernel's estimate must not multiply."""
        if self.runs_seen:
            self.run_s = seconds
        self.runs_seen += 1

    def set_time_limit(self, start: float, seconds: float) -> None:
        """Start no phase of the baseline that cannot finish `seconds` after `start` (time.monotonic())."""
        self.deadline = (start, seconds)

    def _baseline_plan(self) -> TimingPlan:
        p = self.plan
        return plan_mod.by_time(self.first_ms, p.rounds, p.flush_l2, self.opts.round_ms) \
            if self.by_time and self.first_ms is not None else p

    def baseline_left_s(self) -> tuple[float, str]:
        return estimate.baseline_left_s(self)

    def candidate_s(self) -> float | None:
        return estimate.candidate_s(self)

    def check_time(self) -> None:
        estimate.check_time(self)

    def baseline_first_ms(self) -> float | None:
        """The original's first-launch time; measured with one run when no run of it was seen yet."""
        if self.first_ms is None and self.by_time and self.sets:
            w = self.workers[0]
            self._saw_baseline(w.backend.run(w.baseline, self.sets[0], self.store.work_dir / "probe"))
        return self.first_ms

    def plan_for(self, seed_text: str | None, candidate_ms: float | None = None) -> TimingPlan:
        """The timing plan of one session: time-based from the slower first launch of the original and the
        candidate (count-based when asked or when no launch was timed), with the perturbation seed of the text."""
        p = self.plan
        if self.by_time:
            known = [m for m in (self.baseline_first_ms(), candidate_ms) if m is not None]
            if known:
                p = plan_mod.by_time(max(known), p.rounds, p.flush_l2, self.opts.round_ms)
            else:
                p = dataclasses.replace(p, how=p.how + " (no launch was timed to plan from)")
        seed = perturb.seed_for(seed_text, self.ref_key) if self.opts.perturb and seed_text is not None else None
        return dataclasses.replace(p, perturb_seed=seed)

    def plan_key(self) -> list:
        """What decides the plan, for result keys (a time-based plan's counts are measured, not given)."""
        p = self.plan
        timing = ["time", self.opts.round_ms, plan_mod.MIN_REPS] if self.by_time else [p.warmup, p.reps]
        return [*timing, p.rounds, p.flush_l2, self.opts.perturb] + (["once"] if self.opts.baseline_once else [])

    # --- keys and lint ------------------------------------------------------------------------------

    def result_key(self, text: str, launch: Launch | None = None, flags=()) -> str:
        o = self.opts
        parts = ["result", RESULT_VERSION, text, self.ref_key, self.backend_name, self.gpu_ids,
                 [self.k, *self.plan_key(), o.min_gain, o.profile]]
        if launch is not None:     # only then: the keys of plain variants stay what they were
            parts.append(launchcfg.as_dict(launch))
        if flags:                  # likewise: extra nvcc flags make another candidate
            parts.append({"nvcc_flags": list(flags)})
        return digest(*parts)

    def new_result(self, name: str, kernel_file: Path, launch: Launch | None = None, flags=(), lint=True) -> EvalResult:
        """A fresh record for a candidate; `launch`: its own launch configuration (launchcfg.launch_from); `flags`:
        extra nvcc flags it is built with; `lint`: the rules checked now, else later (`lint`: batch.py)."""
        text = Path(kernel_file).read_text(errors="replace")
        res = EvalResult(name=name, key=self.result_key(text, launch, flags), backend=self.backend_name,
                         kernel_sha256=digest("kernel", text), input_sets=self.k, sandbox=self.sandbox)
        if launch is not None:
            d = launchcfg.as_dict(launch)
            res.notes.append(f"own launch: grid ({', '.join(d['grid'])}), block ({', '.join(d['block'])}), "
                             f"shared memory {d['shared_mem']}")
        if flags:
            res.notes.append(f"extra nvcc flags: {' '.join(flags)}")
        return self.lint(res, text) if lint else res

    def lint_inputs(self) -> tuple:
        """What rules.check compares a candidate's text with: (original, chain, target, libclang flags)."""
        return (self.original_text, [c.kernel for c in self.spec.chain], self.spec.kernel.name,
                rules.parse_args(self.spec, self.mep_dir))

    def lint(self, res: EvalResult, text: str, check=None) -> EvalResult:
        """The rules on the text (`check`: rules.check elsewhere: lint_workers.py); a violation rejects it."""
        res.rules = self._phase_of(res, "lint", lambda: (check or (lambda t: rules.check(t, *self.lint_inputs())))(text))
        if res.rules:
            res.status, res.stage = "rejected_by_rules", "lint"
        return res

    def compile(self, res: EvalResult, kernel_file: Path, launch: Launch | None = None, flags=()) -> Built | None:
        """Compile stage (thread-safe); None when it failed (recorded in `res`)."""
        res.stage = "compile"
        be = self.workers[0].backend
        extra = {k: v for k, v in (("launch", launch), ("flags", tuple(flags))) if v}
        built = self._phase_of(res, "compile", lambda: be.compile(Path(kernel_file), **extra))
        if isinstance(built, CompileFailed):
            res.status, res.compile_failed = "compile_failed", built
            return None
        res.compile = built.info
        built.launch, built.flags = launch, tuple(flags)
        return built

    # --- the GPU stages -----------------------------------------------------------------------------

    def _wrong(self, outputs: dict, k: int, phase: str, inputs_after: dict,
               inputs_changed: list[str] = (), matched=()) -> WrongResult | None:
        """`matched`: outputs the backend found equal to the references itself (verify.compare's rule, on the GPU)."""
        mismatches: list[Mismatch] = []
        for p in (p for p in self.spec.outputs if p.name not in matched):
            ref = self.refs[k][p.name]
            got = outputs.get(p.name)
            if got is None:
                mismatches.append(Mismatch(p.name, k, phase, int(ref.size), int(ref.size), note="no output written"))
                continue
            m = compare(p.name, got, ref, tolerance_for(self.spec, p.name), k, phase, p.role == "out")
            if m:
                mismatches.append(m)
        changed = [name for name, arr in inputs_after.items()
                   if name in self.inputs[k] and not unchanged(self.inputs[k][name], arr)] if inputs_after else []
        changed += [name for name in inputs_changed if name not in changed]
        return WrongResult(mismatches, changed) if mismatches or changed else None

    def check(self, res: EvalResult, built: Built, worker: Worker) -> EvalResult:
        """Run, verify on every input set, time interleaved with the baseline, re-check, decide."""
        start = time.monotonic()
        work = self.store.work_dir / f"w{worker.device if worker.device is not None else 0}"
        be = worker.backend
        first_ms = None
        res.stage = "run"
        load = getattr(be, "load", None)      # the pycuda worker: cubin and input sets onto the GPU, apart
        fault = self._phase_of(res, "load", lambda: load(built, *self.sets)) if load else None
        if fault is not None:
            res.status, res.fault = "runtime_fault", fault
            return self._done(res, start)
        mark = time.monotonic()
        for s in self.sets:
            res.stage = "run"
            out = be.run(built, s, work / f"set{s.index}")
            if out.fault is not None:
                res.status, res.fault = "runtime_fault", out.fault
                return self._done(res, start)
            res.device = out.record.get("device", res.device)
            if out.record.get("run_ms"):
                first_ms = min(first_ms or float("inf"), float(out.record["run_ms"]))
            res.stage = "verify"
            wrong = self._wrong(out.outputs, s.index, "run", out.inputs_after, out.inputs_changed, out.matched)
            if wrong:
                res.status, res.wrong = "wrong_result", wrong
                return self._done(res, start)
            if out.outputs and hasattr(be, "recheck_references"):   # the GPU's references disagreed with ours
                be.recheck_references(s.index, list(out.outputs))
        mark = self._phase(res, "verify", mark)
        res.stage = "time"
        recheck = self.sets[1] if len(self.sets) > 1 else None
        text = Path(built.kernel_file).read_text(errors="replace")
        if self.opts.baseline_once and worker.stored is not None:
            plan = session.candidate_plan(self, text, first_ms, worker.stored)
            est_s = plan_mod.timing_seconds(plan, first_ms or worker.stored.median_ms, self.run_s or 0.0, 2,
                                            self.backend_name == "native", worker.stored.median_ms)
        else:
            plan = self.plan_for(text, first_ms)
            est_s = plan_mod.timing_seconds(plan, max(first_ms or 0.0, self.first_ms or 0.0), self.run_s or 0.0, 2,
                                            self.backend_name == "native")
        left = self.deadline[1] - (time.monotonic() - self.deadline[0]) if self.deadline else None
        if left is not None and est_s > left:      # a session that cannot finish in the time limit is not started
            res.status = "not_timed"
            res.fault = RuntimeFault("time_limit", f"not timed: timing it would take about {est_s:.0f} s ({plan.how}), "
                                                f"{max(left, 0):.0f} s left in the time limit", input_set=self.sets[0].index)
            return self._done(res, start)
        if est_s > 3:       # a phase longer than a few seconds says what it is doing
            self.log(f"{res.name}: timing for about {est_s:.0f} s ({plan.how})")
        if self.opts.baseline_once:
            sess = session.time_candidate(self, worker, built, text, first_ms, recheck, work / "time")
            t, base_rounds, plan = sess.timing, sess.baseline_rounds, sess.plan
            res.notes += sess.notes
        else:
            t = be.time(worker.baseline, built, self.sets[0], plan, work / "time", recheck=recheck)
            base_rounds = t.baseline_rounds
        mark = self._phase(res, "time", mark)
        res.notes += t.notes
        if self._failed_timing(res, t) or self._perturbation_failed(res, t, plan):
            return self._done(res, start)
        res.device = t.device or res.device
        if self.judge_times(res, t.candidate_rounds, base_rounds, t, plan, worker):
            return self._done(res, start)
        res.stage, res.status = "done", "ok"
        if self.opts.profile:
            res.profile = self.profile(Path(built.kernel_file), worker, built.launch, built.flags)
        return self._done(res, start)

    def judge_times(self, res: EvalResult, rounds, base_rounds, t, plan: TimingPlan, worker: Worker) -> str | None:
        """res.timed from the timed rounds; where the time is impossible (beats the peaks or the timer), the reason,
        and res says so."""
        res.timed, impossible = self._timed(rounds, base_rounds, t.l2_bytes, worker)
        res.timed.plan = plan.how
        impossible = impossible or timer_escape(res.timed.median_ms, t.sync_ms)
        if self.floor_broken and self.floor_broken not in res.notes:
            res.notes.append(self.floor_broken)
        if impossible:
            res.status, res.impossible = "impossible", Impossible(impossible)
        return impossible

    def _failed_timing(self, res: EvalResult, t) -> bool:
        """Record a fault during timing, or wrong outputs in the re-check after it; True when either happened."""
        if t.fault is not None:
            res.status, res.fault = "runtime_fault", t.fault
            return True
        wrong = self._wrong(t.after, t.after_input_set, "after", t.inputs_after, t.inputs_changed, t.after_matched)
        if wrong:
            res.status, res.wrong = "wrong_result", wrong
            return True
        return False

    def _perturbation_failed(self, res: EvalResult, t, plan: TimingPlan) -> bool:
        """The perturbation re-check (recheck.recheck); True (recorded in `res`) when the candidate failed it."""
        if plan.perturb_seed is None:
            return False
        wrong, notes = recheck(self.spec, self.refs[self.sets[0].index], t, self.sets[0].index)
        res.notes += notes
        if wrong is not None:
            res.status, res.wrong = "wrong_result", wrong
            return True
        return False

    def _timed(self, cand: list[list[float]], base: list[list[float]] | None, l2: int | None,
               worker: Worker) -> tuple[Timed, str | None]:
        """The timing record and, when the time beats the GPU's measured peaks, why that is impossible."""
        c = summarize(cand)
        timed = Timed(median_ms=c.median_ms, spread=c.spread, min_ms=c.min_ms, max_ms=c.max_ms, launches=c.launches,
                      rounds=len(c.round_medians_ms), round_medians_ms=c.round_medians_ms)
        if base:
            d = decide(base, cand, self.opts.min_gain)
            b = summarize(base)
            timed.baseline_median_ms, timed.baseline_round_medians_ms = b.median_ms, b.round_medians_ms
            timed.speedup, timed.noise, timed.decision, timed.why = d.speedup, d.noise, d.decision, d.why
        else:
            timed.noise = round_range(c.round_medians_ms)
            timed.why = f"baseline {c.median_ms:.4g} ms; repeated medians within {timed.noise:.1%} of each other"
        work = (self.spec.size(self.spec.work.bytes) if self.spec.work.bytes else None,
                self.spec.size(self.spec.work.flops) if self.spec.work.flops else None)
        a = peaks_mod.achieved(*work, c.median_ms, worker.peaks, l2)
        timed.gbps, timed.gflops, timed.pct_peak_bw, timed.pct_peak_flops = a.gbps, a.gflops, a.pct_bw, a.pct_flops
        timed.pct_stream = a.pct_stream
        if a.impossible and self.floor_broken is None:
            # work.bytes/flops is an estimate (every buffer moved once): a kernel that touches only the elements
            # an index buffer names moves less. When the original itself beats the floor, it is no floor.
            orig_ms = summarize(base).median_ms if base else c.median_ms
            if base is None or peaks_mod.achieved(*work, orig_ms, worker.peaks, l2).impossible:
                self.floor_broken = (f"the original kernel itself beats the floor work.bytes/work.flops imply "
                                     f"({a.impossible}): the estimate is no lower bound for this kernel, so the peak "
                                     "check is off; verification and the timer checks still apply")
        if a.impossible and self.floor_broken:
            return timed, None
        return timed, a.impossible

    @staticmethod
    def _phase(res: EvalResult, name: str, since: float) -> float:
        """Add the seconds since `since` to phase `name` of `res` (where a candidate's time goes); now."""
        now = time.monotonic()
        res.phases[name] = round(res.phases.get(name, 0.0) + now - since, 4)
        return now

    @classmethod
    def _phase_of(cls, res: EvalResult, name: str, call):
        since = time.monotonic()
        try:
            return call()
        finally:
            cls._phase(res, name, since)

    def _done(self, res: EvalResult, start: float) -> EvalResult:
        res.seconds = round(res.seconds + time.monotonic() - start, 3)
        spent = sum(v for k, v in res.phases.items() if k not in ("lint", "compile", "checks"))   # before check()
        res.phases["checks"] = round(max(0.0, res.seconds - spent), 4)
        return res

    def profile(self, kernel_file: Path, worker: Worker, launch: Launch | None = None, flags=()) -> dict:
        """Nsight Compute numbers for the kernel file (profile.of_candidate: a native build with its launch)."""
        return profile_mod.of_candidate(self, kernel_file, worker, launch, flags)

    def baseline_result(self) -> EvalResult:
        """The original kernel as a candidate of its own: re-verified (run to run), timed alone, peaks checked."""
        return baseline.result(self)

    def close(self) -> None:
        wait(self.warming)          # a start begun by warm_ahead ends before its worker is closed (no race on it)
        for w in self.workers:
            w.backend.close()


def _say(line: str) -> None:
    """Lines every user sees once (which sandbox runs the candidates), whatever the verbosity."""
    print(f"mepgen: {line}", file=sys.stderr)

