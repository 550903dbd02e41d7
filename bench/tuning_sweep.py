#!/usr/bin/env python3
"""GPU: does the library's tuning search (tune_params, hill climbing) land within 5 % of an exhaustive sweep?

    python3 bench/tuning_sweep.py OUT PATH... [--budget 8] [--batch 4] [--total 330] [--rounds 2] [--work DIR]
    python3 bench/tuning_sweep.py --pack DEST PATH... [--per-app 2] [--max 20] [--max-mib 256]    # CPU: choose

PATH: an MEP folder (`APP/.mepgen/meps/ID`), an application folder with `.mepgen/meps/`, or a folder of those
(`library_sweep.py prepare`'s `OUT/apps`); an application folder without MEPs is copied into --work and cut with
`mepgen extract` + `mepgen mep --all` first. MEPs with open todo items are skipped.

--pack (no GPU) chooses the MEPs by a fixed rule and copies their text files (mep.yaml, kernel.cu, harness.cu,
Makefile; no data: the evaluator makes the input sets) to DEST/APP/.mepgen/meps/ID, small enough to carry to the
GPU machine: in sorted order (application, then id), MEPs without todo items whose tune_params space has a block
axis and whose buffers are at most --max-mib at mep.yaml's sizes, at most --per-app per application, --max in all.
DEST/selection.md lists every MEP looked at and why each left out was.

For each MEP, with one evaluator (every point built, verified on every input set and timed against the original):

1. sweep: every block size of the kernel's block axis (launch_config's values where the launch alone sets the
   block; else the values of the tunable size the block spells, tune_params' `size:SYM`), the others at the
   kernel's own values, plus the original itself (cost 1.0); a kernel without a block axis (most captured launches:
   a block the kernel's shared arrays or reductions fix) has its whole space swept, launch bounds x register cap
   (at most MAX_FULL points; axis `bounds x regs` in the table);
2. search: tune_params' whole space (block or tunable sizes, launch bounds, register cap) walked by the library's
   strategy (hillclimb, tuning.py) from its first point, `--batch` points per step (ask/tell) until `--budget`
   evaluations; the original counts as a point (cost 1.0: keeping it is always possible). A point the sweep
   measured already is not built again: the search is charged for it and gets the sweep's cost.

cost = candidate time / original time (None: failed or wrong). Recorded per MEP: the sweep's best, the search's
best and whether the search is within 5 % of the sweep (search best <= 1.05 x sweep best). OUT/<mep>.json after each
MEP and OUT/tuning_sweep.md (table + share within 5 %) after each, so a run cut short keeps what it measured.
Time is bounded by --total seconds for the whole run: each MEP gets an equal share of what is left (the time left /
the MEPs left), is started only while time is left and stops between batches when its share is spent; an MEP whose
sweep was cut has no verdict (it is listed, not counted).
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


def evaluate_points(ev, mep, spec, src, launch, t, points, work, table_key: str, cache: dict | None = None) -> list[dict]:
    """Each point built, verified and timed (rows with its cost); a point in `cache` (key -> row) is not built
    again: its row is the cached one, marked `cached`."""
    from mepgen.optimize import candidates
    from mepgen.optimize.library.proposer import cost_of
    from mepgen.optimize.library.source import Refused
    from mepgen.optimize.library.tuning import key
    from mepgen.optimize.proposer import Proposal
    rows, props, chunk = [], [], []
    for p in points:
        if cache is not None and key(p) in cache:
            rows.append({**cache[key(p)], "params": p, "cached": True})
            continue
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
    if cache is not None:
        for r in rows:
            if not r.get("cached"):
                cache[key(r["params"])] = {k: v for k, v in r.items() if k != "params"}
    return rows


def space_of(mep: Path):
    """The CPU half of one MEP: (row, context) where context is (spec, src, launch, t, space, first, current, axis),
    or (row with `skipped` and its reason, None)."""
    from mepgen.optimize.library.base import current_launch
    from mepgen.optimize.library.source import KernelSource, Refused
    from mepgen.optimize.library.tunables import TuneParams
    from mepgen.spec import load_spec
    spec = load_spec(mep / "mep.yaml")
    row = {"mep": str(mep), "kernel": spec.kernel.id}
    if spec.todo:
        return {**row, "skipped": f"{len(spec.todo)} open todo item(s)"}, None
    try:
        src = KernelSource((mep / "kernel.cu").read_text(errors="replace"), spec)
    except Refused as e:
        return {**row, "skipped": f"kernel.cu: {e}"}, None
    launch = current_launch(spec, None)
    t = TuneParams()
    try:
        space = t.space(src, spec, launch)
        first = t.first_point(src, spec, launch)
        current = t._axes(src, spec, launch)[1]
    except Refused as e:
        return {**row, "skipped": f"tune_params: {e}"}, None
    axis = sweep_axis(space)
    if axis is None and product(space) > MAX_FULL:
        return {**row, "skipped": f"no block axis, and the whole space has {product(space)} points (more than "
                                  f"{MAX_FULL}): nothing swept", "space": space}, None
    return row, (spec, src, launch, t, space, first, current, axis or FULL)


#: a kernel without a block axis (a captured launch whose block the kernel's shared arrays or reductions fix) still
#: has launch bounds and a register cap to tune: its whole space (at most MAX_FULL points) is the exhaustive sweep
FULL = "bounds x regs"
MAX_FULL = 32


def product(space: dict) -> int:
    n = 1
    for values in space.values():
        n *= len(values)
    return n


def sweep_points(space: dict, current: dict, axis: str) -> list[dict]:
    """The sweep: every value of the block axis, the other axes at the kernel's own; with FULL every point of the
    space (launch bounds x register cap), in the space's order."""
    if axis != FULL:
        return [{**current, axis: v} for v in space[axis]]
    points = [dict(current)]
    for name, values in space.items():
        points = [{**p, name: v} for p in points for v in values]
    return points


