#!/usr/bin/env python3
"""GPU: `mepgen optimize` with the transformation library alone, per kernel, and the geometric-mean speedup per group.

    python3 bench/library_speedup.py OUT [PATH...] [--corpus ROOT] [--budget 8] [--seconds 16] [--seconds-per-gb 30]
                                     [--deadline 440] [--size SYM=N ...] [--work DIR] [--jobs 8] [--hbm-gbs 3000]
                                     [--apps A,B] [--capture-nonfinite]
    python3 bench/library_speedup.py merge OUT PART/library_speedup.json...     # one table from a split run

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
since the first; the rest are listed as not run. Writes OUT/library_speedup.json and OUT/library_speedup.md after
every kernel (per-kernel table, geometric mean per group, per class of the corpus's kernels (LA, stencil) and over
all, the GPU, the command). Every win is the evaluator's verdict: verified on every input set and timed against the
original. Per kernel also the memory bound: mep.yaml's work.bytes at --hbm-gbs GB/s, and how many times that the
original and the best take (a kernel already near its bound cannot gain much, whatever the rewrite).

Time: the preparation (extract + mep of each app, --jobs in parallel) then at most --deadline seconds of starts,
each run limited to --seconds plus --seconds-per-gb per GB of work.bytes (the baseline of a large kernel: making,
running and checking its input sets, counts in the limit).
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

#: the corpus's naive dense linear-algebra ("LA") and stencil kernels whose MEPs mepgen completes without a person
#: (bench/results/library_sweep_corpus.md lists them with what the library offers on each, and those left out and
#: why): (app folder under ROOT, [(kernel id, class)]). Run in this order (classes interleaved, so a deadline cuts
#: both alike).
CORPUS = [
    ("hecbench/src/hellinger-cuda", [("hellinger", "LA")]),
    ("hecbench/src/heat-cuda", [("solve", "stencil")]),
    ("hecbench/src/attention-cuda", [("attention_kernel1", "LA"), ("attention_kernel3", "LA")]),
    ("hecbench/src/burger-cuda", [("core", "stencil")]),
    ("hecbench/src/page-rank-cuda", [("reduce", "LA")]),
    ("hecbench/src/rtm8-cuda", [("rtm8", "stencil")]),
    ("hecbench/src/softmax-cuda", [("softMax", "LA")]),
    ("hecbench/src/heat2d-cuda", [("dev_lapl_iter", "stencil")]),
    ("hecbench/src/matrix-rotate-cuda", [("rotate_matrix_parallel", "LA")]),
    ("hecbench/src/hotspot3D-cuda", [("hotspot3d", "stencil")]),
    ("hecbench/src/minkowski-cuda", [("minkowski", "LA")]),
    ("rodinia/cuda/hotspot3D", [("hotspotOpt1", "stencil")]),
    ("hecbench/src/ising-cuda", [("update_lattice", "stencil")]),
    ("hecbench/src/srad-cuda", [("srad2", "stencil")]),
    ("rodinia/cuda/srad", [("srad2", "stencil")]),
    ("hecbench/src/match-cuda", [("Match1", "LA")]),
    # complete since the mep stage of 2026-11-26 (library_sweep_corpus_2026-11-27.md)
    ("hecbench/src/convolution3D-cuda", [("conv3d_s1", "stencil"), ("conv3d_s2", "stencil"), ("conv3d_s3", "stencil")]),
    ("hecbench/src/spmv-cuda", [("mv_dense", "LA")]),
    ("hecbench/src/simpleSpmv-cuda", [("mv_dense", "LA")]),
    ("hecbench/src/iso2dfd-cuda", [("iso_2dfd_kernel", "stencil")]),
    ("hecbench/src/blas-gemm-cuda", [("matrix_mul", "LA")]),
    ("hecbench/src/convolution1D-cuda", [("conv1d", "stencil")]),
    # complete since a size passed by reference after the launch no longer blocks it (not in the 2026-11-26b run)
    ("hecbench/src/qkv-cuda", [("matmul_forward_kernel1", "LA")]),
    ("hecbench/src/laplace-cuda", [("red_kernel", "stencil"), ("black_kernel", "stencil")]),
]


def cli(args: list[str], cwd: Path, timeout: float) -> subprocess.CompletedProcess:
    try:
        return subprocess.run([sys.executable, "-m", "mepgen.cli", *args], cwd=cwd, capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(args, 124, "", f"timed out after {timeout:.0f} s")


def prepare(path: Path, work: Path, sizes: list[str], name: str | None = None,
            ids: list[str] | None = None) -> list[tuple[Path, str]]:
    """(application folder, MEP id) of every MEP PATH names (an app is copied to `work` and cut first: every
    kernel, or only `ids` where given: an MEP's input data can take GBs)."""
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
        steps = [["mep", "--all", *extra]] if ids is None else [["mep", i, *extra] for i in ids]
        for args in (["extract", "."], *steps):
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


def drop_data(mep: Path) -> None:
    """The MEP's input sets, reference outputs and scratch outputs (`data/in`, `eval/inputs|ref|work`), removed once
    its run is over: several GB per large kernel would fill a small disk. Results, builds and the run folder stay."""
    for sub in ("data", "eval/inputs", "eval/ref", "eval/work"):
        shutil.rmtree(mep / sub, ignore_errors=True)


def work_bytes(app: Path, mid: str) -> int | None:
    """mep.yaml's work.bytes at the MEP's sizes (the bytes the kernel must move at least once), None if unknown."""
    sys.path.insert(0, str(REPO))
    from mepgen.spec import load_spec
    try:
        spec = load_spec(app / ".mepgen" / "meps" / mid / "mep.yaml")
        return spec.size(spec.work.bytes) if spec.work.bytes else None
    except Exception:
        return None


def headroom(row: dict, gbs: float) -> None:
    """The time the kernel's bytes take at `gbs` GB/s (the memory bound) and how far the original and the best
    are from it; a kernel near the bound cannot get much faster whatever the rewrite."""
    b = row.get("work_bytes")
    if not b:
        return
    row["bound_ms"] = b / (gbs * 1e9) * 1e3
    if row.get("baseline_ms"):
        row["baseline_over_bound"] = row["baseline_ms"] / row["bound_ms"]
        row["best_over_bound"] = row["baseline_ms"] / (row.get("speedup") or 1.0) / row["bound_ms"]


def run_optimize(app: Path, mid: str, budget: int, seconds: float) -> dict:
    """One `mepgen optimize` with the library alone: {"status": "ok", speedup, change, ...} or a failure."""
    t0 = time.time()
    done = cli(["optimize", mid, "-C", str(app), "--proposer", "library", "--no-inherit", "--budget", str(budget),
                "--time-limit", str(seconds), "--json"], app, seconds * 4 + 120)
    row = {"rc": done.returncode, "seconds": round(time.time() - t0, 1)}
    try:
        res = json.loads(done.stdout)
        best = res.get("best")
        row.update(status="ok", baseline_ms=res.get("baseline_ms"), evaluations=res.get("evaluations"),
                   speedup=best["speedup"] if best else 1.0,
                   change=(best["change"] if not best or len(best.get("chain") or []) < 2
                           else f"{' + '.join(best['chain'])}; last: {best['change']}") if best else "",
                   run=res.get("run"), stop_reason=res.get("stop_reason"))
        row["attempts"] = attempts(res.get("run"))
    except (json.JSONDecodeError, KeyError, TypeError, AttributeError):
        row.update(status="failed", error=(done.stderr or done.stdout).strip().splitlines()[-1:])
    return row


def attempts(run: str | None) -> list[dict]:
    """The search's path from the run's trajectory.jsonl, in evaluation order: each attempt's parent, its chain of
    transformations with their parameters, extra nvcc flags, status and speedup; the run folder itself stays where
    the benchmark ran (a GPU machine's /tmp), so this is what shows afterwards why a search stopped where it did."""
    path = Path(run) / "trajectory.jsonl" if run else None
    if path is None or not path.is_file():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        if rec.get("kind") != "attempt":
            continue
        out.append({"id": rec.get("id"), "parent": rec.get("parent"),
                    "chain": [[t.get("name"), t.get("params")] for t in rec.get("transformations") or []],
                    "nvcc_flags": rec.get("nvcc_flags") or [], "status": rec.get("status"),
                    "speedup": rec.get("speedup"), "decision": rec.get("decision")})
    return out


def capture_inputs(app: Path, mid: str, arch: str) -> str | None:
    """What the error tells a user whose original writes NaN/Inf on mepgen's generated inputs: build the application
    (`make ARCH=...`) and record the kernel's first launch from the application's own run command
    (`mepgen capture MID --use --exit-after -- CMD`). None when the MEP now holds the captured inputs, else why not."""
    sys.path.insert(0, str(REPO))
    from mepgen.extract.runcommand import find_run_command
    run = find_run_command(app)
    if run is None:
        return "no run command in the application's build files"
    try:
        built = subprocess.run(["make", "-s", f"ARCH={arch}", Path(run.program).name], cwd=app, capture_output=True,
                               text=True, timeout=600)
    except subprocess.TimeoutExpired:
        return "make timed out"
    if built.returncode:
        return f"make failed: {(built.stderr or built.stdout).strip().splitlines()[-1:]}"
    done = cli(["capture", mid, "--use", "--exit-after", "--timeout", "300", "--", run.program, *run.args], app, 900)
    return None if done.returncode == 0 else \
        f"capture failed: {' '.join((done.stderr or done.stdout).strip().splitlines()[-1:])[:200]}"


def geomean(values: list[float]) -> float | None:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def gpu_name() -> str:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=20).stdout.strip().splitlines()
        return out[0] if out else "unknown GPU"
    except (OSError, subprocess.TimeoutExpired):
        return "no nvidia-smi"


