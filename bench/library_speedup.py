#!/usr/bin/env python3
"""GPU: `mepgen optimize` with the transformation library alone, per kernel, and the geometric-mean speedup per group.

    python3 bench/library_speedup.py OUT [PATH...] [--corpus ROOT] [--budget 16] [--seconds 12] [--deadline 420]
                                     [--size SYM=N ...] [--work DIR] [--jobs 8]

Group "own": each PATH, an application folder (copied into --work DIR/, extracted and cut into MEPs with
`mepgen mep --all`, unless it already holds .mepgen/meps/) or one MEP folder (`APP/.mepgen/meps/ID`).
Group "corpus" (--corpus ROOT, a folder holding hecbench/src/ and rodinia/cuda/): the naive dense linear-algebra
and stencil kernels of CORPUS (below), their apps prepared the same way; sizes are what mepgen derives (a run
command's arguments included); --size adds SYM=N for `mepgen mep` (only values the app's own run command uses).

For every MEP without open todo items it runs, as a user would,

    python -m mepgen.cli optimize ID -C APP --proposer library --no-inherit --budget B --time-limit S --json

and records the best verified speedup (1.0 where nothing verified was faster: the original is kept), the winning
change and the run folder. A kernel with open todo items is listed as skipped (with the count), one whose run
failed as failed; neither enters a geometric mean. Kernels are run in order until --deadline seconds have passed
since the first; the rest are listed as not run. Writes OUT/library_speedup.json and OUT/library_speedup.md
(per-kernel table, geometric mean per group and over all, the GPU, the command). Every win is the evaluator's
verdict: verified on every input set and timed against the original.
"""
from __future__ import annotations

import argparse
import json
import math
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

#: the corpus's naive dense linear-algebra and stencil kernels (not those already tiled in shared memory, see
#: bench/results/library_sweep.md): (app folder under ROOT, kernel ids of that app)
CORPUS = [
    ("hecbench/src/hellinger-cuda", ["hellinger"]),
    ("hecbench/src/minkowski-cuda", ["minkowski"]),
    ("hecbench/src/heat-cuda", ["solve"]),
    ("hecbench/src/heat2d-cuda", ["dev_lapl_iter"]),
    ("hecbench/src/laplace-cuda", ["red_kernel", "black_kernel"]),
    ("hecbench/src/tensorAccessor-cuda", ["raw_accessor_kernel"]),
    ("rodinia/cuda/gaussian", ["Fan1", "Fan2"]),
    ("rodinia/cuda/hotspot3D", ["hotspotOpt1"]),
]


def cli(args: list[str], cwd: Path, timeout: float) -> subprocess.CompletedProcess:
    try:
        return subprocess.run([sys.executable, "-m", "mepgen.cli", *args], cwd=cwd, capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(args, 124, "", f"timed out after {timeout:.0f} s")


def prepare(path: Path, work: Path, sizes: list[str], name: str | None = None) -> list[tuple[Path, str]]:
    """(application folder, MEP id) of every MEP PATH names (an app is copied to `work` and cut first)."""
    if (path / "mep.yaml").is_file():
        return [(path.parents[2], path.name)]
    app = path
    if not (path / ".mepgen" / "meps").is_dir():
        app = work / (name or path.name)
        if app.exists():
            shutil.rmtree(app)
        app.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(path, app, ignore=shutil.ignore_patterns(".mepgen", "build", "*.o"))
        extra = [a for s in sizes for a in ("--size", s)]
        for args in (["extract", "."], ["mep", "--all", *extra]):
            cli(args, app, 300)
    meps = app / ".mepgen" / "meps"
    return [(app, d.name) for d in sorted(meps.iterdir()) if (d / "mep.yaml").is_file()] if meps.is_dir() else []


def open_todo(app: Path, mid: str) -> int:
    sys.path.insert(0, str(REPO))
    from mepgen.spec import load_spec
    try:
        return len(load_spec(app / ".mepgen" / "meps" / mid / "mep.yaml").todo)
    except Exception:
        return -1


def run_optimize(app: Path, mid: str, budget: int, seconds: float) -> dict:
    """One `mepgen optimize` with the library alone: {"status": "ok", speedup, change, ...} or a failure."""
    done = cli(["optimize", mid, "-C", str(app), "--proposer", "library", "--no-inherit", "--budget", str(budget),
                "--time-limit", str(seconds), "--json"], app, seconds * 4 + 120)
    row = {"rc": done.returncode}
    try:
        res = json.loads(done.stdout)
        best = res.get("best")
        row.update(status="ok", baseline_ms=res.get("baseline_ms"), evaluations=res.get("evaluations"),
                   speedup=best["speedup"] if best else 1.0, change=best["change"] if best else "",
                   run=res.get("run"))
    except (json.JSONDecodeError, KeyError, TypeError, AttributeError):
        row.update(status="failed", error=(done.stderr or done.stdout).strip().splitlines()[-1:])
    return row


def geomean(values: list[float]) -> float | None:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def gpu_name() -> str:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=20).stdout.strip().splitlines()
        return out[0] if out else "unknown GPU"
    except (OSError, subprocess.TimeoutExpired):
        return "no nvidia-smi"


def jobs_of(a) -> list[tuple[str, Path, str | None, list[str] | None]]:
    """(group, path, name in the work folder, kernel ids to keep or None for all)."""
    jobs = [("own", p.resolve(), f"own.{p.resolve().parent.name}.{p.resolve().name}", None) for p in a.paths]
    if a.corpus is not None:
        for rel, ids in CORPUS:
            p = (a.corpus / rel).resolve()
            jobs.append(("corpus", p, f"corpus.{p.name}", ids))
    return jobs