def one(mep: Path, args, work: Path) -> dict:
    from mepgen.evaluate import Evaluator, Options
    from mepgen.optimize.library.tuning import key, suggest
    row, context = space_of(mep)
    if context is None:
        return row
    spec, src, launch, t, space, first, current, axis = context
    backend = "pycuda" if args.backend == "auto" and importlib.util.find_spec("pycuda") else \
        ("native" if args.backend == "auto" else args.backend)
    ev = Evaluator(spec, mep, Options(backend=backend, rounds=args.rounds))
    started = time.time()
    share = getattr(args, "share", None)
    over = (lambda: share is not None and time.time() - started > share)
    cache, sweep, history, cut = {}, [], [], None
    points = sweep_points(space, current, axis)
    try:
        ev.prepare()
        step = max(1, 2 * args.batch)
        for i in range(0, len(points), step):
            if over():
                cut = f"time share of {share:.0f} s spent after {len(sweep)} of {len(points)} sweep points"
                break
            sweep += evaluate_points(ev, mep, spec, src, launch, t, points[i:i + step], work / spec.kernel.id,
                                     "sweep", cache)
        seen = {key(current): (current, 1.0)}
        rng = random.Random(0)
        while cut is None and len(seen) - 1 < args.budget:
            if over():
                cut = f"time share of {share:.0f} s spent after {len(history)} of {args.budget} search points"
                break
            batch = suggest(space, seen, min(args.batch, args.budget - (len(seen) - 1)), rng, "hillclimb", first)
            if not batch:
                break
            rows = evaluate_points(ev, mep, spec, src, launch, t, batch, work / spec.kernel.id, "search", cache)
            for r in rows:
                seen[key(r["params"])] = (r["params"], r["cost"])
                history.append(r)
    finally:
        ev.close()
    return verdict({**row, "space": space, "axis": axis, "sweep": sweep, "search": history,
                    "seconds": round(time.time() - started, 1)}, current, len(points), cut)


def verdict(row: dict, current: dict, sweep_points: int, cut: str | None) -> dict:
    """The MEP's bests and whether the search is within 5 % of the sweep; no verdict where the sweep was cut
    short (its best is not the exhaustive one); a search cut short is judged on what it reached."""
    sweep, history = row["sweep"], row["search"]
    ok_sweep = [r["cost"] for r in sweep if r["cost"] is not None] + [1.0]
    ok_search = [r["cost"] for r in history if r["cost"] is not None] + [1.0]
    best_sweep, best_search = min(ok_sweep), min(ok_search)
    row.update(sweep_best=best_sweep, search_best=best_search,
               sweep_best_point=next((r["params"] for r in sweep if r["cost"] == best_sweep), current),
               search_best_point=next((r["params"] for r in history if r["cost"] == best_search), current))
    if cut is not None:
        row["cut"] = cut
    if len(sweep) < sweep_points:
        return row
    row["within_5pct"] = best_search <= best_sweep * NEAR
    return row


