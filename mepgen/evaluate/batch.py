"""Evaluate many candidates: compiles on every CPU core while the GPUs run, one GPU thread per GPU.

Candidates flow lint -> compile (thread pool, nvcc subprocesses) -> a queue -> whichever GPU worker is
free (each owns its backend and its baseline). A result seen before - same content hash of kernel file,
flags, spec, device and settings - comes from the journal or the MEP's result cache without running.
Every new result is appended to the journal the moment it exists, so an interrupted run resumes.

`Pipeline` stays open across batches: a caller submits each candidate the moment it exists (the search, while
its proposers are still writing the rest of a round), so nvcc compiles the next candidates while the GPUs
judge the first ones; `evaluate_many` is one batch through a pipeline of its own.
"""
from __future__ import annotations

import hashlib
import os
import queue
import threading
from concurrent.futures import Future, InvalidStateError, ThreadPoolExecutor
from pathlib import Path
from typing import Callable

from .evaluator import Evaluator, Worker
from .journal import Journal, ResultCache
from .lint_workers import LintWorkers
from .results import EvalResult, RuntimeFault


def default_jobs(jobs: int) -> int:
    """Compile threads: `jobs`, or one per CPU core when 0."""
    return jobs if jobs > 0 else (os.cpu_count() or 1)


