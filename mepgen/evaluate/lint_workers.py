"""The rules (rules.check) on worker processes of their own, where cores are many.

rules.check reads a candidate with libclang and walks its cursors in Python: about 0.1 s a candidate, most of it
holding the interpreter's lock, so in mepgen's own process the lints of a round queue behind each other and slow the
proposer writing the next candidates. A worker (`python -m mepgen.evaluate.lint_workers`) reads the original once
when it starts (libclang then keeps the preamble of the headers for the candidates) and answers one request per
line: a candidate's text in, its violations out, as JSON. It runs the same function on the same texts and flags;
when a worker ends unexpectedly the check runs in mepgen's process instead.
"""
from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time

from . import process, rules
from .results import RuleViolation

#: below this many cores the rules stay in mepgen's process (a worker's start, ~0.5 s, is not worth it there)
MIN_CORES = 8
MAX_WORKERS = 4


def count_for(cores: int | None = None) -> int:
    """Workers for a machine of `cores` cores: none below MIN_CORES, else a quarter of them, at most MAX_WORKERS."""
    cores = cores if cores is not None else (os.cpu_count() or 1)
    return 0 if cores < MIN_CORES else min(MAX_WORKERS, cores // 4)


def worker_env() -> dict:
    """A worker's environment: mepgen's without its secrets (it reads candidates' texts: process.candidate_env), and
    this interpreter's sys.path, so that it imports the same mepgen."""
    return dict(process.candidate_env(), PYTHONPATH=os.pathsep.join(p for p in sys.path if p))


class LintWorkers:
    """`check(text)`: rules.check(text, original, chain, target, args) on one of `n` workers (thread-safe)."""

    def __init__(self, original: str, chain: list[str], target: str, args: tuple[str, ...], n: int):
        self.args = (original, list(chain), target, tuple(args))
        self.idle: queue.Queue = queue.Queue()
        self.lock = threading.Lock()
        self.procs: list[subprocess.Popen] = []
        env = worker_env()
        setup = json.dumps({"original": original, "chain": list(chain), "target": target, "args": list(args)})
        for _ in range(n):
            try:
                p = subprocess.Popen([sys.executable, "-m", "mepgen.evaluate.lint_workers"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
                p.stdin.write(setup + "\n")
                p.stdin.flush()
            except OSError:
                continue
            self.procs.append(p)
            self.idle.put(p)
        self.alive = len(self.procs)

    def check(self, text: str) -> list[RuleViolation]:
        while self.alive:
            p = self.idle.get()
            if p is None:                    # the last worker ended: every waiting thread checks here
                self.idle.put(None)
                break
            try:
                p.stdin.write(json.dumps(text) + "\n")
                p.stdin.flush()
                line = p.stdout.readline()
                found = [RuleViolation(str(r), int(n), str(t)) for r, n, t in json.loads(line)]
            except (OSError, ValueError, TypeError):      # it ended (memory, a signal): not asked again
                self._lost(p)
                continue
            self.idle.put(p)
            return found
        return rules.check(text, *self.args)

    def _lost(self, p: subprocess.Popen) -> None:
        p.kill()
        with self.lock:
            self.alive -= 1
            if self.alive == 0:
                self.idle.put(None)

    def close(self) -> None:
        for p in self.procs:
            try:
                p.stdin.close()
            except OSError:
                pass    # the worker already ended (its pipe broken): nothing left to close
        deadline = time.monotonic() + 5.0          # a worker stuck in libclang does not hold mepgen up longer
        for p in self.procs:
            try:
                p.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
            if p.stdout is not None:
                p.stdout.close()
        self.procs, self.alive = [], 0


def serve(stdin=sys.stdin, stdout=sys.stdout) -> None:
    """The worker: a setup line (the original, chain, target, flags), then a candidate's text per line."""
    setup = json.loads(stdin.readline())
    args = (setup["original"], setup["chain"], setup["target"], tuple(setup["args"]))
    rules.check(args[0], *args)              # the preamble, while the proposers write the first candidates
    for line in stdin:
        found = rules.check(json.loads(line), *args)
        stdout.write(json.dumps([[v.rule, v.line, v.text] for v in found]) + "\n")
        stdout.flush()


if __name__ == "__main__":
    serve()
