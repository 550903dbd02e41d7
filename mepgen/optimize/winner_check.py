"""Before `optimize` names a winner: compute-sanitizer's memcheck on it (evaluate/memcheck.py).

The faster candidates are taken best first; each runs once in the native harness (built with its launch and
flags, whatever the backend that timed it; the host code at -O1 where the harness is built for the check alone:
check_flags) under memcheck on the first input set. A memory error rejects it
(`runtime_fault`, fault `out_of_bounds`, the address, the buffer and the reason: in the journal and the
trajectory) and the next is checked; the first clean one is the winner. Where there is no verdict (no
compute-sanitizer, a build or a run that fails under it, an original kernel that has the memory errors itself: its
buffers may be smaller than the application's) the candidate stays the winner, with the reason in its record.
The original runs under memcheck only when a candidate has errors (once): a clean winner needs no comparison.
Every check's cost is in the candidate's record (`memcheck.seconds`).

Where candidates are timed on the pycuda backend, the native harness of each new best is built while the search
goes on (`Prebuild`), beside the search's compiles, so that the end of a run is the sanitizer's run, not a build of
the harness. Builds are cached by content (NativeBackend.compile): the check at the end finds them.
"""
from __future__ import annotations

import os
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor, wait
from pathlib import Path

from ..evaluate import memcheck
from ..evaluate.launchcfg import launch_from
from ..evaluate.results import CompileFailed, RuntimeFault
from .candidates import write_candidate
from ..evaluate.native import NativeBackend


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
    already: no build), else built for the check alone, with the host's quicker optimization (memcheck.HOST_OPT).
    Prebuild and check_winner build through build_attempt: the same flags, so the check finds Prebuild's build."""
    return tuple(flags) if ev.backend_name == "native" else memcheck.host_flags(flags)


def build_attempt(ev, native, attempt, workdir: Path):
    """The native harness of `attempt` as memcheck runs it (Built or CompileFailed; cached by content)."""
    return build_proposal(ev, native, attempt.proposal, workdir)


def build_proposal(ev, native, p, workdir: Path):
    kernel = write_candidate(p, workdir)
    return native.compile(kernel, launch=launch_from(ev.spec, p.launch), flags=check_flags(ev, p.nvcc_flags))


def check_attempt(ev, native, attempt, workdir: Path) -> memcheck.Report:
    built = build_attempt(ev, native, attempt, workdir)
    if isinstance(built, CompileFailed):
        return memcheck.Report(None, message=f"the native harness did not build for memcheck: {built.message[:300]}")
    timeout = max(120.0, 10 * float(ev.opts.run_timeout))
    return memcheck.check(native, built, ev.sets[0], Path(workdir) / "memcheck" / attempt.id, ev.sandbox, timeout)


def check_original(ev, native, workdir: Path) -> memcheck.Report:
    """The MEP's own kernel.cu under memcheck: a candidate is judged only where the original is clean."""
    built = native.compile(ev.mep_dir / "kernel.cu", flags=check_flags(ev))
    if isinstance(built, CompileFailed):
        return memcheck.Report(None, message=f"the original's native harness did not build: {built.message[:300]}")
    timeout = max(120.0, 10 * float(ev.opts.run_timeout))
    return memcheck.check(native, built, ev.sets[0], Path(workdir) / "memcheck" / "original", ev.sandbox, timeout)


class Prebuild:
    """The native harnesses that check_winner will run, built during the search (pycuda backend only: the native
    backend has built them already). `offer(attempt)` on each faster attempt, `offer_result(proposal, result)` the
    moment a faster result arrives (Search's on_faster, on the pipeline's GPU thread; the same attempt's offer at
    the round's end is then nothing new): a strictly better best is queued, replacing one still waiting;
    `finish()` before the check waits for the best's. Nothing is built for a search that finds
    nothing faster (nor for the original: it is checked only after a memory error, see check_winner). A build's
    failure is met again, and said, by the check itself. Threads: 1 below 16 cores, 2 from 16, 3 from 24 (each build
    is one nvcc of the whole harness, about 4 s on an H200 host: with one thread, a best found while an earlier
    best builds waited for it)."""

    def __init__(self, ev, workdir: Path):
        self.ev, self.workdir = ev, Path(workdir)
        self.native = None                  # made at the first win (the check makes its own where this failed)
        self.best_ms: float | None = None
        self.waiting: Future | None = None
        self.seconds = 0.0                  # build time spent during the search
        self._lock = threading.Lock()
        wanted = ev.backend_name != "native" and memcheck.executable() is not None
        threads = min(3, max(1, (os.cpu_count() or 1) // 8))
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="mepgen-memcheck-build") if wanted else None

    def _timed(self, build) -> None:
        """A build, its time counted; an error stays in its future (finish does not raise it): check_winner
        builds again and reports it."""
        start = time.monotonic()
        try:
            build()
        finally:
            with self._lock:
                self.seconds += time.monotonic() - start

    def offer(self, attempt) -> None:
        self.offer_result(attempt.proposal, attempt.result)

    def offer_result(self, proposal, result) -> None:
        """Thread-safe (the search's thread and the pipeline's GPU threads); nothing after finish or cancel."""
        ms = result.timed.median_ms
        with self._lock:
            if self._pool is None:
                return
            if self.best_ms is not None and ms >= self.best_ms:
                return
            if self.best_ms is None:         # the first win: the native backend the check will use
                try:
                    self.native = native_backend(self.ev)
                except Exception:  # noqa: BLE001 (a warm-up only: check_winner makes its own and says what failed)
                    self._pool.shutdown(wait=False)
                    self._pool = None
                    return
            self.best_ms = ms
            if self.waiting is not None:
                self.waiting.cancel()        # not started yet: a better one replaces it
            self.waiting = self._pool.submit(
                self._timed, lambda: build_proposal(self.ev, self.native, proposal, self.workdir))

    def _close(self) -> ThreadPoolExecutor | None:
        """The pool, no longer taking offers (a GPU thread may still offer a late result)."""
        with self._lock:
            pool, self._pool = self._pool, None
            return pool

    def finish(self) -> None:
        """Wait for the best's build (the winner unless memcheck rejects it); a build of an earlier best still under
        way ends on its own."""
        pool = self._close()
        if pool is not None:
            if self.waiting is not None:
                wait([self.waiting])
            pool.shutdown(wait=False)

    def cancel(self) -> None:
        """A run that stops early (^C, an error): nothing waits, what runs ends on its own."""
        pool = self._close()
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)


def check_winner(ev, outcome, workdir: Path, event, journal=None, prebuild: Prebuild | None = None) -> None:
    """Set `outcome.best` to the best faster attempt that memcheck finds clean (or cannot judge); `event(kind,
    message)` tells the trajectory each check; rejected attempts' records are appended to `journal`. With
    `prebuild`, its native backend and the harnesses it built."""
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
    native = prebuild.native if prebuild is not None and prebuild.native is not None else native_backend(ev)
    original = None       # checked at the first memory error only: an error counts where the original has none
    for a in ranked:
        report = check_attempt(ev, native, a, workdir)
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
                              f"(memcheck took {report.seconds:.1f} s)")
            if journal is not None:
                journal.append(a.result)
            continue
        verdict = "no memory error" if report.clean else f"no verdict: {report.message}"
        event("memcheck", f"{a.id}: {verdict} (memcheck took {report.seconds:.1f} s)")
        if report.clean is None:
            a.result.notes.append(f"memcheck: {report.message}")
        outcome.best = a
        return
    outcome.best = None
