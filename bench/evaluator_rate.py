#!/usr/bin/env python3
"""GPU: verified candidates per minute of `mepgen optimize` over the whole search, the original's baseline
included, per MEP, before and after a change of the evaluator, side by side on the same card.

    python3 bench/evaluator_rate.py OUT TARGET... [--before-tree DIR | --before-rev REV] [--modes before,after]
        [--time-limit 30] [--budget 500] [--gpus 0,1] [--max-meps N] [--shard I/N] [--work DIR] [--jobs 8] [--in-place]
        [--backend native|pycuda|auto] [--rev NAME]

TARGET: an application folder (its MEPs are .mepgen/meps/*; one without them is copied to --work and cut as a
user would: `mepgen extract .`, `mepgen mep --all`, --jobs applications at a time; with --in-place where it is),
or one MEP folder
(APP/.mepgen/meps/ID). An MEP with open todo items is listed as skipped.

Modes: `after` runs this checkout's mepgen; `before` runs the mepgen of --before-tree DIR (a copy of an older tree,
e.g. `git archive main | tar -x -C DIR`) or of --before-rev REV (extracted here with `git archive`). Both run

    python -m mepgen.cli optimize ID -C APP --proposer library --no-inherit --budget B --time-limit S --json

with optimize's defaults otherwise (its budget of 25 candidates; the time limit is a guard for a device call),
each from the same state: the MEP's evaluator folder (eval/) emptied except its input
sets (made once, by whichever runs first), so no build, reference or result of another run is reused. The two
modes of one MEP run back to back on one GPU (the order alternating from MEP to MEP); MEPs are spread over
--gpus (default: every GPU nvidia-smi lists), one at a time per GPU.

With --backend native the MEPs are still cut by this checkout: `before` then runs this checkout's harness.cu
(inputs read through a mapping, loaded `in` buffers checked in the harness) with the older evaluator, which
understates a change of the native harness; cut a second copy with the older tree for that (--work, --in-place).

Reported per run: wall time of the whole command (baseline included) and how it splits (baseline, search, end),
candidates evaluated, verified (status ok:
passed verification on every input set and timed), verified per minute over that wall time, the original's
launch time, the backend, the median phases of a candidate (lint / compile / load / verify / time / checks); then per mode
the median, quartiles, min and max over the MEPs, overall and for originals under 200 us and under 2 ms.
Writes OUT/evaluator_rate.json and OUT/evaluator_rate.md after every MEP;
`python3 bench/evaluator_rate.py merge OUT PART/evaluator_rate.json...` makes one table of several calls' parts.
The host is probed at the start and the end (its load average, a tiny nvcc's seconds: `host_start`, `host_end`):
two calls of one tree on one kind of machine gave 120 and 77 per minute (gpu_2026-11-28f), every host phase 35 %
slower in the second; the probe tells such a call apart.
"""
from __future__ import annotations

import argparse
import json
import re
import os
import queue
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PHASES = ("lint", "compile", "load", "verify", "time", "checks")
#: an end of a run this long after its last candidate is a harness built after the search (parts_lines)
END_LONG_S = 2.5


