"""Before `optimize` names a winner: compute-sanitizer's memcheck on it (evaluate/memcheck.py).

The faster candidates are taken best first; each runs once under memcheck on the first input set, as it was
timed: the native backend's harness, or the pycuda backend's cubin (below). A memory error rejects it
(`runtime_fault`, fault `out_of_bounds`, the address, the buffer and the reason: in the journal and the
trajectory) and the next is checked; the first clean one is the winner. Where there is no verdict (no
compute-sanitizer, a build or a run that fails under it, an original kernel that has the memory errors itself: its
buffers may be smaller than the application's) the candidate stays the winner, with the reason in its record.
The original runs under memcheck only when a candidate has errors (once): a clean winner needs no comparison.
Every check's cost is in the candidate's record (`memcheck.seconds`).

Where candidates are timed on the pycuda backend, the check runs the cubin that was timed, in the pycuda worker
under the sanitizer (evaluate/memcheck_worker.py): no harness to build (it was a whole nvcc of the harness, 2-4 s
after the search for a winner of its last round). `Prebuild` starts that worker at the first
win, beside the search (its context and the first input set), so that the end of a run is the module's load and
one launch under the sanitizer. Where that check cannot launch the kernel (the worker does not start under the
sanitizer, the cubin does not load), the native harness is built with the candidate's launch and flags (the host
code at -O1: check_flags) and checked, and the record says why (`memcheck.how`, `memcheck.fallback`).
"""
from __future__ import annotations

import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor, wait
from pathlib import Path

from ..evaluate import memcheck, memcheck_worker
from ..evaluate.launchcfg import launch_from
from ..evaluate.memcheck_worker import SanitizedWorker
from ..evaluate.native import NativeBackend
from ..evaluate.pycuda_backend import PycudaBackend
from ..evaluate.results import CompileFailed, RuntimeFault
from .candidates import write_candidate


def native_backend(ev):
    """The evaluator's native backend, or one made like it (the pycuda backend times cubins: memcheck needs a
    process with the candidate's harness)."""
    if ev.backend_name == "native":
        return ev.workers[0].backend
    be = NativeBackend(ev.spec, ev.mep_dir, ev.store.build_dir, ev.workers[0].device, ev.opts.compile_timeout,
                       ev.opts.run_timeout)
    be.sandbox_level = ev.sandbox
    return be


def check_flags(ev, flags=()) -> tuple[str, ...]:
    """nvcc flags of a harness memcheck runs: with the native backend the timed build's own (in the build cache
    already: no build), else built for the check alone, with the host's quicker optimization (memcheck.HOST_OPT)."""
    return tuple(flags) if ev.backend_name == "native" else memcheck.host_flags(flags)


def build_attempt(ev, native, attempt, workdir: Path):
    """The native harness of `attempt` as memcheck runs it (Built or CompileFailed; cached by content)."""
    p = attempt.proposal
    kernel = write_candidate(p, workdir)
    return native.compile(kernel, launch=launch_from(ev.spec, p.launch), flags=check_flags(ev, p.nvcc_flags))


def check_timeout(ev) -> float:
    return max(120.0, 10 * float(ev.opts.run_timeout))


def cubin_backend(ev) -> PycudaBackend | None:
    """The evaluator's pycuda backend where it times the candidates (their check runs the timed cubin), else None."""
    be = ev.workers[0].backend
    return be if ev.backend_name == "pycuda" and isinstance(be, PycudaBackend) else None


def check_cubin(ev, kernel: Path, launch=None, flags=(), warm=None) -> tuple[memcheck.Report | None, str]:
    """memcheck on the cubin the pycuda backend built of `kernel` (cached by content: the timed one, where `kernel`
    is the file the search compiled); (Report, '') or (None, why not) where the kernel was not launched."""
    be = cubin_backend(ev)
    if be is None:
        return None, ""
    extra = {k: v for k, v in (("launch", launch), ("flags", tuple(flags))) if v}
    built = be.compile(Path(kernel), **extra)
    if isinstance(built, CompileFailed):
        return None, f"the cubin did not build: {built.message[:200]}"
    report, launched = memcheck_worker.check(be, built, ev.sets[0], check_timeout(ev), warm)
    if not launched:
        return None, report.message
    report.how = "cubin"
    return report, ""


