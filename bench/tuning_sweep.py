#!/usr/bin/env python3
"""GPU: does the library's tuning search (tune_params, hill climbing) land within 5 % of an exhaustive block sweep?

    python3 bench/tuning_sweep.py OUT PATH... [--budget 12] [--batch 4] [--deadline 360] [--rounds 2] [--work DIR]

PATH: an MEP folder (`APP/.mepgen/meps/ID`) or an application folder (its MEPs; an app without .mepgen/meps/ is
copied into --work and cut with `mepgen extract` + `mepgen mep --all` first). MEPs with open todo items are skipped.
For each MEP, with one evaluator (every point built, verified on every input set and timed against the original):

1. sweep: every block size of the kernel's block axis (launch_config's values where the launch alone sets the
   block; else the values of the tunable size the block spells, tune_params' `size:SYM`), the others at the
   kernel's own values, plus the original itself (cost 1.0);
2. search: tune_params' whole space (block or tunable sizes, launch bounds, register cap) walked by the library's
   strategy (hillclimb, tuning.py) from its first point, `--batch` points per step (ask/tell) until `--budget`
   evaluations; the original counts as a point (cost 1.0: keeping it is always possible).

cost = candidate time / original time (None: failed or wrong). Recorded per MEP: the sweep's best, the search's
best and whether the search is within 5 % of the sweep (search best <= 1.05 x sweep best). OUT/<mep>.json after each
MEP and OUT/tuning_sweep.md (table + share within 5 %) after each, so a run cut short by its time limit keeps what
it measured. Kernels are started until --deadline seconds have passed; the rest are listed as not run.
"""
from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import random
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

NEAR = 1.05


def sweep_axis(space: dict) -> str | None:
    """The axis that sets the block: `block`, else the first tunable size (tune_params lists those the launch
    spells; one that the block spells comes first where there are several)."""
    if "block" in space:
        return "block"
    sizes = [k for k in space if k.startswith("size:")]
    return sizes[0] if sizes else None


def evaluate_points(ev, mep, spec, src, launch, t, points, work, table_key: str) -> list[dict]:
    from mepgen.optimize import candidates
    from mepgen.optimize.library.proposer import cost_of
    from mepgen.optimize.library.source import Refused
    from mepgen.optimize.proposer import Proposal
    rows, props, chunk = [], [], []
    for p in points:
        try:
            rw = t.apply(src, spec, launch, p)
        except Refused as e:
            rows.append({"params": p, "cost": 1.0 if "nothing to change" in str(e) else None, "note": str(e)})
            continue
        chunk.append(p)
        props.append(Proposal(text=rw.text, change=rw.explanation, source="library",
                              transformations=[{"name": t.name, "params": p}], launch=rw.launch,
                              nvcc_flags=list(rw.nvcc_flags)))
    results = candidates.evaluate(ev, mep, spec, props, work / table_key) if props else []
    for p, r in zip(chunk, results):
        rows.append({"params": p, "cost": cost_of(r), "status": getattr(r, "status", None),
                     "median_ms": r.timed.median_ms if getattr(r, "timed", None) else None})
    return rows


def one(mep: Path, args, work: Path) -> dict:
    from mepgen.evaluate import Evaluator, Options
    from mepgen.optimize.library.base import current_launch
    from mepgen.optimize.library.source import KernelSource, Refused
    from mepgen.optimize.library.tunables import TuneParams
    from mepgen.optimize.library.tuning import key, suggest
    from mepgen.spec import load_spec
    spec = load_spec(mep / "mep.yaml")
    row = {"mep": str(mep), "kernel": spec.kernel.id}
    if spec.todo:
        return {**row, "skipped": f"{len(spec.todo)} open todo item(s)"}
    src = KernelSource((mep / "kernel.cu").read_text(errors="replace"), spec)
    launch = current_launch(spec, None)
    t = TuneParams()
    try:
        space = t.space(src, spec, launch)
        first = t.first_point(src, spec, launch)
        current = t._axes(src, spec, launch)[1]
    except Refused as e:
        return {**row, "skipped": f"tune_params: {e}"}
    axis = sweep_axis(space)
    if axis is None:
        return {**row, "skipped": "no block axis (only launch bounds and a register cap): nothing to sweep",
                "space": space}
    backend = "pycuda" if args.backend == "auto" and importlib.util.find_spec("pycuda") else \
        ("native" if args.backend == "auto" else args.backend)
    ev = Evaluator(spec, mep, Options(backend=backend, rounds=args.rounds))
    started = time.time()
    try:
        ev.prepare()
        sweep = evaluate_points(ev, mep, spec, src, launch, t, [{**current, axis: v} for v in space[axis]],
                                work / spec.kernel.id, "sweep")
        seen = {key(current): (current, 1.0)}
        history = []
        rng = random.Random(0)
        while len(seen) - 1 < args.budget:
            batch = suggest(space, seen, min(args.batch, args.budget - (len(seen) - 1)), rng, "hillclimb", first)
            if not batch:
                break
            rows = evaluate_points(ev, mep, spec, src, launch, t, batch, work / spec.kernel.id, "search")
            for r in rows:
                seen[key(r["params"])] = (r["params"], r["cost"])
                history.append(r)
    finally:
        ev.close()
    ok_sweep = [r["cost"] for r in sweep if r["cost"] is not None] + [1.0]
    ok_search = [r["cost"] for r in history if r["cost"] is not None] + [1.0]
    best_sweep, best_search = min(ok_sweep), min(ok_search)
    return {**row, "space": space, "axis": axis, "sweep": sweep, "search": history,
            "sweep_best": best_sweep, "search_best": best_search,
            "sweep_best_point": next((r["params"] for r in sweep if r["cost"] == best_sweep), current),
            "search_best_point": next((r["params"] for r in history if r["cost"] == best_search), current),
            "within_5pct": best_search <= best_sweep * NEAR, "seconds": round(time.time() - started, 1)}