def cli(tree: Path, args: list[str], cwd: Path, timeout: float, env: dict | None = None):
    env = dict(env or os.environ)      # this tree's mepgen first; the dependencies where PYTHONPATH had them
    env["PYTHONPATH"] = os.pathsep.join([str(tree)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
                                                       if p and Path(p).resolve() not in (REPO, Path(tree).resolve())])
    try:
        return subprocess.run([sys.executable, "-m", "mepgen.cli", *args], cwd=cwd, capture_output=True, text=True,
                              timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(args, 124, "", f"timed out after {timeout:.0f} s")


def prepare(target: Path, work: Path, in_place: bool = False) -> list[tuple[Path, str]]:
    """(application, MEP id) of every MEP of TARGET."""
    if (target / "mep.yaml").is_file():
        return [(target.parents[2], target.name)]
    app = target
    if in_place and not (target / ".mepgen" / "meps").is_dir():
        for args in (["extract", "."], ["mep", "--all"]):
            cli(REPO, args, app, 600)
    elif not (target / ".mepgen" / "meps").is_dir():
        app = work / "apps" / "-".join(target.resolve().parts[-2:])
        if not (app / ".mepgen" / "meps").is_dir():
            if app.exists():
                shutil.rmtree(app)
            shutil.copytree(target, app, ignore=shutil.ignore_patterns(".mepgen", "build", "*.o"), symlinks=True)
            for args in (["extract", "."], ["mep", "--all"]):
                cli(REPO, args, app, 600)
    meps = app / ".mepgen" / "meps"
    return [(app, d.name) for d in sorted(meps.iterdir()) if (d / "mep.yaml").is_file()] if meps.is_dir() else []


def todo_count(app: Path, mid: str) -> int:
    from mepgen.spec import load_spec
    try:
        return len(load_spec(app / ".mepgen" / "meps" / mid / "mep.yaml").todo)
    except Exception:      # noqa: BLE001 (an MEP this mepgen cannot read: skipped, with the count -1)
        return -1


def reset(mep: Path) -> None:
    """The MEP's evaluator folder emptied except the input sets; the runs of earlier modes removed."""
    ev = mep / "eval"
    if ev.is_dir():
        for sub in ev.iterdir():
            if sub.name != "inputs":
                shutil.rmtree(sub, ignore_errors=True) if sub.is_dir() else sub.unlink()


def records(run_dir: Path | None) -> list[dict]:
    f = run_dir / "trajectory.jsonl" if run_dir else None
    if f is None or not f.is_file():
        return []
    recs = [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
    return [r for r in recs if r.get("kind") == "attempt" and r.get("result") is not None]


def median(values: list[float]) -> float | None:
    return round(statistics.median(values), 3) if values else None


def run_one(tree: Path, app: Path, mid: str, mode: str, args, gpu: str | None) -> dict:
    reset(app / ".mepgen" / "meps" / mid)
    shutil.rmtree(app / ".mepgen" / "runs" / mid / f"rate-{mode}", ignore_errors=True)   # else optimize resumes it
    env = dict(os.environ, MEPGEN_PATTERNS_DB=str(Path(tempfile.mkdtemp(prefix="mepgen-rate-db-")) / "p.sqlite"))
    for k in [k for k in env if k.endswith("API_KEY")]:
        env.pop(k)
    if gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = gpu
    cmd = ["optimize", mid, "-C", str(app), "--proposer", "library", "--no-inherit", "--budget", str(args.budget),
           "--time-limit", f"{args.time_limit:g}", "--run-name", f"rate-{mode}", "--json"]
    if args.backend:
        cmd += ["--backend", args.backend]
    t0, epoch0 = time.monotonic(), time.time()
    done = cli(tree, cmd, app, args.time_limit * 3 + 180, env)
    wall = time.monotonic() - t0
    try:
        out = json.loads(done.stdout)
    except json.JSONDecodeError:
        out = {"error": ((done.stderr or done.stdout).strip().splitlines() or [f"exit {done.returncode}"])[-1]}
    run = Path(out["run"]) if out.get("run") else app / ".mepgen" / "runs" / mid / f"rate-{mode}"
    recs = records(run)
    header = json.loads((run / "run.json").read_text()) if (run / "run.json").is_file() else {}
    verified = sum(1 for r in recs if r.get("status") == "ok")
    notes = [" ".join(r["result"].get("notes") or []) for r in recs]
    # the sequential sessions (session.py): how many ended early, how many saw the original's speed move
    early = sum(1 for n in notes if "the verdict was settled" in n)
    drift = sum(1 for n in notes if "timed again" in n)
    interleaved = sum(1 for n in notes if "timed interleaved with it" in n)
    phases = {}
    for name in PHASES:
        vals = [r["result"].get("phases", {}).get(name) for r in recs]
        phases[name] = median([v for v in vals if v is not None])
    return {"mep": mid, "app": str(app), "mode": mode, "gpu": gpu, "exit": done.returncode, "wall_s": round(wall, 1),
            "split_s": split(run, recs, epoch0, wall),
            "evaluations": len(recs), "verified": verified, "verified_per_min": round(verified / wall * 60, 1),
            "baseline_ms": out.get("baseline_ms"), "backend": header.get("backend"),
            "speedup": (out.get("best") or {}).get("speedup"), "stop": out.get("stop_reason"),
            "error": out.get("error"), "phases": phases, "early_stops": early, "drift_retimes": drift,
            "interleaved": interleaved, "baseline_phases_s": header.get("baseline_phases_s"),
            "lookahead": said(run, "lookahead"), "stderr_tail": done.stderr.strip().splitlines()[-4:]}


def said(run: Path, event: str) -> str | None:
    """The message of the trajectory's last `event` (lookahead: proposals compiled ahead, how many were used)."""
    path, last = run / "trajectory.jsonl", None
    for line in (path.read_text().splitlines() if path.is_file() else []):
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        if rec.get("event") == event:
            last = rec.get("message")
    return last


def split(run: Path, recs: list[dict], epoch0: float, wall: float) -> dict | None:
    """Where the wall time went: `baseline` from the start to the search's start (run.json is written once, when
    the original was built, verified and timed: process start, inputs, references and the winner's re-check at
    the end are not the candidates'), `search` to the last candidate's record, `end` after it (the winner's
    memcheck, the summary)."""
    header = run / "run.json"
    if not header.is_file():
        return None
    start = header.stat().st_mtime - epoch0
    last = max((r.get("time") or 0.0 for r in recs), default=0.0) - epoch0
    last = max(last, start)
    return {"baseline": round(start, 1), "search": round(last - start, 1), "end": round(max(0.0, wall - last), 1)}


def spread(values: list[float]) -> str:
    if not values:
        return "-"
    v = sorted(values)
    q = statistics.quantiles(v, n=4) if len(v) > 1 else [v[0]] * 3
    return f"{statistics.median(v):.1f} (quartiles {q[0]:.1f}-{q[2]:.1f}, min {v[0]:.1f}, max {v[-1]:.1f}, n={len(v)})"


def parts_lines(runs: list[dict], mode: str) -> list[str]:
    """The baseline, the search and the end, median s (quartiles), over all MEPs and those < 200 us; how many runs end
    more than END_LONG_S after their last candidate (a late winner's memcheck harness built after the search); the
    lookahead's totals (compiled ahead, then proposed)."""
    out = []
    for label, cut in (("all", None), ("< 200 us", 0.2)):
        got = [r["split_s"] for r in runs if r["mode"] == mode and r.get("split_s") and r["exit"] == 0
               and (cut is None or (r["baseline_ms"] or 1e9) < cut)]
        if not got:
            continue
        cells = []
        for part in ("baseline", "search", "end"):
            v = sorted(g[part] for g in got)
            q = statistics.quantiles(v, n=4) if len(v) > 1 else [v[0]] * 3
            cells.append(f"{part} {statistics.median(v):.1f} ({q[0]:.1f}-{q[2]:.1f})")
        long_end = sum(1 for g in got if g["end"] > END_LONG_S)
        out.append(f"- {mode}, {label}: median s (quartiles): " + ", ".join(cells)
                   + f"; the end over {END_LONG_S:g} s in {long_end} of {len(got)}")
    said = [re.match(r"lookahead: (\d+) .*?; (\d+) of them", r.get("lookahead") or "") for r in runs
            if r["mode"] == mode]
    said = [m for m in said if m]
    if said:
        out.append(f"- {mode}: lookahead over {len(said)} runs: {sum(int(m.group(1)) for m in said)} proposals "
                   f"compiled ahead, {sum(int(m.group(2)) for m in said)} of them proposed by a next round")
    return out


def markdown(res: dict) -> str:
    runs = res["runs"]
    modes = res["modes"]
    lines = ["# Verified candidates per minute of `mepgen optimize`, whole search (baseline included)", "",
             f"- GPU: {res['gpu']}; date {res['date']}; command `{res['command']}`",
             f"- before: {res['before']}; after: {REPO} ({res['after_rev']})",
             f"- each run: `--proposer library --no-inherit --budget {res['budget']} --time-limit "
             f"{res['time_limit']:g}`, defaults otherwise; eval/ emptied but the input sets before each", ""]
    for label, cut in (("all MEPs", None), ("originals < 2 ms", 2.0), ("originals < 200 us", 0.2)):
        lines.append(f"- **{label}**: " + "; ".join(
            f"{m} {spread([r['verified_per_min'] for r in runs if r['mode'] == m and r['exit'] == 0 and (cut is None or (r['baseline_ms'] or 1e9) < cut)])}"
            for m in modes))
    if host_line(res):
        lines.append(host_line(res))
    lines += ["- wall s (baseline + search + end): baseline up to the first proposal (process start, inputs, build, "
              "references, the original verified and timed), the search to the last candidate's record, the end "
              "after it (the winner's memcheck, the summary)"]
    for m in modes:      # where the baseline's seconds go (run.json's baseline_phases_s), the median over the MEPs
        got = [r["baseline_phases_s"] for r in runs if r["mode"] == m and r.get("baseline_phases_s")]
        names = list(dict.fromkeys(k for g in got for k in g))
        if got:
            lines.append(f"- {m}: the baseline's phases, median s over {len(got)} MEPs: " + ", ".join(
                f"{k} {statistics.median(g[k] for g in got if g.get(k) is not None):.2f}" for k in names))
    for m in modes:
        lines += parts_lines(runs, m)
    lines += ["", "| MEP | original ms | " + " | ".join(f"{m}: backend / wall s / verified / per min / phases s "
                                                           "(lint, compile, load, verify, time, checks)" for m in modes)
              + " | best (after) |", "|---|---|" + "---|" * len(modes) + "---|"]
    by_mep: dict[str, dict] = {}
    for r in runs:
        by_mep.setdefault(f"{Path(r['app']).name}/{r['mep']}", {})[r["mode"]] = r
    for key, row in sorted(by_mep.items()):
        ms = next((r["baseline_ms"] for r in row.values() if r.get("baseline_ms")), None)
        cells = []
        for m in modes:
            r = row.get(m)
            if r is None:
                cells.append("-")
            elif r["exit"] != 0:
                cells.append(f"exit {r['exit']}: {(r['error'] or '')[:80]}".replace("|", "/"))
            else:
                sp = r.get("split_s")
                wall = f"{r['wall_s']} ({sp['baseline']} + {sp['search']} + {sp['end']})" if sp else f"{r['wall_s']}"
                cells.append(f"{r['backend']} / {wall} / {r['verified']} of {r['evaluations']} / "
                             f"**{r['verified_per_min']}** / " + ", ".join(str(r['phases'].get(p) or '-') for p in PHASES)
                             + (f" (early {r['early_stops']}, drift {r['drift_retimes']}, interleaved "
                                f"{r['interleaved']})" if r.get("early_stops") or r.get("drift_retimes") else ""))
        best = (row.get("after") or {}).get("speedup")
        lines.append(f"| {key} | {('%.4g' % ms) if ms else '-'} | " + " | ".join(cells)
                     + f" | {('%.2fx' % best) if best else '-'} |")
    if res.get("skipped"):
        lines += ["", "Skipped (open todo items): " + ", ".join(res["skipped"])]
    return "\n".join(lines) + "\n"


def gpus_here() -> list[str]:
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [str(i) for i, ln in enumerate(ln for ln in out.splitlines() if ln.startswith("GPU "))]


def gpu_line() -> str:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30).stdout.strip().splitlines()
        return f"{len(out)} x {out[0]}" if out else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "no nvidia-smi"


PROBE_KERNEL = "__global__ void probe(float* a, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; " \
               "if (i < n) a[i] = a[i] * 2.0f + 1.0f; }\n"


def host_probe(nvcc: str | None = None, repeat: int = 3) -> dict:
    """What the host gives at a moment: its cores, its load average (1 and 5 minutes) and the median seconds of a
    tiny `nvcc -cubin` (a candidate's compile is the host's largest share of a search): taken at the start and the
    end of a call, so that two calls of one tree can be told apart by the host's speed, not the change."""
    out = {"cores": os.cpu_count(), "loadavg": [round(v, 2) for v in os.getloadavg()[:2]], "nvcc_s": None}
    nvcc = nvcc or shutil.which("nvcc")
    if nvcc:
        with tempfile.TemporaryDirectory(prefix="mepgen-probe-") as d:
            src = Path(d) / "probe.cu"
            src.write_text(PROBE_KERNEL)
            took = []
            for _ in range(repeat):
                t = time.monotonic()
                done = subprocess.run([nvcc, "-cubin", str(src), "-o", str(Path(d) / "probe.cubin")],
                                      capture_output=True, timeout=120)
                if done.returncode != 0:
                    return out
                took.append(time.monotonic() - t)
            out["nvcc_s"] = round(statistics.median(took), 3)
    return out


def host_line(res: dict) -> str | None:
    a, b = res.get("host_start"), res.get("host_end")
    if not a:
        return None
    def said(h):
        nv = f", a tiny nvcc -cubin {h['nvcc_s']} s" if h.get("nvcc_s") is not None else ""
        return f"load average {h['loadavg'][0]} (1 min), {h['loadavg'][1]} (5 min){nv}"
    return (f"- host: {a['cores']} cores; at the start {said(a)}" + (f"; at the end {said(b)}" if b else "")
            + " (the host's speed during this call: compare calls by it)")


def before_tree(args, work: Path) -> Path | None:
    if args.before_tree:
        return Path(args.before_tree).resolve()
    if args.before_rev:
        dest = work / f"before-{args.before_rev.replace('/', '_')}"
        if not (dest / "mepgen").is_dir():
            dest.mkdir(parents=True, exist_ok=True)
            archive = subprocess.run(["git", "-C", str(REPO), "archive", args.before_rev], capture_output=True)
            if archive.returncode != 0:
                raise SystemExit(f"git archive {args.before_rev}: {archive.stderr.decode().strip()}")
            subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)
        return dest
    return None


