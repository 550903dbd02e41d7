"""batch.Pipeline keeps nvcc's slots busy: with a stand-in evaluator whose compile sleeps (nvcc) and whose GPU check
sleeps (the judge), N candidates on J compile threads take about N/J compile slots, not N; a candidate submitted
while the caller is still busy (a proposer writing the next one) compiles meanwhile; the rules run on a compile
thread and still reject before any compile; a result seen before is neither linted nor compiled again."""
from __future__ import annotations

import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from mepgen.evaluate.batch import Pipeline, evaluate_many
from mepgen.evaluate.evaluator import Options, Worker
from mepgen.evaluate.results import EvalResult, RuleViolation

COMPILE_S, GPU_S = 0.25, 0.01


class SleepyEvaluator:
    """The part of Evaluator that batch.py calls; compile and check sleep, and every call is recorded."""

    def __init__(self, tmp_path: Path, jobs: int, gpus: int = 1, compile_s: float = COMPILE_S):
        self.opts = Options(jobs=jobs, use_cache=False)
        self.store = SimpleNamespace(results_dir=tmp_path / "results")
        self.workers = [Worker(d, backend=None) for d in range(gpus)]
        self.compile_s = compile_s
        self.built: set[str] = set()
        self.calls: list[tuple[str, str, float, float, str]] = []     # (what, name, start, end, thread)
        self.lock = threading.Lock()

    def _note(self, what: str, name: str, start: float) -> None:
        with self.lock:
            self.calls.append((what, name, start, time.monotonic(), threading.current_thread().name))

    def new_result(self, name, path, launch=None, flags=(), lint=True):
        res = EvalResult(name=name, key=f"key-{Path(path).read_text()}", backend="fake", kernel_sha256="k",
                         input_sets=1)
        return self.lint(res, Path(path).read_text()) if lint else res

    def lint(self, res, text, check=None):
        if check is not None:                    # a verdict kept by the pipeline
            res.rules = check(text)
        else:
            self._note("lint", res.name, time.monotonic())
            res.rules = [RuleViolation("adds something the rules refuse", 1, text)] if "forbidden" in text else []
        if res.rules:
            res.status, res.stage = "rejected_by_rules", "lint"
        return res

    def compile(self, res, path, launch=None, flags=()):
        start = time.monotonic()
        if str(path) not in self.built:          # nvcc's build cache (pycuda_entry.build_cubin: by content)
            time.sleep(self.compile_s)
            self.built.add(str(path))
        self._note("compile", res.name, start)
        return SimpleNamespace(kernel_file=path)

    def check(self, res, built, worker):
        start = time.monotonic()
        time.sleep(GPU_S)
        self._note("gpu", res.name, start)
        res.status, res.stage = "ok", "done"
        return res

    def of(self, what: str) -> list[tuple]:
        return [c for c in self.calls if c[0] == what]


def kernels(tmp_path: Path, n: int, text=lambda i: f"variant {i}") -> list[tuple[str, Path]]:
    out = []
    for i in range(n):
        f = tmp_path / f"c{i}" / "kernel.cu"
        f.parent.mkdir(parents=True)
        f.write_text(text(i))
        out.append((f"c{i}", f))
    return out