def jobs_of(a) -> list[tuple[str, Path, str | None, dict | None]]:
    """(group, path, name in the work folder, {kernel id: class} to keep, or None for all)."""
    jobs = [("own", p.resolve(), f"own.{p.resolve().parent.name}.{p.resolve().name}", None) for p in a.paths]
    if a.corpus is not None:
        for rel, ids in CORPUS:
            if a.apps and Path(rel).name not in a.apps.split(","):
                continue
            p = (a.corpus / rel).resolve()
            jobs.append(("corpus", p, f"corpus.{rel.split('/')[0]}.{p.name}", dict(ids)))
    return jobs


def sets_of(rows: list[dict]) -> list[tuple[str, list[dict]]]:
    """The sets a geometric mean is reported for: each group, each (group, class) where kernels have a class,
    and all kernels."""
    out = []
    for g in dict.fromkeys(r["group"] for r in rows):
        out.append((g, [r for r in rows if r["group"] == g]))
        for c in dict.fromkeys(r["class"] for r in rows if r["group"] == g and r.get("class")):
            out.append((f"{g} {c}", [r for r in rows if r["group"] == g and r.get("class") == c]))
    return out + [("all", rows)]


def table(rows: list[dict], gpu: str, command: str, gbs: float) -> list[str]:
    lines = [f"# mepgen optimize, library alone ({gpu})", "", f"`{command}`", ""]
    for g, sel in sets_of(rows):
        ok = [r["speedup"] for r in sel if r.get("status") == "ok"]
        others = [r for r in sel if r.get("status") != "ok"]
        geo = geomean(ok)
        lines.append(f"- {g}: geometric-mean speedup over {len(ok)} kernel(s): "
                     + (f"**{geo:.2f}x**" if geo else "n/a") + (f"; {len(others)} not timed (skipped, failed or "
                                                                 "not run; listed below)" if others else ""))
    lines += ["", f"Memory bound: mep.yaml's work.bytes at {gbs:.0f} GB/s (`--hbm-gbs`); x bound: the time over it "
                  "(1.0 = at the bound: no rewrite can make such a kernel much faster).", "",
              "| group | class | kernel | speedup | baseline ms | bound ms | original x bound | best x bound | "
              "evaluated | s (limit) | stopped | winning change |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    num = lambda v, f: format(v, f) if isinstance(v, (int, float)) else ""
    for r in rows:
        cls = r.get("class") or ""
        bound = num(r.get("bound_ms"), ".4g")
        spent = f"{num(r.get('seconds'), '.0f')} ({num(r.get('seconds_limit'), '.0f')})" if r.get("seconds") else ""
        stopped = (r.get("stop_reason") or "").split(":")[0].replace("|", "/")[:40]
        if r.get("status") != "ok":
            why = " ".join(r.get("error", []))[:80].replace("|", "/")
            lines.append(f"| {r['group']} | {cls} | {r['kernel']} | {r.get('status')} {why} | | {bound} | | | | "
                         f"{spent} | | |")
            continue
        lines.append(f"| {r['group']} | {cls} | {r['kernel']} | {r['speedup']:.2f}x | {r.get('baseline_ms') or 0:.4g} | "
                     f"{bound} | {num(r.get('baseline_over_bound'), '.2f')} | {num(r.get('best_over_bound'), '.2f')} | "
                     f"{r.get('evaluations')} | {spent} | {stopped} | "
                     f"{(r.get('change') or 'none faster').replace('|', '/')[:140]} |")
    notes = [f"- {r['kernel']}: {r['inputs']}" for r in rows if r.get("inputs")]
    return lines + (["", "Inputs:", *notes] if notes else [])


def write(out: Path, rows: list[dict], gpu: str, command: str, gbs: float, t0: float) -> list[str]:
    """JSON and markdown of the rows so far (written after every kernel: a cut-off run keeps what it measured)."""
    geo = {g: geomean([r["speedup"] for r in sel if r.get("status") == "ok"]) for g, sel in sets_of(rows)}
    (out / "library_speedup.json").write_text(json.dumps(
        {"gpu": gpu, "command": command, "hbm_gbs": gbs, "geomean": geo.pop("all", None), "geomean_per_group": geo,
         "seconds": round(time.time() - t0), "kernels": rows}, indent=1))
    lines = table(rows, gpu, command, gbs)
    (out / "library_speedup.md").write_text("\n".join(lines) + "\n")
    return lines


def merge(out: Path, parts: list[Path]) -> list[str]:
    """One table from the JSON of a run split over several calls (`--apps`): each kernel's row from the part that ran
    it (a part's "not run" row gives way to another part's), in the corpus list's order; every part's command and
    GPU are kept."""
    docs = [json.loads(p.read_text()) for p in parts]
    order = {f"{Path(rel).name}/{mid}": i for i, (rel, ids) in enumerate(CORPUS) for mid, _ in ids}
    rows: dict[str, dict] = {}
    for d in docs:
        for r in d["kernels"]:
            if r["kernel"] not in rows or rows[r["kernel"]].get("status") == "not run":
                rows[r["kernel"]] = r
    merged = sorted(rows.values(), key=lambda r: order.get(r["kernel"], len(order)))
    gpus = sorted({d["gpu"] for d in docs})
    command = "; ".join(d["command"] for d in docs)
    out.mkdir(parents=True, exist_ok=True)
    return write(out, merged, " / ".join(gpus), command, docs[0].get("hbm_gbs", 3000.0), time.time())


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["merge"]:
        if len(args) < 3:
            print("usage: library_speedup.py merge OUT PART.json...", file=sys.stderr)
            return 2
        missing = [p for p in args[2:] if not Path(p).is_file()]
        if missing:
            print(f"library_speedup.py merge: no such file: {', '.join(missing)}", file=sys.stderr)
            return 2
        lines = merge(Path(args[1]), [Path(p) for p in args[2:]])
        print("\n".join(lines[:8]))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("paths", nargs="*", type=Path, help="own apps or MEP folders (group \"own\")")
    ap.add_argument("--corpus", type=Path, help="folder holding hecbench/src/ and rodinia/cuda/ (group \"corpus\")")
    ap.add_argument("--apps", default="", help="only these apps of the corpus (comma-separated folder names, e.g. "
                                               "spmv-cuda,srad): a run split over several calls")
    ap.add_argument("--budget", type=int, default=8, help="candidates per kernel")
    ap.add_argument("--seconds", type=float, default=16, help="wall-time limit per kernel")
    ap.add_argument("--seconds-per-gb", type=float, default=30.0,
                    help="added to a kernel's limit per GB of its work.bytes: its inputs are made, run and checked "
                         "on 3 input sets before the first candidate, and each candidate runs on all of them again "
                         "(at 12 s per GB, kernels of 0.5-1.3 GB evaluated no candidate on an H100: the baseline took "
                         "the time, and mepgen starts no candidate that cannot finish)")
    ap.add_argument("--deadline", type=float, default=440, help="start no kernel after this many seconds of runs")
    ap.add_argument("--size", action="append", default=[], help="SYM=N for `mepgen mep` (repeatable)")
    ap.add_argument("--work", type=Path, default=Path("/tmp/mepgen-library-speedup"),
                    help="where application folders are copied and cut into MEPs")
    ap.add_argument("--jobs", type=int, default=8, help="applications prepared in parallel")
    ap.add_argument("--keep-data", action="store_true",
                    help="keep each MEP's input sets and reference outputs after its run (default: removed)")
    ap.add_argument("--capture-nonfinite", action="store_true",
                    help="where the original writes NaN/Inf on mepgen's generated inputs, do what the error says: build "
                         "the app and record its own inputs with `mepgen capture --use` (its run command), then rerun")
    ap.add_argument("--arch", default="sm_90", help="ARCH=... for the applications' Makefiles (--capture-nonfinite)")
    ap.add_argument("--hbm-gbs", type=float, default=3000.0,
                    help="memory bandwidth for the bound column (GB/s; H100 SXM HBM3: 3350 nominal, ~3000 reached)")
    a = ap.parse_args(argv)
    for p in a.paths:
        if not p.is_dir():
            ap.error(f"{p}: not a folder")
    if a.corpus is not None and not (a.corpus / "hecbench").is_dir() and not (a.corpus / "rodinia").is_dir():
        ap.error(f"--corpus {a.corpus}: holds neither hecbench/ nor rodinia/")
    if not a.paths and a.corpus is None:
        ap.error("nothing to run: give app folders, MEP folders or --corpus")
    unknown = set(filter(None, a.apps.split(","))) - {Path(rel).name for rel, _ in CORPUS}
    if unknown:
        ap.error(f"--apps: not in the corpus list: {', '.join(sorted(unknown))}")
    for s in a.size:
        if "=" not in s:
            ap.error(f"--size {s}: not SYM=N")
    a.out.mkdir(parents=True, exist_ok=True)
    jobs = jobs_of(a)
    t0 = time.time()
    with ThreadPoolExecutor(max(1, a.jobs)) as pool:
        prepared = list(pool.map(lambda j: prepare(j[1], a.work.resolve(), a.size, j[2],
                                                   list(j[3]) if j[3] else None) if j[1].is_dir() else [], jobs))
    print(f"prepared {len(jobs)} application(s) in {time.time() - t0:.0f} s", flush=True)
    gpu = gpu_name()
    command = " ".join(["python3", "bench/library_speedup.py", *(argv if argv is not None else sys.argv[1:])])
    rows, t1 = [], time.time()
    for (group, path, _, ids), meps in zip(jobs, prepared):
        if not meps:
            rows.append({"group": group, "kernel": path.name, "status": "no MEP",
                         "error": ["not a folder" if not path.is_dir() else "mepgen cut no MEP from it"]})
        found = {mid for _, mid in meps}
        for mid in ids or {}:
            if mid not in found and meps:
                rows.append({"group": group, "class": ids[mid], "kernel": f"{path.name}/{mid}", "status": "no MEP"})
        for app, mid in meps:
            if ids is not None and mid not in ids:
                continue
            row = {"group": group, "class": ids[mid] if ids else None, "kernel": f"{path.name}/{mid}",
                   "work_bytes": work_bytes(app, mid)}
            todo = open_todo(app, mid)
            if todo:
                row.update(status="skipped", error=[f"mep.yaml has {todo} open todo item(s)" if todo > 0
                                                    else "mep.yaml does not load"])
            elif time.time() - t1 > a.deadline:
                row.update(status="not run", error=[f"past the {a.deadline:.0f} s deadline"])
            else:
                limit = round(a.seconds + a.seconds_per_gb * (row["work_bytes"] or 0) / 1e9, 1)
                row.update(run_optimize(app, mid, a.budget, limit), seconds_limit=limit)
                if a.capture_nonfinite and row.get("status") == "failed" and "NaN/Inf" in " ".join(row.get("error", [])):
                    why = capture_inputs(app, mid, a.arch)
                    row["inputs"] = f"generated inputs gave NaN/Inf; captured: {why or 'yes'}"
                    if why is None:
                        row.pop("error", None)
                        row.update(run_optimize(app, mid, a.budget, limit))
            headroom(row, a.hbm_gbs)
            if not a.keep_data:
                drop_data(app / ".mepgen" / "meps" / mid)
            rows.append(row)
            print(f"{group:7} {row['kernel']:44} {row.get('speedup', '-')!s:>8}  "
                  f"{(row.get('change') or row.get('status') or '')[:80]}", flush=True)
            write(a.out, rows, gpu, command, a.hbm_gbs, t0)
    lines = write(a.out, rows, gpu, command, a.hbm_gbs, t0)
    print("\n".join(lines[:4 + len(sets_of(rows))]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
