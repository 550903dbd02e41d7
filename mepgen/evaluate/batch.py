"""Evaluate many candidates: compiles on every CPU core while the GPUs run, one GPU thread per GPU.

Candidates flow lint -> compile (thread pool, nvcc subprocesses) -> a queue -> whichever GPU worker is
free (each owns its backend and its baseline). A result seen before - same content hash of kernel file,
flags, spec, device and settings - comes from the journal or the MEP's result cache without running.
Every new result is appended to the journal the moment it exists, so an interrupted run resumes.
"""
from __future__ import annotations

import queue
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

from .evaluator import Evaluator, Worker, default_jobs
from .journal import Journal, ResultCache
from .results import EvalResult, RuntimeFault


def evaluate_many(ev: Evaluator, candidates: list[tuple], journal: Journal | None = None,
                  on_result: Callable[[EvalResult], None] | None = None) -> list[EvalResult]:
    """Results in the order of `candidates`: (name, kernel file) pairs, or (name, kernel file, launch[, flags])
    where a candidate runs with its own spec.Launch (None: mep.yaml's) and is built with extra nvcc flags;
    `ev.prepare()` must have run."""
    cache = ResultCache(ev.store.results_dir) if ev.opts.use_cache else None
    results: list[EvalResult | None] = [None] * len(candidates)
    lock = threading.Lock()

    def finish(i: int, res: EvalResult, fresh: bool) -> None:
        with lock:
            results[i] = res
            if fresh:
                if journal is not None:
                    journal.append(res)
                if cache is not None and res.status not in ("runtime_fault", "not_timed"):   # a fault may be the
                    # machine's; an untimed candidate is timed under a longer limit
                    cache.put(res)
            if on_result:
                on_result(res)

    pending = []
    for i, (name, path, *rest) in enumerate(candidates):
        launch = rest[0] if rest else None
        flags = tuple(rest[1]) if len(rest) > 1 and rest[1] else ()
        res = ev.new_result(name, Path(path), launch, flags)
        seen = (journal.get(res.key) if journal else None) or (cache.get(res.key) if cache else None)
        if seen is not None and seen.status == "not_timed":     # a resumed run's limit may leave room to time it
            seen = None
        if seen is not None:
            seen.name = name
            finish(i, seen, fresh=journal is not None and journal.get(res.key) is None)
        elif res.status != "ok":
            finish(i, res, fresh=True)
        else:
            pending.append((i, res, Path(path), launch, flags))

    gpu_queue: queue.Queue = queue.Queue()

    def compile_one(item) -> None:
        i, res, path, launch, flags = item
        built = ev.compile(res, path, launch, flags)
        if built is None:
            finish(i, res, fresh=True)
        else:
            gpu_queue.put((i, res, built))

    def gpu_loop(worker: Worker) -> None:
        while True:
            item = gpu_queue.get()
            if item is None:
                return
            i, res, built = item
            try:
                ev.check(res, built, worker)
            except Exception as e:  # a backend bug must not lose the other candidates' results
                res.status = "runtime_fault"
                res.fault = RuntimeFault("crash", f"evaluator error: {type(e).__name__}: {e}")
            finish(i, res, fresh=True)

    threads = [threading.Thread(target=gpu_loop, args=(w,), daemon=True) for w in ev.workers]
    for t in threads:
        t.start()
    with ThreadPoolExecutor(max_workers=default_jobs(ev.opts.jobs)) as pool:
        list(pool.map(compile_one, pending))
    for _ in threads:
        gpu_queue.put(None)
    for t in threads:
        t.join()
    return [r for r in results if r is not None]