class Pipeline:
    """Candidates in (`submit`, once `ev.prepare()` has run), futures of their EvalResults out. Each is linted and
    compiled on one of `ev.opts.jobs` threads (0: one per CPU core), feeding the GPU queue the moment its cubin
    exists; with `lint_workers` the rules run on that many processes of their own (lint_workers.py). `prefetch`
    lints and compiles a candidate ahead, before it is submitted (the GPU busy with the original meanwhile): the
    rules' verdict is kept by text, the cubin in the build cache, so its submit finds both."""

    def __init__(self, ev: Evaluator, journal: Journal | None = None,
                 on_result: Callable[[EvalResult], None] | None = None, lint_workers: int = 0):
        self.ev, self.journal, self.on_result = ev, journal, on_result
        # the rules on processes of their own (lint_workers.py), else on the compile threads
        self.lints = LintWorkers(*ev.lint_inputs(), lint_workers) if lint_workers > 0 else None
        self.cache = ResultCache(ev.store.results_dir) if ev.opts.use_cache else None
        self.jobs = default_jobs(ev.opts.jobs)
        self.lock = threading.Lock()
        self.gpu_queue: queue.Queue = queue.Queue()
        self.pool = ThreadPoolExecutor(max_workers=self.jobs, thread_name_prefix="mepgen-compile")
        self.linted: dict[str, list] = {}            # sha256 of a text -> the rules' violations (rules.check)
        self.ahead: dict[tuple, Future] = {}         # (path, launch, flags) -> its compile ahead (prefetch)
        self.pending: set[Future] = set()            # submitted, no result yet
        self.threads = [threading.Thread(target=self._gpu_loop, args=(w,), daemon=True) for w in ev.workers]
        for t in self.threads:
            t.start()
        self.closed = False

    def submit(self, name: str, path: Path, launch=None, flags=()) -> Future:
        """The future EvalResult of kernel file `path` (with its own spec.Launch, None: mep.yaml's, and extra nvcc
        flags): at once when the journal or the cache has it, else after the rules (a violation ends it there),
        the compile and the GPU."""
        if self.closed:
            raise RuntimeError("the evaluation pipeline is closed")
        fut: Future = Future()
        self.pending.add(fut)
        fut.add_done_callback(self.pending.discard)
        flags = tuple(flags or ())
        res = self.ev.new_result(name, Path(path), launch, flags, lint=False)     # the rules: on a compile thread
        journal, cache = self.journal, self.cache
        seen = (journal.get(res.key) if journal else None) or (cache.get(res.key) if cache else None)
        if seen is not None and seen.status == "not_timed":     # a resumed run's limit may leave room to time it
            seen = None
        if seen is not None:
            seen.name = name
            self._finish(fut, seen, fresh=journal is not None and journal.get(res.key) is None)
        else:
            self.pool.submit(self._compile, fut, res, Path(path), launch, flags)
        return fut

    def prefetch(self, path: Path, launch=None, flags=()) -> None:
        """Lint and compile kernel file `path` now, for a submit of it to come; no result, nothing on the GPU."""
        item = (str(path), repr(launch), tuple(flags or ()))
        with self.lock:
            if self.closed or item in self.ahead:
                return
            self.ahead[item] = self.pool.submit(self._ahead, Path(path), launch, tuple(flags or ()))

    def _ahead(self, path: Path, launch, flags) -> None:
        res = self.ev.new_result("ahead", path, launch, flags, lint=False)
        self._lint(res, path)
        if res.status == "ok":
            self.ev.compile(res, path, launch, flags)

    def _lint(self, res: EvalResult, path: Path) -> None:
        """The rules on the candidate's text, once per text (the same original, chain and flags for every text)."""
        text = path.read_text(errors="replace")
        h = hashlib.sha256(text.encode()).hexdigest()
        known = self.linted.get(h)
        if known is not None:
            self.ev.lint(res, text, lambda _: list(known))
            return
        self.ev.lint(res, text, self.lints.check if self.lints is not None else None)
        self.linted[h] = list(res.rules)

    def _finish(self, fut: Future, res: EvalResult, fresh: bool) -> None:
        try:
            with self.lock:
                if fresh:
                    if self.journal is not None:
                        self.journal.append(res)
                    if self.cache is not None and res.status not in ("runtime_fault", "not_timed"):   # a fault may
                        # be the machine's; an untimed candidate is timed under a longer limit
                        self.cache.put(res)
                if self.on_result:
                    self.on_result(res)
        except BaseException as e:      # the journal could not be written: said where the caller waits
            _settle(fut, error=e)
            return
        _settle(fut, res)

    def _compile(self, fut: Future, res: EvalResult, path: Path, launch, flags) -> None:
        try:
            ahead = self.ahead.get((str(path), repr(launch), tuple(flags)))
            if ahead is not None:              # compiled ahead, or under way: its cubin is in the build cache
                ahead.exception()              # (waited for; an error there is met again here, in the caller's view)
            self._lint(res, path)
            if res.status != "ok":             # rejected by the rules: never compiled
                self._finish(fut, res, fresh=True)
                return
            built = self.ev.compile(res, path, launch, flags)
        except BaseException as e:      # the caller sees it where it waits for this candidate
            _settle(fut, error=e)
            return
        if built is None:
            self._finish(fut, res, fresh=True)
        else:
            self.gpu_queue.put((fut, res, built))

    def _gpu_loop(self, worker: Worker) -> None:
        while True:
            item = self.gpu_queue.get()
            if item is None:
                return
            fut, res, built = item
            try:
                self.ev.check(res, built, worker)
            except Exception as e:  # a backend bug must not lose the other candidates' results
                res.status = "runtime_fault"
                res.fault = RuntimeFault("crash", f"evaluator error: {type(e).__name__}: {e}")
            self._finish(fut, res, fresh=True)

    def close(self, cancel: bool = False) -> None:
        """Wait for what was submitted (with `cancel`: only for the compiles already running, as when the run is
        interrupted), then stop the compile threads and the GPU threads."""
        with self.lock:
            if self.closed:
                return
            self.closed = True
        self.pool.shutdown(wait=True, cancel_futures=cancel)
        if cancel:          # built but not yet judged: dropped; whoever still waits for one hears it was cancelled
            while True:
                try:
                    self.gpu_queue.get_nowait()
                except queue.Empty:
                    break
            for fut in list(self.pending):
                fut.cancel()
        for _ in self.threads:
            self.gpu_queue.put(None)
        for t in self.threads:
            t.join()
        if self.lints is not None:
            self.lints.close()

    def __enter__(self) -> "Pipeline":
        return self

    def __exit__(self, exc_type, *exc) -> None:
        self.close(cancel=exc_type is not None)


def _settle(fut: Future, result=None, error: BaseException | None = None) -> None:
    """Give `fut` its result or error, unless it was cancelled meanwhile (Pipeline.close(cancel=True))."""
    try:
        fut.set_exception(error) if error is not None else fut.set_result(result)
    except InvalidStateError:
        pass        # cancelled meanwhile: nobody waits for this result any more


def evaluate_many(ev: Evaluator, candidates: list[tuple], journal: Journal | None = None,
                  on_result: Callable[[EvalResult], None] | None = None) -> list[EvalResult]:
    """Results in the order of `candidates`: (name, kernel file) pairs, or (name, kernel file, launch[, flags])
    where a candidate runs with its own spec.Launch (None: mep.yaml's) and is built with extra nvcc flags;
    `ev.prepare()` must have run."""
    with Pipeline(ev, journal, on_result) as pipe:
        futures = [pipe.submit(name, path, rest[0] if rest else None, rest[1] if len(rest) > 1 else ())
                   for name, path, *rest in candidates]
        return [f.result() for f in futures]
