"""lint_workers: the rules on a process of their own give rules.check's own verdicts, line numbers and texts; a
worker that ends is replaced by the check in mepgen's process; a pipeline with workers rejects at the lint stage."""
from __future__ import annotations

import os
import sys

from mepgen.evaluate import lint_workers, rules
from mepgen.evaluate.lint_workers import LintWorkers

ORIGINAL = """__global__ void scale(int n, const float* x, float* y)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0f * x[i];
}
"""
CLEAN = ORIGINAL.replace("2.0f * x[i]", "x[i] + x[i]")
STATE = "__device__ float carried[1024];\n" + ORIGINAL      # device state that outlives a launch
HOST_API = ORIGINAL.replace("if (i < n)", "if (i == 0) { float* p; cudaMalloc(&p, 4); }\n    if (i < n)")


def test_a_worker_gives_the_rules_own_verdicts_and_the_process_takes_over_when_it_ends():
    workers = LintWorkers(ORIGINAL, [], "scale", (), 1)
    try:
        assert workers.alive == 1
        for text in (CLEAN, STATE, HOST_API, "binary\0file"):
            assert workers.check(text) == rules.check(text, ORIGINAL, [], "scale", ())
        assert workers.check(STATE) and not workers.check(CLEAN)
        workers.procs[0].kill()
        workers.procs[0].wait()
        assert workers.check(STATE) == rules.check(STATE, ORIGINAL, [], "scale", ())     # checked here instead
        assert workers.alive == 0
    finally:
        workers.close()


def test_workers_only_where_cores_are_many():
    assert lint_workers.count_for(2) == 0 and lint_workers.count_for(4) == 0
    assert lint_workers.count_for(8) == 2 and lint_workers.count_for(16) == 4 and lint_workers.count_for(128) == 4


def test_a_worker_gets_no_secret(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-not-for-workers")
    env = lint_workers.worker_env()
    assert "OPENAI_API_KEY" not in env and "sk-not-for-workers" not in env.values()
    assert env["PYTHONPATH"].split(os.pathsep) == [p for p in sys.path if p]      # the same mepgen
