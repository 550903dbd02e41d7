#!/usr/bin/env python3
"""Does the library's parameter search (hillclimb, the default) beat random search on real GPU timings?

Two steps, so that the GPU is needed once:
1. `measure` (GPU): every legal point of one transformation's space on one kernel, each verified and timed by
   the evaluator (cost = candidate time / baseline time, None when it failed), written to a JSON table after
   every batch;
2. `replay` (anywhere): both strategies of mepgen.optimize.library.tuning run against that table for many
   seeds and several budgets: the mean best cost found and how often each lands within 5% of the space's best.

    python3 bench/tuning_strategies.py measure --app dense --kernel matmul --transformation tile_matmul --out T.json
    python3 bench/tuning_strategies.py replay T.json --record bench/results/tuning_strategies.md
"""
from __future__ import annotations

import argparse
import datetime
import importlib.util
import itertools
import json
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))


def measure(args) -> int:
    from library_optimize import gpu_facts, prepare_app
    from mepgen.evaluate import Evaluator, Options
    from mepgen.optimize import candidates
    from mepgen.optimize.library.base import current_launch
    from mepgen.optimize.library.catalog import all_transformations
    from mepgen.optimize.library.proposer import cost_of
    from mepgen.optimize.library.source import KernelSource, Refused
    from mepgen.optimize.proposer import Proposal
    from mepgen.spec import load_spec

    mep = next(m for m in prepare_app(args.app, args.workdir) if m.name == args.kernel)
    spec = load_spec(mep / "mep.yaml")
    t = next(x for x in all_transformations() if x.name == args.transformation)
    backend = "pycuda" if importlib.util.find_spec("pycuda") else "native"
    ev = Evaluator(spec, mep, Options(backend=backend, rounds=args.rounds, reps=args.reps))
    try:
        ev.prepare()
        src = KernelSource(ev.original_text, spec)
        launch = current_launch(spec, None)
        space = t.space(src, spec, launch)
        table = {"gpu": gpu_facts(), "date": datetime.datetime.now().isoformat(timespec="seconds"),
                 "app": args.app, "kernel": args.kernel, "transformation": t.name, "backend": backend,
                 "space": space, "defaults": t.defaults, "points": []}
        points = [dict(zip(space, combo)) for combo in itertools.product(*space.values())]
        print(f"{len(points)} points", flush=True)
        for i in range(0, len(points), args.batch):
            props, chunk = [], []
            for p in points[i:i + args.batch]:
                try:
                    rw = t.apply(src, spec, launch, p)
                except Refused as e:
                    table["points"].append({"params": p, "cost": None, "refused": str(e)})
                    continue
                chunk.append(p)
                props.append(Proposal(text=rw.text, change=rw.explanation, source="library",
                                      transformations=[{"name": t.name, "params": p}],
                                      launch=rw.launch, nvcc_flags=list(rw.nvcc_flags)))
            results = candidates.evaluate(ev, mep, spec, props, mep / "tuning-candidates") if props else []
            for p, r in zip(chunk, results):
                ms = r.timed.median_ms if getattr(r, "timed", None) else None
                table["points"].append({"params": p, "cost": cost_of(r), "median_ms": ms})
            args.out.write_text(json.dumps(table, indent=1) + "\n")
            print(f"{len(table['points'])}/{len(points)}", flush=True)
    finally:
        ev.close()
    return 0


def replay(args) -> int:
    from mepgen.optimize.library.tuning import key, tune

    table = json.loads(args.table.read_text())
    space = table["space"]
    cost = {key(p["params"]): p["cost"] for p in table["points"]}
    missing = [p for p in itertools.product(*space.values()) if key(dict(zip(space, p))) not in cost]
    if missing:
        raise SystemExit(f"tuning_strategies: the table lacks {len(missing)} of the space's points: measure again")
    ok = [c for c in cost.values() if c is not None]
    best = min(ok)
    lines = [f"# Parameter search against random search: {table['transformation']} on {table['app']}/{table['kernel']}",
             "", f"- GPU: {table['gpu']}; measured {table['date']} ({table['backend']} backend)",
             f"- command: `python3 bench/tuning_strategies.py measure --app {table['app']} --kernel {table['kernel']} "
             f"--transformation {table['transformation']}`, then `replay` ({args.seeds} seeds per strategy and budget)",
             f"- space: {', '.join(f'{k} {v}' for k, v in space.items())} = {len(cost)} points, {len(ok)} verified; "
             f"defaults {table['defaults']}",
             f"- cost = candidate time / baseline time; best in the space {best:.4f} "
             f"({1 / best:.2f}x); median point {statistics.median(ok):.4f}", "",
             "| budget | strategy | mean best cost | mean / space best | runs within 5% of the best |",
             "|---|---|---|---|---|"]
    for budget in args.budgets:
        for strategy in ("hillclimb", "random"):
            found = []
            for seed in range(args.seeds):
                r = tune(space, budget, lambda p: cost[key(p)], strategy, seed=seed,
                         defaults=table["defaults"] if strategy == "hillclimb" else None)
                found.append(r.best_cost if r.best_cost is not None else float("inf"))
            mean = statistics.mean(found)
            near = sum(f <= best * 1.05 for f in found) / len(found)
            lines.append(f"| {budget} | {strategy} | {mean:.4f} | {mean / best:.3f} | {100 * near:.0f}% |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.record:
        args.record.write_text(text)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("measure")
    m.add_argument("--app", default="dense")
    m.add_argument("--kernel", default="matmul")
    m.add_argument("--transformation", default="tile_matmul")
    m.add_argument("--batch", type=int, default=32)
    m.add_argument("--rounds", type=int, default=2)
    m.add_argument("--reps", type=int, default=10)
    m.add_argument("--workdir", type=Path, default=Path("/tmp/mepgen-tuning-bench"))
    m.add_argument("--out", type=Path, required=True)
    r = sub.add_parser("replay")
    r.add_argument("table", type=Path)
    r.add_argument("--budgets", type=int, nargs="+", default=[4, 8, 16, 32])
    r.add_argument("--seeds", type=int, default=200)
    r.add_argument("--record", type=Path)
    args = ap.parse_args()
    return measure(args) if args.cmd == "measure" else replay(args)


if __name__ == "__main__":
    sys.exit(main())
