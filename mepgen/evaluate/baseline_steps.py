"""The Evaluator's steps on the original kernel (a part of class Evaluator, evaluator.py): its build, the input
sets and reference outputs (prepare), its measured times and what the phases left will take under a time limit,
and the original as a candidate of its own (baseline_result). The candidates' side, the verdicts and the timing
plans stay in evaluator.py; `self` here is the Evaluator.
"""
from __future__ import annotations

import dataclasses
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ..errors import MepgenError
from . import device_compare, launchcfg
from . import peaks as peaks_mod
from . import plan as plan_mod
from . import sandbox, session
from .backend import Built, InputSet, TimingPlan
from .decide import timer_escape
from .results import CompileFailed, EvalResult, Impossible
from .store import Store, digest
from .verify import reference_problem, written_region

KERNEL_FILE = "kernel.cu"


class _LazyInputs(dict):
    """Input set k's arrays, read from the store on first use: the pycuda worker compares the inputs itself
    (inputs_changed), so on that backend the evaluator never holds a copy of every input set."""

    def __init__(self, store: Store):
        super().__init__()
        self.store = store

    def __missing__(self, k: int) -> dict[str, np.ndarray]:
        self[k] = self.store.load_inputs(k)
        return self[k]


class BaselineSteps:
    """The original kernel's steps of the Evaluator (mixed into it)."""

    def compile_baseline(self) -> Built:
        """Build the original kernel.cu; its failure is the MEP's problem, so it is a user error."""
        sandbox.resolve(self.opts.sandbox, log=_say)         # which confinement: said once, when it starts to matter
        built = self.workers[0].backend.compile(self.original)
        if isinstance(built, CompileFailed):
            raise MepgenError(f"the MEP's own {KERNEL_FILE} does not compile:\n{built.message}", exit_code=3)
        for w in self.workers:
            w.baseline = built if w is self.workers[0] else w.backend.compile(self.original)
        return built

    def prepare(self) -> None:
        """Inputs, baseline build and references; MEP problems raise MepgenError with the evidence."""
        if self.workers[0].baseline is None:
            self.compile_baseline()
        self.require_gpu()
        missing = [k for k in range(self.k) if not self.store.has_input_set(k)]
        self.todo["gen"] = len(missing)
        if missing:       # the first alone (its time says what the others take), the others side by side
            mib = self.store.set_bytes() / 2**20
            if mib >= 64:
                self.log(f"making {len(missing)} input set(s) of {mib:.0f} MiB")
            t0 = time.monotonic()
            self.store.input_set(missing[0])
            self.gen_s, self.todo["gen"] = time.monotonic() - t0, len(missing) - 1
            self.check_time()
            if missing[1:]:
                # numpy draws, casts and writes free the GIL
                with ThreadPoolExecutor(min(len(missing) - 1, os.cpu_count() or 1)) as pool:
                    list(pool.map(self.store.input_set, missing[1:]))
            self.todo["gen"] = 0
        self.sets = [InputSet(k, self.store.input_set(k)) for k in range(self.k)]
        self.inputs = _LazyInputs(self.store)     # read only where a backend hands inputs back to compare
        w = self.workers[0]
        for s in self.sets:
            ref = self.store.load_ref(self.ref_key, s.index)
            if ref is None:
                self.check_time()
                self.log(f"computing reference outputs for input set {s.index}")
                t0 = time.monotonic()
                out = w.backend.run(w.baseline, s, self.store.work_dir / "reference" / f"set{s.index}")
                if out.fault is not None:
                    hint = "" if self.sandbox == "off" or out.fault.kind not in ("cuda_error", "crash") else (
                        f" (it ran in the sandbox, level {self.sandbox}: if the GPU or a library is out of its reach "
                        "there, `evaluate.sandbox: off` tells; docs/sandbox.md)")
                    raise MepgenError(f"the original kernel fails on input set {s.index}: {out.fault.kind}: "
                                      f"{out.fault.message}{hint}", exit_code=3)
                poisoned = {o.name: o.role == "out" for o in self.spec.outputs}
                for name, arr in out.outputs.items():
                    problem = reference_problem(name, arr, s.index, poisoned.get(name, True))
                    if problem:
                        raise MepgenError(problem, exit_code=3)
                self._saw_baseline(out)
                self.store.save_ref(self.ref_key, s.index, out.outputs,
                                    {"seed": self.spec.verify.seed + s.index, "backend": self.backend_name,
                                     "device": out.record.get("device", "")})
                ref = out.outputs
                self._saw_run(time.monotonic() - t0)
            self.todo["ref"] -= 1
            self.refs[s.index] = ref
            for name, arr in ref.items():
                if name not in {o.name for o in self.spec.outputs if o.role == "out"}:
                    continue            # only an out buffer is poisoned: an inout one's elements are all data
                region = written_region(name, arr, s.index)
                if region and region not in self.ref_notes:
                    self.log(region)
                    self.ref_notes.append(region)
        if self.opts.verify_on_device:       # the pycuda worker compares outputs on the GPU (device_compare.py)
            refs_of = lambda k: {p.name: self.store.ref_dir(self.ref_key, k) / f"{p.name}.npy"
                                 for p in self.spec.outputs}
            for worker in (w for w in self.workers if hasattr(w.backend, "use_references")):
                worker.backend.use_references(refs_of, device_compare.rules_for(self.spec))
        stale = launchcfg.stale_harness(self.spec, self.mep_dir)
        for worker in self.workers:
            if stale and stale not in worker.notes:
                worker.notes.append(stale)
            worker.notes += [n for n in self.ref_notes if n not in worker.notes]
            if self.opts.check_peaks:
                try:
                    worker.peaks = peaks_mod.get(worker.device, self.store.build_dir / "peaks")
                except RuntimeError as e:
                    worker.notes.append(f"no peak check: {e}")

    # --- what the original's phases take (--time-limit) ---------------------------------------------

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
        """Seconds the baseline's phases not yet run will take, from what was measured, and the facts used."""
        t = self.todo
        mib = self.store.set_bytes() / 2**20
        facts = [f"{self.k} input set(s) of {mib:.0f} MiB"]
        left = t["gen"] * (self.gen_s or 0.0)
        if self.gen_s is not None and t["gen"]:
            facts.append(f"{self.gen_s:.1f} s to make one")
        if self.run_s is not None:
            left += (t["ref"] + t["verify"]) * self.run_s
            facts.append(f"{self.run_s:.1f} s per checked run")
        if self.first_ms is not None:
            facts.append(f"{plan_mod.fmt_ms(self.first_ms)} per launch")
            if t["time"]:
                plan = self._baseline_plan()
                left += plan_mod.timing_seconds(plan, self.first_ms, self.run_s or 0.0, 1, self.backend_name == "native")
                facts.append(f"{plan.rounds * plan.reps + plan.warmup} timed launches")
        return left, ", ".join(facts)

    def candidate_s(self) -> float | None:
        """What one candidate will take (runs on every input set, timing against the original, re-checks),
        from the original's measured run and launch; None before anything was measured."""
        if self.run_s is None or self.first_ms is None:
            return None
        plan = self._baseline_plan()
        native = self.backend_name == "native"
        if self.opts.baseline_once:        # against the stored timing: the original's side is its control launches
            plan = dataclasses.replace(plan, control=plan_mod.controls(self.first_ms))
        timing = plan_mod.timing_seconds(plan, self.first_ms, self.run_s, 2, native, self.first_ms)
        rechecks = 0 if native or not self.opts.perturb else 2
        build = self.workers[0].baseline.info.seconds if self.workers[0].baseline is not None else 0.0
        return self.k * self.run_s + timing + rechecks * self.run_s + (build or 0.0)

    def check_time(self) -> None:
        """Raise plan.TooShort, before the next phase starts, when the baseline cannot finish in the limit."""
        if self.deadline is None:
            return
        start, seconds = self.deadline
        elapsed = time.monotonic() - start
        left, facts = self.baseline_left_s()
        if elapsed + left > seconds:
            need = elapsed + left
            raise plan_mod.TooShort(plan_mod.need_line(self.spec.kernel.name, need, facts,
                                                       need + 5 * (self.candidate_s() or left / 2)))

    def baseline_first_ms(self) -> float | None:
        """The original's first-launch time; measured with one run when no run of it was seen yet."""
        if self.first_ms is None and self.by_time and self.sets:
            w = self.workers[0]
            self._saw_baseline(w.backend.run(w.baseline, self.sets[0], self.store.work_dir / "probe"))
        return self.first_ms

    def baseline_result(self) -> EvalResult:
        """The original kernel as a candidate of its own: re-verified (run to run), timed alone, peaks checked."""
        res = EvalResult(name="baseline", key=self.result_key(self.original_text), backend=self.backend_name,
                         kernel_sha256=digest("kernel", self.original_text), input_sets=self.k, sandbox=self.sandbox)
        worker = self.workers[0]
        res.compile = worker.baseline.info
        start = time.monotonic()
        work = self.store.work_dir / "baseline"
        for s in self.sets:
            self.check_time()
            if (self.run_s or 0.0) > 3:
                self.log(f"verifying the original on input set {s.index} (about {self.run_s:.0f} s)")
            res.stage = "run"
            t0 = time.monotonic()
            out = worker.backend.run(worker.baseline, s, work / f"set{s.index}")
            if out.fault is not None:
                res.status, res.fault = "runtime_fault", out.fault
                return self._done(res, start)
            self._saw_baseline(out)
            res.stage = "verify"
            wrong = self._wrong(out.outputs, s.index, "run", out.inputs_after, out.inputs_changed, out.matched)
            self._saw_run(time.monotonic() - t0)
            self.todo["verify"] -= 1
            if wrong:
                res.status, res.wrong = "wrong_result", wrong
                res.notes.append("the original kernel does not reproduce its own outputs: a race, or a tolerance "
                                 "in mep.yaml that is too tight")
                return self._done(res, start)
        res.stage = "time"
        self.check_time()
        plan = session.baseline_plan(self)      # alone: no perturbation re-check (nothing to compare it with)
        est = plan_mod.timing_seconds(plan, self.first_ms or 0.0, self.run_s or 0.0, 1, self.backend_name == "native")
        self.log(f"timing the original for about {est:.0f} s: {plan.how}")
        stored, t = session.time_baseline(self, worker, work / "time")     # kept: candidates are timed against it
        self.todo["time"] = 0
        if self._failed_timing(res, t):
            return self._done(res, start)
        res.device = t.device
        res.timed, impossible = self._timed(t.baseline_rounds, None, t.l2_bytes, worker)
        res.timed.plan = plan.how
        impossible = impossible or timer_escape(res.timed.median_ms, t.sync_ms)
        if self.floor_broken and self.floor_broken not in res.notes:
            res.notes.append(self.floor_broken)
        if impossible:
            res.status, res.impossible = "impossible", Impossible(impossible)
            res.notes.append("the baseline beats the measured peak: check work.bytes / work.flops in mep.yaml")
        else:
            res.stage, res.status = "done", "ok"
        res.notes += worker.notes
        if self.opts.profile:
            res.profile = self.profile(self.original, worker)
        return self._done(res, start)



def _say(line: str) -> None:
    """Lines every user sees once (which sandbox runs the candidates), whatever the verbosity."""
    print(f"mepgen: {line}", file=sys.stderr)