def summary(rows: list[dict], gpu: str, command: str) -> str:
    done = [r for r in rows if "within_5pct" in r]
    near = sum(r["within_5pct"] for r in done)
    lines = ["# Tuning search (tune_params, hillclimb) against an exhaustive block sweep", "",
             f"- GPU: {gpu}; {datetime.datetime.now().isoformat(timespec='seconds')}", f"- command: `{command}`",
             f"- cost = candidate time / original time (every point verified on every input set); 1.0 = the original",
             f"- **search within 5 % of the sweep's best: {near} of {len(done)} MEPs**",
             f"- of which with a block axis (the block swept, the rest at the kernel's own): "
             f"{sum(r['within_5pct'] for r in done if r['axis'] != FULL)} of "
             f"{sum(1 for r in done if r['axis'] != FULL)}; without one (`{FULL}`: the whole space swept): "
             f"{sum(r['within_5pct'] for r in done if r['axis'] == FULL)} of {sum(1 for r in done if r['axis'] == FULL)}",
             "",
             "| kernel | axis | sweep best (point) | search best (point) | evaluations (sweep / search) | within 5 % |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        name = "/".join(Path(r["mep"]).parts[-4::3])
        if "within_5pct" not in r:
            lines.append(f"| {name} | {r.get('axis', '-')} | {r.get('skipped') or r.get('error') or r.get('cut') or 'not run'}"
                         f" | | | |")
            continue
        best = r["sweep_best_point"] if r["axis"] == FULL else r["sweep_best_point"].get(r["axis"])
        lines.append(f"| {name} | {r['axis']} | {r['sweep_best']:.3f} ({best}) | "
                     f"{r['search_best']:.3f} ({r['search_best_point']}) | {len(r['sweep'])} / {len(r['search'])} | "
                     f"{'yes' if r['within_5pct'] else 'NO'} |")
    return "\n".join(lines) + "\n"


def meps_of(paths: list[Path], work: Path) -> list[Path]:
    """The MEP folders PATHs name: an MEP, an application's MEPs, every MEP of a folder of those (one level), or an
    application without MEPs copied into `work` and cut first."""
    out = []
    for p in paths:
        p = p.resolve()
        if (p / "mep.yaml").is_file():
            out.append(p)
        elif (p / ".mepgen" / "meps").is_dir():
            out += sorted(d for d in (p / ".mepgen" / "meps").iterdir() if (d / "mep.yaml").is_file())
        elif p.is_dir() and any((d / "mep.yaml").is_file() or (d / ".mepgen" / "meps").is_dir()
                                for d in p.iterdir() if d.is_dir()):
            out += meps_of(sorted(d for d in p.iterdir() if d.is_dir() and ((d / "mep.yaml").is_file() or
                                                                         (d / ".mepgen" / "meps").is_dir())), work)
        else:
            from library_speedup import prepare
            out += [app / ".mepgen" / "meps" / mid for app, mid in prepare(p, work / "apps", [])]
    return out


PACKED = ("mep.yaml", "kernel.cu", "harness.cu", "Makefile")


def buffer_mib(spec) -> float | None:
    """The MiB of the MEP's buffers at mep.yaml's sizes (count x element size, summed), None where one is unknown."""
    from mepgen.spec import itemsize
    total = 0
    for prm in spec.params:
        if prm.role == "scalar":
            continue
        n = spec.size(str(prm.count)) if prm.count is not None else None
        if n is None or prm.dtype is None:
            return None
        total += n * itemsize(prm.dtype)
    return total / 2**20


def pack(dest: Path, paths: list[Path], work: Path, per_app: int, most: int, max_mib: float) -> list[Path]:
    """The MEPs of `paths` chosen by the fixed rule (module doc), their text files copied under `dest`."""
    import shutil
    from collections import Counter
    taken, lines, apps = [], ["# MEPs chosen for the tuning sweep", "",
                              f"Rule: sorted by application then id; no todo; a block axis in tune_params' space; "
                              f"buffers <= {max_mib:g} MiB; <= {per_app} per application; {most} in all.", "",
                              "| MEP | chosen | why not |", "|---|---|---|"], Counter()
    for mep in sorted(meps_of(paths, work), key=lambda m: (m.parents[2].name, m.name)):
        app = mep.parents[2].name
        why = None
        if len(taken) >= most:
            why = f"{most} chosen already"
        elif apps[app] >= per_app:
            why = f"{per_app} of {app} chosen already"
        else:
            row, context = space_of(mep)
            why = row.get("skipped") or (None if context[7] != FULL else "no block axis in tune_params' space")
            if why is None:
                mib = buffer_mib(context[0])
                why = "buffer sizes unknown" if mib is None else \
                    (f"buffers of {mib:.0f} MiB" if mib > max_mib else None)
        lines.append(f"| {app}/{mep.name} | {'yes' if why is None else 'no'} | {why or ''} |")
        if why is not None:
            continue
        to = dest / app / ".mepgen" / "meps" / mep.name
        to.mkdir(parents=True, exist_ok=True)
        for f in PACKED:
            if (mep / f).is_file():
                shutil.copy2(mep / f, to / f)
        taken.append(to)
        apps[app] += 1
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "selection.md").write_text("\n".join(lines) + f"\n\n{len(taken)} chosen.\n")
    return taken


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument("out", type=Path, nargs="?")
    ap.add_argument("paths", type=Path, nargs="*")
    ap.add_argument("--budget", type=int, default=8, help="search evaluations per MEP")
    ap.add_argument("--batch", type=int, default=4, help="points per search step (built in parallel)")
    ap.add_argument("--total", "--deadline", dest="total", type=float, default=330,
                    help="seconds for the whole run: each MEP gets an equal share of what is left")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--backend", default="auto")
    ap.add_argument("--work", type=Path, default=Path("/tmp/mepgen-tuning-sweep"))
    ap.add_argument("--pack", type=Path, help="choose MEPs and copy their text files here (no GPU)")
    ap.add_argument("--per-app", type=int, default=2)
    ap.add_argument("--max", type=int, default=20)
    ap.add_argument("--max-mib", type=float, default=256)
    args = ap.parse_args(argv)
    if args.pack is not None:
        paths = ([args.out] if args.out is not None else []) + args.paths
        if not paths:
            ap.error("--pack needs PATHs")
        taken = pack(args.pack, paths, args.work, args.per_app, args.max, args.max_mib)
        print(f"{len(taken)} MEPs packed into {args.pack} (selection.md says why the others were not)")
        return 0
    if args.out is None or not args.paths:
        ap.error("OUT and at least one PATH are needed")
    from library_speedup import gpu_name
    t0 = time.time()
    args.out.mkdir(parents=True, exist_ok=True)
    command = "python3 bench/tuning_sweep.py " + " ".join(sys.argv[1:] if argv is None else map(str, argv))
    rows = []
    meps = meps_of(args.paths, args.work)
    gpu = gpu_name()
    for i, mep in enumerate(meps):
        left = args.total - (time.time() - t0)
        if left <= 0:
            rows.append({"mep": str(mep), "kernel": mep.name, "skipped": "not run (--total spent)"})
            continue
        args.share = left / (len(meps) - i)
        try:
            row = one(mep, args, args.work)
        except Exception as e:          # one MEP's failure is a result, not the end of the sweep
            row = {"mep": str(mep), "kernel": mep.name, "error": f"{type(e).__name__}: {e}"[:300]}
        rows.append(row)
        (args.out / f"{Path(mep).parts[-4]}.{mep.name}.json").write_text(json.dumps(row, indent=1, default=str))
        (args.out / "tuning_sweep.md").write_text(summary(rows, gpu, command))
        print(f"{mep.name}: {row.get('within_5pct', row.get('cut') or row.get('skipped') or row.get('error'))}",
              flush=True)
    text = summary(rows, gpu, command)
    (args.out / "tuning_sweep.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