@pytest.mark.parametrize("n, jobs", [(8, 4), (6, 2)])
def test_n_candidates_on_j_jobs_take_about_n_over_j_compile_slots(tmp_path, n, jobs):
    ev = SleepyEvaluator(tmp_path, jobs)
    start = time.monotonic()
    results = evaluate_many(ev, kernels(tmp_path, n))
    wall = time.monotonic() - start
    assert [r.name for r in results] == [f"c{i}" for i in range(n)] and all(r.status == "ok" for r in results)
    slots = -(-n // jobs)
    # serial compiles would take n slots; side by side they take n/jobs, plus the last one's GPU check
    assert slots * COMPILE_S * 0.9 <= wall < (slots + 0.8) * COMPILE_S + n * GPU_S
    assert wall < n * COMPILE_S * 0.75
    # the GPU judged the first candidates while the last compiles still ran
    first_gpu = min(c[2] for c in ev.of("gpu"))
    last_compile_end = max(c[3] for c in ev.of("compile"))
    assert first_gpu < last_compile_end


def test_a_candidate_compiles_while_the_caller_writes_the_next_one(tmp_path):
    """The search's proposers take time per proposal: each submitted proposal compiles meanwhile, so the round ends
    about one compile after its last proposal, not one compile per proposal after it."""
    ev = SleepyEvaluator(tmp_path, jobs=4)
    propose_s = 0.15
    start = time.monotonic()
    with Pipeline(ev) as pipe:
        futures = []
        for name, path in kernels(tmp_path, 4):
            time.sleep(propose_s)                      # the proposer writing this candidate
            futures.append(pipe.submit(name, path))
        results = [f.result() for f in futures]
    wall = time.monotonic() - start
    assert all(r.status == "ok" for r in results)
    assert wall < 4 * propose_s + COMPILE_S + 0.2        # a batch after the proposals: 4 * 0.15 + 0.25 + checks
    first_compile = min(c for c in ev.of("compile"))
    assert first_compile[2] < start + 2 * propose_s      # the first compile started before the second proposal


def test_one_pipeline_serves_several_batches_and_keeps_their_order(tmp_path):
    ev = SleepyEvaluator(tmp_path, jobs=3, gpus=2, compile_s=0.02)
    items = kernels(tmp_path, 7)
    with Pipeline(ev) as pipe:
        first = [pipe.submit(*item) for item in items[:4]]
        assert [f.result().name for f in first] == ["c0", "c1", "c2", "c3"]
        second = [pipe.submit(*item) for item in items[4:]]
        assert [f.result().name for f in second] == ["c4", "c5", "c6"]
    assert len(ev.of("gpu")) == 7 and len({c[4] for c in ev.of("gpu")}) <= 2      # one thread per GPU
    with pytest.raises(RuntimeError, match="closed"):
        pipe.submit(*items[0])


def test_the_rules_run_off_the_submitting_thread_and_reject_before_compiling(tmp_path):
    ev = SleepyEvaluator(tmp_path, jobs=2)
    items = kernels(tmp_path, 3, text=lambda i: "forbidden cudaMalloc" if i == 1 else f"variant {i}")
    results = evaluate_many(ev, items)
    assert [r.status for r in results] == ["ok", "rejected_by_rules", "ok"]
    assert results[1].stage == "lint" and results[1].rules
    assert sorted(c[1] for c in ev.of("compile")) == ["c0", "c2"]      # the rejected one never reached nvcc
    assert all(c[4] != threading.current_thread().name for c in ev.of("lint"))


def test_a_result_seen_before_is_neither_linted_nor_compiled_again(tmp_path):
    ev = SleepyEvaluator(tmp_path, jobs=2, compile_s=0.01)
    ev.opts.use_cache = True
    items = kernels(tmp_path, 2)
    evaluate_many(ev, items)
    ev.calls.clear()
    again = evaluate_many(ev, items)
    assert [r.status for r in again] == ["ok", "ok"] and ev.calls == []


def test_an_evaluator_error_reaches_the_caller(tmp_path):
    ev = SleepyEvaluator(tmp_path, jobs=2, compile_s=0.01)

    def broken(res, path, launch=None, flags=()):
        raise OSError("no space left on device")
    ev.compile = broken
    with pytest.raises(OSError, match="no space"):
        evaluate_many(ev, kernels(tmp_path, 2))


def test_candidates_compiled_ahead_go_straight_to_the_gpu(tmp_path):
    """The first round compiled while the GPU times the original (Pipeline.prefetch): when it is submitted, each
    candidate's rules and nvcc are found done, so the round costs its GPU checks only."""
    ev = SleepyEvaluator(tmp_path, jobs=4)
    items = kernels(tmp_path, 4)
    with Pipeline(ev) as pipe:
        for name, path in items:
            pipe.prefetch(path)
        pipe.prefetch(items[0][1])                      # asked twice: done once
        time.sleep(COMPILE_S + 0.1)                     # the original's verification and timing
        start = time.monotonic()
        results = [f.result() for f in [pipe.submit(*item) for item in items]]
        wall = time.monotonic() - start
    assert all(r.status == "ok" for r in results)
    assert wall < COMPILE_S * 0.6                      # no compile slot: 4 GPU checks of 10 ms
    assert len(ev.of("lint")) == 4 and len(ev.built) == 4       # each text linted and built once, ahead


def test_a_submit_waits_for_its_compile_ahead_instead_of_compiling_twice(tmp_path):
    ev = SleepyEvaluator(tmp_path, jobs=4)
    (name, path), = kernels(tmp_path, 1)
    with Pipeline(ev) as pipe:
        pipe.prefetch(path)
        time.sleep(0.02)                                # under way when submitted
        res = pipe.submit(name, path).result()
    assert res.status == "ok" and len(ev.built) == 1
    waited = [c for c in ev.of("compile") if c[1] == name]
    assert waited and waited[0][3] - waited[0][2] < COMPILE_S / 2      # found in the cache, not built again


def test_an_interrupted_pipeline_cancels_what_it_did_not_judge(tmp_path):
    from concurrent.futures import CancelledError
    ev = SleepyEvaluator(tmp_path, jobs=1, compile_s=0.2)
    pipe = Pipeline(ev)
    futures = [pipe.submit(*item) for item in kernels(tmp_path, 3)]
    time.sleep(0.05)
    pipe.close(cancel=True)                     # ^C: the running compile ends, the rest is dropped
    assert all(f.done() for f in futures)
    with pytest.raises(CancelledError):
        futures[-1].result()