def summary(rows: list[dict], gpu: str, command: str) -> str:
    done = [r for r in rows if "within_5pct" in r]
    near = sum(r["within_5pct"] for r in done)
    lines = ["# Tuning search (tune_params, hillclimb) against an exhaustive block sweep", "",
             f"- GPU: {gpu}; {datetime.datetime.now().isoformat(timespec='seconds')}", f"- command: `{command}`",
             f"- cost = candidate time / original time (every point verified on every input set); 1.0 = the original",
             f"- **search within 5 % of the sweep's best: {near} of {len(done)} MEPs**", "",
             "| kernel | axis | sweep best (point) | search best (point) | evaluations (sweep / search) | within 5 % |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        name = "/".join(Path(r["mep"]).parts[-4::3])
        if "within_5pct" not in r:
            lines.append(f"| {name} | - | {r.get('skipped') or r.get('error') or 'not run'} | | | |")
            continue
        lines.append(f"| {name} | {r['axis']} | {r['sweep_best']:.3f} ({r['sweep_best_point'].get(r['axis'])}) | "
                     f"{r['search_best']:.3f} ({r['search_best_point']}) | {len(r['sweep'])} / {len(r['search'])} | "
                     f"{'yes' if r['within_5pct'] else 'NO'} |")
    return "\n".join(lines) + "\n"


def meps_of(paths: list[Path], work: Path) -> list[Path]:
    from library_speedup import prepare
    out = []
    for p in paths:
        out += [app / ".mepgen" / "meps" / mid for app, mid in prepare(p.resolve(), work / "apps", [])]
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("paths", type=Path, nargs="+")
    ap.add_argument("--budget", type=int, default=12, help="search evaluations per MEP")
    ap.add_argument("--batch", type=int, default=4, help="points per search step (built in parallel)")
    ap.add_argument("--deadline", type=float, default=360,
                    help="seconds after which no new MEP is started (one MEP takes 1 to 3 minutes: 360 keeps a call "
                         "under 9)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--backend", default="auto")
    ap.add_argument("--work", type=Path, default=Path("/tmp/mepgen-tuning-sweep"))
    args = ap.parse_args(argv)
    from library_speedup import gpu_name
    t0 = time.time()
    args.out.mkdir(parents=True, exist_ok=True)
    command = "python3 bench/tuning_sweep.py " + " ".join(sys.argv[1:] if argv is None else argv)
    rows = []
    for mep in meps_of(args.paths, args.work):
        if time.time() - t0 > args.deadline:
            rows.append({"mep": str(mep), "kernel": mep.name, "skipped": "not run (deadline)"})
            continue
        try:
            row = one(mep, args, args.work)
        except Exception as e:          # one MEP's failure is a result, not the end of the sweep
            row = {"mep": str(mep), "kernel": mep.name, "error": f"{type(e).__name__}: {e}"[:300]}
        rows.append(row)
        (args.out / f"{Path(mep).parts[-4]}.{mep.name}.json").write_text(json.dumps(row, indent=1, default=str))
        (args.out / "tuning_sweep.md").write_text(summary(rows, gpu_name(), command))
        print(f"{mep.name}: {row.get('within_5pct', row.get('skipped') or row.get('error'))}", flush=True)
    text = summary(rows, gpu_name(), command)
    (args.out / "tuning_sweep.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