def _on_harness(ev, native, built, name: str, workdir: Path, why: str) -> memcheck.Report:
    """memcheck on the native harness `built` (or why it did not build), saying why the cubin was not checked."""
    if isinstance(built, CompileFailed):
        report = memcheck.Report(None, message=f"the native harness did not build for memcheck: {built.message[:300]}")
    else:
        report = memcheck.check(native, built, ev.sets[0], Path(workdir) / "memcheck" / name, ev.sandbox,
                                check_timeout(ev))
    report.how, report.fallback = "harness", why
    return report


def check_attempt(ev, native, attempt, workdir: Path, work: Path | None = None, warm=None) -> memcheck.Report:
    """memcheck on `attempt`: its timed cubin (`work`: the folder the search wrote it into), else its native
    harness."""
    p = attempt.proposal
    report, why = check_cubin(ev, write_candidate(p, work or workdir), launch_from(ev.spec, p.launch),
                              p.nvcc_flags, warm)
    if report is not None:
        return report
    return _on_harness(ev, native, build_attempt(ev, native, attempt, workdir), attempt.id, workdir, why)


def check_original(ev, native, workdir: Path) -> memcheck.Report:
    """The MEP's own kernel.cu under memcheck: a candidate is judged only where the original is clean."""
    report, why = check_cubin(ev, ev.mep_dir / "kernel.cu")
    if report is not None:
        return report
    built = native.compile(ev.mep_dir / "kernel.cu", flags=check_flags(ev))
    return _on_harness(ev, native, built, "original", workdir, why)


class Prebuild:
    """The check at the end made ready during the search: on the pycuda backend, the sanitized worker that will
    check the timed cubin is started at the first win (its context and the first input set:
    memcheck_worker.SanitizedWorker.warm_up), in a thread beside the search. Nothing for the native backend (its
    timed harnesses are the ones memcheck runs), nothing for a search that finds nothing faster, nothing without a
    sanitizer. `offer(attempt)` on each faster attempt, `offer_result(proposal, result)` the moment a faster result
    arrives (Search's on_faster, on the pipeline's GPU thread); `finish()` before the check waits for the start;
    `take_warm()` hands the worker to the check. A start that fails is met again, and said, by the check itself.
    `work`: the folder the search writes its candidates into (the check finds their cubins by it)."""

    def __init__(self, ev, work: Path | None = None):
        self.ev, self.work = ev, work
        self.best_ms: float | None = None
        self.waiting: Future | None = None
        self.seconds = 0.0                  # the worker's start, during the search
        self.warm: SanitizedWorker | None = None
        self._lock = threading.Lock()
        self.tool = memcheck.executable()
        self.cubin = cubin_backend(ev) if self.tool is not None else None
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="mepgen-memcheck") if self.cubin is not None else None

    def _timed(self, start) -> None:
        """The worker's start, its time counted."""
        begin = time.monotonic()
        try:
            start()
        finally:
            with self._lock:
                self.seconds += time.monotonic() - begin

    def offer(self, attempt) -> None:
        self.offer_result(attempt.proposal, attempt.result)

    def offer_result(self, proposal, result) -> None:
        """Thread-safe (the search's thread and the pipeline's GPU threads); nothing after finish or cancel."""
        with self._lock:
            if self._pool is None or self.best_ms is not None:
                return
            self.best_ms = result.timed.median_ms
            self.warm = SanitizedWorker(self.cubin, self.tool, check_timeout(self.ev))
            warm = self.warm
            self.waiting = self._pool.submit(self._timed, lambda: warm.warm_up(self.ev.sets[0]))

    def _close(self) -> ThreadPoolExecutor | None:
        """The pool, no longer taking offers (a GPU thread may still offer a late result)."""
        with self._lock:
            pool, self._pool = self._pool, None
            return pool

    def finish(self) -> None:
        """Wait for the worker's start."""
        pool = self._close()
        if pool is not None:
            if self.waiting is not None:
                wait([self.waiting])
            pool.shutdown(wait=False)

    def take_warm(self) -> SanitizedWorker | None:
        """The worker started ahead, for one check (each check ends its worker)."""
        warm, self.warm = self.warm, None
        return warm

    def cancel(self) -> None:
        """A run that stops early (^C, an error): nothing waits; a worker started ahead is ended (in a thread: it
        may still be starting)."""
        pool = self._close()
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
        warm = self.take_warm()
        if warm is not None:
            threading.Thread(target=warm.close, daemon=True).start()


