#!/usr/bin/env python3
"""No GPU: where a search's wall time goes on the CPU side. The real Search, the real library proposer, the real
rules and candidates.Stream (or candidates.evaluate of old) on an MEP; nvcc and the GPU's judgement are stand-ins
that sleep (defaults: 0.75 s a compile and 0.10 s a check, the phases measured per candidate on an H200 host,
bench/results/evaluator_rate_2026-11-28/), or nvcc for real with --nvcc.

    python3 bench/search_pipeline.py MEP_DIR [--budget 25] [--width 8] [--jobs 16] [--compile-s 0.75] [--gpu-s 0.1]
        [--nvcc] [--mode stream|batch|evaluate] [--lint-workers N] [--no-lookahead] [--json OUT]

MEP_DIR: an MEP folder (APP/.mepgen/meps/ID) made by `mepgen mep`. Modes: `stream` (candidates.Stream with
--lint-workers rule workers: proposals submitted as they come; the default on 8 cores or more), `batch`
(candidates.Stream without them: whole rounds, the default on fewer cores), `evaluate` (candidates.evaluate per
round: an older mepgen's door, for a tree without Stream). Prints the wall time, candidates per minute, and the
seconds spent proposing (serial, in this process), in the rules, in compiles and on the stand-in GPU.
--jobs only sizes the compile threads; the stand-in compiles take no CPU, the proposer and the rules take this
machine's. The stand-in compile is cached by content, launch and flags, as the real build is (a compile ahead,
optimize/lookahead.py, is found by the submit after it); --no-lookahead turns the lookahead off, and the row says
how many proposals it compiled ahead and how many of them a round then proposed.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import SimpleNamespace


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mep", type=Path)
    ap.add_argument("--budget", type=int, default=25)
    ap.add_argument("--width", type=int, default=8)
    ap.add_argument("--jobs", type=int, default=16)
    ap.add_argument("--compile-s", type=float, default=0.75)
    ap.add_argument("--gpu-s", type=float, default=0.10)
    ap.add_argument("--nvcc", action="store_true", help="compile with nvcc (pycuda_entry.build_cubin) instead")
    ap.add_argument("--mode", choices=["stream", "batch", "evaluate"], default="stream")
    ap.add_argument("--lint-workers", type=int, default=1)
    ap.add_argument("--no-lookahead", action="store_true", help="no next round compiled ahead (optimize/lookahead.py)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()

    from mepgen.evaluate.evaluator import Evaluator, Options, Worker
    from mepgen.evaluate.results import CompileInfo, EvalResult, Timed
    from mepgen.evaluate.backend import Built
    from mepgen.evaluate import rules
    from mepgen.optimize import candidates, strategies
    from mepgen.optimize.command import gpu_info, library_proposer
    from mepgen.optimize.features import kernel_features
    from mepgen.optimize.proposer import Context
    from mepgen.optimize.search import Budget, Search
    from mepgen.optimize.trajectory import Trajectory
    from mepgen.spec import load_spec

    mep = args.mep.resolve()
    spec = load_spec(mep / "mep.yaml")
    out = Path(tempfile.mkdtemp(prefix="mepgen-search-pipeline-"))
    spent: dict[str, float] = {"propose": 0.0, "lint": 0.0, "compile": 0.0, "gpu": 0.0}
    lock = threading.Lock()

    def note(what: str, since: float) -> None:
        with lock:
            spent[what] += time.monotonic() - since

    builds: dict[tuple, threading.Event] = {}

    class Backend:
        def compile(self, kernel_file, launch=None, flags=()):
            key = (Path(kernel_file).read_text(), repr(launch), tuple(flags))     # the build cache's key
            with lock:
                done, mine = builds.get(key), key not in builds
                if mine:
                    done = builds[key] = threading.Event()
            if not mine:
                done.wait()
                return Built(Path(kernel_file), None, "k", CompileInfo(seconds=0.0), "", {})
            t = time.monotonic()
            try:
                if args.nvcc:
                    from mepgen.evaluate.launchcfg import with_flags, with_launch
                    from mepgen.evaluate.pycuda_entry import build_cubin
                    s = with_flags(spec if launch is None else with_launch(spec, launch), flags)
                    return build_cubin(s, mep, Path(kernel_file), out / "build", 300, level="off")
                time.sleep(args.compile_s)
                return Built(Path(kernel_file), None, "k", CompileInfo(seconds=args.compile_s), "", {})
            finally:
                note("compile", t)
                done.set()

    class StandIn:
        """The part of Evaluator that the candidates' door calls; check() sleeps as the GPU would judge."""
        compile = Evaluator.compile
        _phase_of, _phase = Evaluator._phase_of, Evaluator._phase

        def __init__(self):
            self.opts = Options(jobs=args.jobs, use_cache=False)
            self.store = SimpleNamespace(results_dir=out / "results")
            self.workers = [Worker(0, Backend())]
            self.mep_dir, self.spec, self.original_text = mep, spec, (mep / "kernel.cu").read_text()

        def lint_inputs(self):
            return (self.original_text, [c.kernel for c in spec.chain], spec.kernel.name, rules.parse_args(spec, mep))

        def new_result(self, name, path, launch=None, flags=(), lint=True):
            text = Path(path).read_text()
            res = EvalResult(name=name, key=hashlib.sha256(text.encode()).hexdigest(), backend="stand-in",
                             kernel_sha256="-", input_sets=spec.verify.input_sets)
            return self.lint(res, text) if lint else res

        def lint(self, res, text, check=None):
            t = time.monotonic()
            res.rules = check(text) if check is not None else rules.check(text, *self.lint_inputs())
            note("lint", t)
            if res.rules:
                res.status, res.stage = "rejected_by_rules", "lint"
            return res

        def check(self, res, built, worker):
            t = time.monotonic()
            time.sleep(args.gpu_s)
            note("gpu", t)
            sp = 0.9 + int(res.key[:4], 16) / 65536 * 0.5        # a speedup the text decides, 0.9x to 1.4x
            res.status, res.stage, res.seconds = "ok", "done", args.gpu_s
            res.timed = Timed(median_ms=1 / sp, spread=0.01, min_ms=1 / sp, max_ms=1 / sp, launches=10, rounds=3,
                              baseline_median_ms=1.0, speedup=sp, noise=0.02,
                              decision="faster" if sp > 1.02 else "same", why="stand-in")
            return res

    ev = StandIn()
    gpu = gpu_info(SimpleNamespace(workers=[SimpleNamespace(peaks=None)]), SimpleNamespace(device="NVIDIA H200"))
    ctx = Context(spec=spec, mep_dir=mep, original=ev.original_text, gpu=gpu,
                  features=kernel_features(spec, ev.original_text, gpu["name"], mep))
    proposer = library_proposer()
    real_propose = proposer.propose

    def propose(*a, **k):
        t = time.monotonic()
        try:
            return real_propose(*a, **k)
        finally:
            note("propose", t)
    proposer.propose = propose
    if args.mode == "evaluate":
        evaluate = lambda props, work: candidates.evaluate(ev, mep, spec, props, work)     # noqa: E731
        stream = None
    else:
        stream = evaluate = candidates.Stream(ev, mep, spec, lint_processes=args.lint_workers if args.mode == "stream"
                                              else 0)
    traj = Trajectory(out / "run", {"kernel": spec.kernel.id}, progress=lambda line: None)
    start = time.monotonic()
    search = Search(ctx, [proposer], evaluate, strategies.make("elite"), Budget(args.budget, None, 2, args.width),
                    traj, start=start)
    if args.no_lookahead:
        search.lookahead.prefetch = None
    outcome = search.run()
    wall = time.monotonic() - start
    if stream is not None:
        stream.close()
    shutil.rmtree(out, ignore_errors=True)
    row = {"mep": spec.kernel.id, "mode": args.mode, "width": args.width, "jobs": args.jobs,
           "lint_workers": args.lint_workers if args.mode == "stream" else 0, "evaluations": outcome.evaluations,
           "wall_s": round(wall, 2), "per_min": round(outcome.evaluations / wall * 60, 1),
           **{f"{k}_s": round(v, 2) for k, v in spent.items()},
           "ahead": getattr(getattr(search, "lookahead", None), "compiled", None),
           "ahead_used": getattr(getattr(search, "lookahead", None), "used", None)}
    print(json.dumps(row))
    if args.json:
        args.json.write_text(json.dumps(row) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