def table(rows: list[dict], gpu: str, command: str) -> list[str]:
    groups = list(dict.fromkeys(r["group"] for r in rows))
    lines = [f"# mepgen optimize, library alone ({gpu})", "", f"`{command}`", ""]
    for g in groups + ["all"]:
        ok = [r["speedup"] for r in rows if (g == "all" or r["group"] == g) and r.get("status") == "ok"]
        others = [r for r in rows if (g == "all" or r["group"] == g) and r.get("status") != "ok"]
        geo = geomean(ok)
        lines.append(f"- {g}: geometric-mean speedup over {len(ok)} kernel(s): "
                     + (f"**{geo:.2f}x**" if geo else "n/a") + (f"; {len(others)} not timed (skipped, failed or "
                                                                 "not run; listed below)" if others else ""))
    lines += ["", "| group | kernel | speedup | baseline ms | evaluated | winning change |", "|---|---|---|---|---|---|"]
    for r in rows:
        if r.get("status") != "ok":
            why = " ".join(r.get("error", []))[:80].replace("|", "/")
            lines.append(f"| {r['group']} | {r['kernel']} | {r.get('status')} {why} | | | |")
            continue
        lines.append(f"| {r['group']} | {r['kernel']} | {r['speedup']:.2f}x | {r.get('baseline_ms') or 0:.4g} | "
                     f"{r.get('evaluations')} | {(r.get('change') or 'none faster').replace('|', '/')[:140]} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("paths", nargs="*", type=Path, help="own apps or MEP folders (group \"own\")")
    ap.add_argument("--corpus", type=Path, help="folder holding hecbench/src/ and rodinia/cuda/ (group \"corpus\")")
    ap.add_argument("--budget", type=int, default=16, help="candidates per kernel")
    ap.add_argument("--seconds", type=float, default=12, help="wall-time limit per kernel")
    ap.add_argument("--deadline", type=float, default=420, help="start no kernel after this many seconds of runs")
    ap.add_argument("--size", action="append", default=[], help="SYM=N for `mepgen mep` (repeatable)")
    ap.add_argument("--work", type=Path, default=Path("/tmp/mepgen-library-speedup"),
                    help="where application folders are copied and cut into MEPs")
    ap.add_argument("--jobs", type=int, default=8, help="applications prepared in parallel")
    a = ap.parse_args(argv)
    for p in a.paths:
        if not p.is_dir():
            ap.error(f"{p}: not a folder")
    if a.corpus is not None and not (a.corpus / "hecbench").is_dir() and not (a.corpus / "rodinia").is_dir():
        ap.error(f"--corpus {a.corpus}: holds neither hecbench/ nor rodinia/")
    if not a.paths and a.corpus is None:
        ap.error("nothing to run: give app folders, MEP folders or --corpus")
    for s in a.size:
        if "=" not in s:
            ap.error(f"--size {s}: not SYM=N")
    a.out.mkdir(parents=True, exist_ok=True)
    jobs = jobs_of(a)
    t0 = time.time()
    with ThreadPoolExecutor(max(1, a.jobs)) as pool:
        prepared = list(pool.map(lambda j: prepare(j[1], a.work.resolve(), a.size, j[2]) if j[1].is_dir() else [],
                                 jobs))
    print(f"prepared {len(jobs)} application(s) in {time.time() - t0:.0f} s", flush=True)
    rows, t1 = [], time.time()
    for (group, path, _, ids), meps in zip(jobs, prepared):
        if not meps:
            rows.append({"group": group, "kernel": path.name, "status": "no MEP",
                         "error": ["not a folder" if not path.is_dir() else "mepgen cut no MEP from it"]})
        found = {mid for _, mid in meps}
        for mid in ids or []:
            if mid not in found and meps:
                rows.append({"group": group, "kernel": f"{path.name}/{mid}", "status": "no MEP"})
        for app, mid in meps:
            if ids is not None and mid not in ids:
                continue
            row = {"group": group, "kernel": f"{path.name}/{mid}"}
            todo = open_todo(app, mid)
            if todo:
                row.update(status="skipped", error=[f"mep.yaml has {todo} open todo item(s)" if todo > 0
                                                    else "mep.yaml does not load"])
            elif time.time() - t1 > a.deadline:
                row.update(status="not run", error=[f"past the {a.deadline:.0f} s deadline"])
            else:
                row.update(run_optimize(app, mid, a.budget, a.seconds))
            rows.append(row)
            print(f"{group:7} {row['kernel']:44} {row.get('speedup', '-')!s:>8}  "
                  f"{(row.get('change') or row.get('status') or '')[:80]}", flush=True)
    gpu = gpu_name()
    command = " ".join(["python3", "bench/library_speedup.py", *(argv if argv is not None else sys.argv[1:])])
    groups = {g: geomean([r["speedup"] for r in rows if r["group"] == g and r.get("status") == "ok"])
              for g in dict.fromkeys(r["group"] for r in rows)}
    (a.out / "library_speedup.json").write_text(json.dumps(
        {"gpu": gpu, "command": command, "geomean": geomean([r["speedup"] for r in rows if r.get("status") == "ok"]),
         "geomean_per_group": groups, "seconds": round(time.time() - t0), "kernels": rows}, indent=1))
    lines = table(rows, gpu, command)
    (a.out / "library_speedup.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines[:4 + len(groups) + 1]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
