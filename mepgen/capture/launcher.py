"""Run the application once under the injector, and say in one line why nothing was captured when that happens.

The application runs unchanged, in the caller's folder, with two more environment variables:
`CUDA_INJECTION64_PATH` (the driver loads the injector at CUDA initialization) and `MEPGEN_CAPTURE_PLAN`. Each
process the application starts writes its own `status.<pid>.json` (per target: launches matched, recorded or
refused and why); the first process to reach a target's chosen launch claims it and writes `k<T>/capture.json`
and the raw dumps.
"""
from __future__ import annotations

import difflib
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import MepgenError
from .names import split_demangled
from .plan import CapturePlan, RunPlan


@dataclass
class AppRun:
    command: list[str]
    exit_code: int
    wall_s: float
    statuses: list[dict] = field(default_factory=list)

    @property
    def captured(self) -> bool:
        return any(self.target_captured(t) for t in range(max((len(s.get("targets", [])) for s in self.statuses),
                                                              default=0)))

    def target(self, t: int) -> list[dict]:
        """Every process's status of target `t`."""
        return [s["targets"][t] for s in self.statuses if t < len(s.get("targets", []))]

    def target_captured(self, t: int) -> bool:
        return any(x.get("captured") for x in self.target(t))


def run_plain(command: list[str], timeout: float | None = None) -> AppRun:
    """The application without the injector: the baseline for the capture's overhead."""
    t0 = time.perf_counter()
    code = _run(command, dict(os.environ), timeout)
    return AppRun(list(command), code, time.perf_counter() - t0)


def run_injected(command: list[str], injector: Path, plan: RunPlan | CapturePlan, raw_dir: Path,
                 timeout: float | None = None) -> AppRun:
    raw_dir = Path(raw_dir)
    raw_dir.mkdir(parents=True, exist_ok=True)
    if isinstance(plan, CapturePlan):
        plan = RunPlan(plan.out_dir, [plan], after_ms=plan.after_ms, max_bytes=plan.max_bytes,
                       exit_after=plan.exit_after)
    plan.start_epoch_ms = time.time() * 1000.0
    plan_path = plan.write(raw_dir / "plan.txt")
    env = dict(os.environ)
    env["CUDA_INJECTION64_PATH"] = str(injector)
    env["MEPGEN_CAPTURE_PLAN"] = str(plan_path)
    # modules load when the application starts, not inside the first launch of a kernel: with lazy loading the
    # timed launch would include loading its module, and its kernel_ms (the fidelity guard's reference) would not
    # be the kernel's time. A user's own setting wins.
    env.setdefault("CUDA_MODULE_LOADING", "EAGER")
    t0 = time.perf_counter()
    code = _run(command, env, timeout)
    run = AppRun(list(command), code, time.perf_counter() - t0)
    for p in sorted(raw_dir.glob("status.*.json")):
        try:
            run.statuses.append(json.loads(p.read_text()))
        except (OSError, json.JSONDecodeError):
            continue  # a process killed while writing its status: the others still tell the story
    return run


def _run(command: list[str], env: dict, timeout: float | None) -> int:
    if not command:
        raise MepgenError("no application to run: give it after `--`, e.g. mepgen capture KERNEL -- ./app args")
    try:
        # the application's own output goes to stderr: stdout is mepgen's (its --json must stay parseable)
        try:
            sys.stderr.fileno()
        except (AttributeError, OSError, ValueError):  # stderr is no file (captured): relay the output
            r = subprocess.run(command, env=env, timeout=timeout, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            sys.stderr.write(r.stdout.decode(errors="replace"))
            return r.returncode
        return subprocess.run(command, env=env, timeout=timeout, stdout=sys.stderr).returncode
    except FileNotFoundError:
        raise MepgenError(f"cannot run the application: {command[0]} not found") from None
    except PermissionError:
        raise MepgenError(f"cannot run the application: {command[0]} is not executable") from None
    except subprocess.TimeoutExpired:
        raise MepgenError(f"the application ran longer than --timeout {timeout:g} s and was stopped") from None


def explain_failure(run: AppRun, plan: CapturePlan, t: int = 0) -> str:
    """One line: why target `t` of the run (the kernel of `plan`) was not recorded."""
    who = plan.choice.display
    if not run.statuses:
        return (f"the capture injector never started (exit code {run.exit_code}): the application made no CUDA call, "
                "or the CUDA driver ignored CUDA_INJECTION64_PATH")
    errors = [s["error"] for s in run.statuses if s.get("error")]
    if errors:
        return f"the capture injector failed to start: {errors[0]}"
    mine = run.target(t)
    what = "the longest launch" if plan.longest else f"launch {plan.launch}"
    refusals = [x["refusal"] for x in mine if x.get("refusal")]
    if refusals:
        return f"cannot capture {who} {what}: {refusals[0]}"
    matched = sum(int(x.get("matched", 0)) for x in mine)
    window = sum(int(x.get("before_window", 0)) for x in mine)
    seen: dict[str, int] = {}
    runtime_only: dict[str, int] = {}
    for s in run.statuses:
        for name, n in s.get("seen", {}).items():
            seen[name] = seen.get(name, 0) + n
        for name, n in s.get("runtime_only", {}).items():
            runtime_only[name] = runtime_only.get(name, 0) + n
    graphs = sum(int(s.get("graph_launches", 0)) for s in run.statuses)
    q = plan.choice.kernel["qualified_name"]
    crashed = f"; the application exited with {run.exit_code}" if run.exit_code else ""
    if matched:
        when = f" after {plan.after_ms:g} ms" if plan.after_ms is not None else ""
        return (f"{who} was launched {matched} time(s){when}, so there is no launch {plan.launch} "
                f"(--launch counts from 0){crashed}")
    if window:
        return f"{who} was launched {window} time(s), all before --after-ms {plan.after_ms:g}{crashed}"
    missed = [n for n in runtime_only if split_demangled(n)[0] == q]
    if missed:
        return (f"the CUDA runtime launched {q} {sum(runtime_only[n] for n in missed)} time(s) without passing "
                "through the driver's launch entry points, which the injector watches; this runtime cannot be "
                "captured")
    in_graphs = (f"; the application launched CUDA graphs {graphs} time(s), and kernels inside a graph are not "
                 "seen one by one") if graphs else ""
    if not seen:
        return f"the application launched no kernel at all{in_graphs}{crashed}"
    bases = {split_demangled(n)[0]: n for n in seen}
    same = [n for n in seen if split_demangled(n)[0] == q]
    if same:
        return (f"{who} never launched; its instantiations that did: {', '.join(sorted(same)[:4])}")
    close = difflib.get_close_matches(q, list(bases), n=3, cutoff=0.4)
    hint = f"; the closest launched: {', '.join(bases[c] for c in close)}" if close else ""
    return f"{who} was never launched ({len(seen)} other kernel(s) were){hint}{in_graphs}{crashed}"


def outcome_kind(run: AppRun, t: int) -> str:
    """captured | refused (the launch came but cannot be replayed) | not_launched (no launch to record) |
    failed (the injector never ran or could not start: nothing was watched)."""
    if run.target_captured(t):
        return "captured"
    if not run.statuses or any(s.get("error") for s in run.statuses):
        return "failed"
    if any(x.get("refusal") for x in run.target(t)):
        return "refused"
    return "not_launched"