def check_winner(ev, outcome, workdir: Path, event, journal=None, prebuild: Prebuild | None = None) -> None:
    """Set `outcome.best` to the best faster attempt that memcheck finds clean (or cannot judge); `event(kind,
    message)` tells the trajectory each check; rejected attempts' records are appended to `journal`. With
    `prebuild`, the worker it started and the folder of the search's candidates."""
    if prebuild is not None:
        prebuild.finish()
    ranked = sorted((a for a in outcome.attempts if getattr(a.result, "faster", False)),
                    key=lambda a: a.result.timed.median_ms)
    if not ranked:
        return
    if memcheck.executable() is None:
        why = "compute-sanitizer not found (it ships with the CUDA toolkit): out-of-bounds reads not checked"
        event("memcheck", f"{ranked[0].id}: no memory check: {why}")
        ranked[0].result.memcheck = memcheck.Report(None, message=why).to_dict()
        return
    native = native_backend(ev)
    warm = prebuild.take_warm() if prebuild is not None else None
    try:
        _check_ranked(ev, outcome, ranked, native, workdir, event, journal, prebuild.work if prebuild else None, warm)
    finally:
        if warm is not None:
            warm.close()        # ended where no check did (each check ends the worker it used)


def _check_ranked(ev, outcome, ranked, native, workdir: Path, event, journal, work, warm) -> None:
    original = None       # checked at the first memory error only: an error counts where the original has none
    for a in ranked:
        report = check_attempt(ev, native, a, workdir, work, warm)
        warm = None
        a.result.memcheck = report.to_dict()
        if report.clean is False:
            original = original or check_original(ev, native, workdir)
            if original.clean is False:      # the MEP's buffers may be smaller than the application's
                why = (f"the original kernel has memory errors under memcheck too ({original.message}): no memory "
                       "verdict on candidates (are the MEP's buffer counts smaller than the application's?)")
                event("memcheck", f"{a.id}: {why} (memcheck took {report.seconds + original.seconds:.1f} s)")
                a.result.memcheck = memcheck.Report(None, report.seconds + original.seconds, [], why,
                                                    original.tool).to_dict()
                a.result.notes.append(f"memcheck: {why}")
                outcome.best = a
                return
            a.result.status = "runtime_fault"
            a.result.fault = RuntimeFault("out_of_bounds", report.message, input_set=ev.sets[0].index)
            event("memcheck", f"{a.id} rejected before it was named best: {report.message} "
                              f"(memcheck took {report.seconds:.1f} s{_how(report)})")
            if journal is not None:
                journal.append(a.result)
            continue
        verdict = "no memory error" if report.clean else f"no verdict: {report.message}"
        event("memcheck", f"{a.id}: {verdict} (memcheck took {report.seconds:.1f} s{_how(report)})")
        if report.clean is None:
            a.result.notes.append(f"memcheck: {report.message}")
        outcome.best = a
        return
    outcome.best = None


def _how(report: memcheck.Report) -> str:
    """What ran under the sanitizer, for the trajectory (and why not the cubin, where it was meant to be)."""
    if report.how == "cubin":
        return ", on the timed cubin"
    return f", on the native harness: {report.fallback}" if report.fallback else ""