def merge(out: Path, parts: list[Path]) -> int:
    """One table from the evaluator_rate.json of several calls (--shard I/N)."""
    loaded = [json.loads(Path(p).read_text()) for p in parts]
    res = dict(loaded[0], runs=[r for part in loaded for r in part["runs"]],
               skipped=sorted({s for part in loaded for s in part.get("skipped", [])}),
               command=" + ".join(part["command"] for part in loaded))
    out.mkdir(parents=True, exist_ok=True)
    (out / "evaluator_rate.json").write_text(json.dumps(res, indent=1) + "\n")
    (out / "evaluator_rate.md").write_text(markdown(res))
    print(markdown(res))
    return 0


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "merge":      # evaluator_rate.py merge OUT PART.json...
        return merge(Path(sys.argv[2]), [Path(p) for p in sys.argv[3:]])
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("targets", nargs="+", type=Path)
    ap.add_argument("--before-tree")
    ap.add_argument("--before-rev")
    ap.add_argument("--modes", default="before,after")
    ap.add_argument("--time-limit", type=float, default=60.0, help="a guard; the budget ends a run first")
    ap.add_argument("--budget", type=int, default=25, help="optimize's default")
    ap.add_argument("--backend", choices=["auto", "native", "pycuda"], default=None,
                    help="optimize --backend (default: the MEP's config, auto)")
    ap.add_argument("--gpus", default=None, help="comma-separated nvidia-smi indices (default: all)")
    ap.add_argument("--max-meps", type=int, default=0, help="at most this many MEPs (0: all)")
    ap.add_argument("--shard", default=None, help="I/N: only every N-th MEP from the I-th (0-based)")
    ap.add_argument("--work", type=Path, default=None)
    ap.add_argument("--jobs", type=int, default=8, help="applications cut into MEPs at a time")
    ap.add_argument("--rev", default=None, help="the name of this tree in the record (default: git rev-parse; a copy "
                                                "of the tree without its history, as on a device, names a stale one)")
    ap.add_argument("--in-place", action="store_true",
                    help="cut an application without MEPs where it is (a copy already: PolyBench's Makefiles include "
                         "../../utilities, which a copy of the program alone lacks)")
    args = ap.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    work = (args.work or Path(tempfile.mkdtemp(prefix="mepgen-rate-"))).resolve()
    work.mkdir(parents=True, exist_ok=True)
    trees = {"after": REPO}
    if "before" in modes:
        tree = before_tree(args, work)
        if tree is None:
            raise SystemExit("mode `before` needs --before-tree DIR or --before-rev REV (or --modes after)")
        trees["before"] = tree
    sys.path.insert(0, str(REPO))
    args.out.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        found = [m for ms in pool.map(lambda t: prepare(t.resolve(), work, args.in_place), args.targets) for m in ms]
    skipped = [f"{app.name}/{mid} ({n})" for app, mid in found for n in [todo_count(app, mid)] if n != 0]
    meps = [(app, mid) for app, mid in found if todo_count(app, mid) == 0]
    if args.shard:             # I/N: every N-th MEP from the I-th (0-based): a suite split over device calls
        i, n = (int(v) for v in args.shard.split("/"))
        meps = meps[i::n]
    if args.max_meps:
        meps = meps[:args.max_meps]
    rev = args.rev or subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                                     text=True).stdout.strip() or "no git"
    res = {"gpu": gpu_line(), "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "modes": modes,
           "command": "python3 bench/evaluator_rate.py " + " ".join(sys.argv[1:]), "before": str(trees.get("before")),
           "after_rev": rev, "budget": args.budget, "time_limit": args.time_limit, "skipped": skipped, "runs": [],
           "prepare_s": round(time.monotonic() - t0, 1), "host_start": host_probe()}
    print(f"{len(meps)} MEP(s) to run, {len(skipped)} skipped; prepared in {res['prepare_s']} s", flush=True)
    jobs: queue.Queue = queue.Queue()
    for i, item in enumerate(meps):
        jobs.put((i, item))
    lock = threading.Lock()

    def worker(gpu: str | None) -> None:
        while True:
            try:
                i, (app, mid) = jobs.get_nowait()
            except queue.Empty:
                return
            for mode in (modes if i % 2 == 0 else modes[::-1]):
                r = run_one(trees[mode], app, mid, mode, args, gpu)
                with lock:
                    res["runs"].append(r)
                    print(json.dumps({k: r[k] for k in ("mep", "mode", "gpu", "backend", "wall_s", "verified",
                                                         "verified_per_min", "baseline_ms", "exit")}), flush=True)
                    res["bench_wall_s"] = round(time.monotonic() - t0, 1)
                    (args.out / "evaluator_rate.json").write_text(json.dumps(res, indent=1) + "\n")
                    (args.out / "evaluator_rate.md").write_text(markdown(res))

    gpus = args.gpus.split(",") if args.gpus else (gpus_here() or [None])
    threads = [threading.Thread(target=worker, args=(g,)) for g in gpus]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    res["host_end"] = host_probe()
    res["bench_wall_s"] = round(time.monotonic() - t0, 1)
    (args.out / "evaluator_rate.json").write_text(json.dumps(res, indent=1) + "\n")
    (args.out / "evaluator_rate.md").write_text(markdown(res))
    print(markdown(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
