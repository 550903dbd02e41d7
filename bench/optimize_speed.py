#!/usr/bin/env python3
"""Candidates per minute in `mepgen optimize`, before (native backend, count-based timing) and after (the
defaults: `--backend auto`, timing by time), on a short (us) and a long (>= 100 ms) kernel that both have
headroom; then `mepgen optimize --top N` on an application with several kernels, its wall time and table.

    python3 bench/optimize_speed.py OUT_DIR [--short-app APP --short KERNEL --short-mep-args ARGS]
        [--long-app APP --long KERNEL --long-mep-args ARGS] [--short-seconds S] [--long-seconds S]
        [--all-app APP --top N --all-seconds S] [--budget B]

APP is a folder under examples/ by name (heatcg, dense) or a path to an application (copied to a temporary
folder first; `mepgen extract` runs there unless it has a .mepgen/inventory.json). Defaults: the short kernel is
heatcg's heat::diffuse_step at the application's sizes (about 20 us, under 40% of the memory peak: room to
gain), the long one dense's matmul at 8192 x 8192 x 5120 (expected ~134 ms on an H100: 214 ms at 8192^3
measured, scaled by K; naive loops at 1-2% of peak: room to gain), the batch dense's top 3. Every optimize run starts from its own copy of the prepared
application: input sets are made once per MEP and kept (the cache by content every later run of that MEP
uses), builds, references and results are not. Each run gets `--time-limit S` (baseline included) and
`--budget B` (large enough that the time limit, not the budget, ends the run).
Reported per run: candidates and verified candidates, per minute over the search phase (first candidate to
the end) and over the wall time. Writes OUT_DIR/optimize_speed.json and OUT_DIR/optimize_speed.md. Needs a GPU.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LONG_MEP_ARGS = "--size MAT_M=8192 --size MAT_N=8192 --size MAT_K=5120"


def mepgen(args: list[str], env: dict, timeout: float | None = None) -> tuple[subprocess.CompletedProcess, float]:
    start = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "mepgen.cli", *args], capture_output=True, text=True, env=env,
                       timeout=timeout)
    return p, time.monotonic() - start


def fail(what: str, p: subprocess.CompletedProcess) -> None:
    raise SystemExit(f"{what} failed ({p.returncode}): {(p.stderr.strip().splitlines() or [''])[-1]}")


def prepare(app: str, kernels: list[str], mep_args: str, work: Path, env: dict) -> Path:
    src = ROOT / "examples" / app if (ROOT / "examples" / app).is_dir() else Path(app).resolve()
    target = work / src.name
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(src, target, ignore=shutil.ignore_patterns("build", "build-cmake"))
    if not (target / ".mepgen" / "inventory.json").is_file():
        p, _ = mepgen(["extract", str(target)], env)
        if p.returncode != 0:
            fail(f"mepgen extract {target}", p)
    for k in kernels:
        p, _ = mepgen(["mep", k, "-C", str(target), *shlex.split(mep_args)], env)
        if p.returncode != 0:
            fail(f"mepgen mep {k}", p)
    return target


def make_input_sets(app: Path, kernel: str) -> float:
    """The MEP's input sets, made once (store.Store.input_set: cached by content); seconds it took."""
    from mepgen.evaluate.store import Store
    from mepgen.spec import load_spec
    mep = app / ".mepgen" / "meps" / kernel.replace("::", ".")
    spec = load_spec(mep / "mep.yaml")
    start = time.monotonic()
    store = Store(mep, spec)
    for k in range(spec.verify.input_sets):
        store.input_set(k)
    return time.monotonic() - start


def fresh_copy(prepared: Path, name: str) -> Path:
    """A copy of the prepared application with the evaluator's caches dropped (store.EVAL_DIR) except the
    input sets: no build, reference or result of another run is reused."""
    target = prepared.parent / f"{prepared.name}-{name}"
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(prepared, target, ignore=shutil.ignore_patterns("runs", "batches", "cache"))
    for ev_dir in (target / ".mepgen" / "meps").glob("*/eval"):
        for sub in ev_dir.iterdir():
            if sub.name != "inputs":
                shutil.rmtree(sub, ignore_errors=True) if sub.is_dir() else sub.unlink()
    return target


def records(run_dir: Path) -> list[dict]:
    f = run_dir / "trajectory.jsonl"
    if not f.is_file():
        return []
    recs = [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
    return [r for r in recs if r.get("kind") == "attempt" and r.get("result") is not None]


def optimize_one(app: Path, kernel: str, mode: str, seconds: float, args, env: dict) -> dict:
    from mepgen.spec import load_spec
    kid = kernel.replace("::", ".")
    spec = load_spec(app / ".mepgen" / "meps" / kid / "mep.yaml")
    extra = (["--backend", "native", "--reps", str(spec.timing.reps), "--warmup", str(spec.timing.warmup)]
             if mode == "before" else [])
    cmd = ["optimize", kernel, "-C", str(app), "--budget", str(args.budget), "--time-limit", f"{seconds:g}",
           "--run-name", mode, "--no-inherit", "--json", *extra]
    started = time.time()
    try:
        p, wall = mepgen(cmd, env, timeout=seconds + 120)
    except subprocess.TimeoutExpired as e:      # the limit not honoured by far: say so in the table
        p = subprocess.CompletedProcess(e.cmd, 124, "", f"killed: still running {seconds + 120:g} s after the start")
        wall = seconds + 120
    recs = records(app / ".mepgen" / "runs" / kid / mode)
    try:
        out = json.loads(p.stdout)
    except json.JSONDecodeError:
        out = {"error": (p.stderr.strip().splitlines() or [f"exit {p.returncode}"])[-1]}
    header = {}
    if (app / ".mepgen" / "runs" / kid / mode / "run.json").is_file():
        header = json.loads((app / ".mepgen" / "runs" / kid / mode / "run.json").read_text())
    # the search phase: from the first candidate's start (its record's time minus its evaluation) to the end
    first = min((r["time"] - (r["result"].get("seconds") or 0.0) for r in recs), default=None)
    search_s = (started + wall - first) if first is not None else None
    verified = sum(1 for r in recs if r["status"] == "ok")
    plan = next(((r["result"].get("timed") or {}).get("plan") for r in recs if r["result"].get("timed")), None)
    per_min = lambda n, s: round(n / s * 60, 1) if s else None
    phases = {}      # where a candidate's time goes: medians over the run's candidates (EvalResult.phases)
    for name in ("verify", "time", "checks"):
        vals = sorted(r["result"].get("phases", {}).get(name) for r in recs
                      if r["result"].get("phases", {}).get(name) is not None)
        if vals:
            phases[name] = round(vals[len(vals) // 2], 3)
    comp = sorted((r["result"].get("compile") or {}).get("seconds") or 0.0 for r in recs if r["result"].get("compile"))
    if comp:
        phases["compile"] = round(comp[len(comp) // 2], 3)
    return {"kernel": kernel, "mode": mode, "command": "mepgen " + " ".join(cmd), "exit": p.returncode,
            "time_limit_s": seconds, "wall_s": round(wall, 1), "evaluations": len(recs), "verified": verified,
            "baseline_s": round(first - started, 1) if first is not None else None,
            "per_min": per_min(len(recs), wall), "verified_per_min": per_min(verified, wall),
            "search_s": round(search_s, 1) if search_s else None,
            "search_per_min": per_min(len(recs), search_s), "verified_search_per_min": per_min(verified, search_s),
            "baseline_ms": out.get("baseline_ms"), "baseline_plan": out.get("plan"), "candidate_plan": plan,
            "backend": header.get("backend"), "backend_why": header.get("backend_why"),
            "speedup": (out.get("best") or {}).get("speedup"), "stop": out.get("stop_reason"),
            "error": out.get("error"), "stderr_tail": p.stderr.strip().splitlines()[-8:], "phases": phases}


def gpu_line() -> str:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30).stdout.strip().splitlines()
        return out[0] if out else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "no nvidia-smi"


def markdown(res: dict) -> str:
    dash = lambda v: "-" if v is None else v
    lines = ["# mepgen optimize: candidates per minute, before and after", "",
             f"- GPU: {res['gpu']}; date {res['date']}; pycuda installed: {res['pycuda']}",
             f"- command: `{res['command']}`; whole benchmark {res.get('bench_wall_s', '?')} s",
             f"- each run: its own copy of the application (input sets made once and kept: {res['inputs_s']}), "
             f"`--time-limit` as the column says (baseline included), `--budget {res['budget']}`, `--no-inherit`; "
             "before = `--backend native --reps R --warmup W` (mep.yaml's counts), after = the defaults",
             "- per minute (search): from the first candidate's start to the end of the run; (wall): the whole run", "",
             "| kernel | mode | backend | original ms | limit s | wall s | baseline s | candidates | verified | "
             "verified/min (search) | verified/min (wall) | candidates/min (search) | best | exit | stopped | "
             "timing plan of a candidate | median s per candidate: compile (parallel) / verify / time / checks |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in res["runs"]:
        ms = r["baseline_ms"]
        lines.append(f"| {r['kernel']} | {r['mode']} | {r['backend'] or '-'} | {('%.4g' % ms) if ms else '-'} | "
                     f"{r['time_limit_s']:g} | {r['wall_s']} | {dash(r['baseline_s'])} | {r['evaluations']} | "
                     f"{r['verified']} | {dash(r['verified_search_per_min'])} | {dash(r['verified_per_min'])} | "
                     f"{dash(r['search_per_min'])} | {('%.2fx' % r['speedup']) if r['speedup'] else '-'} | {r['exit']} | "
                     f"{(r['stop'] or r['error'] or '').replace('|', '/')[:110]} | "
                     f"{(r['candidate_plan'] or '-').replace('|', '/')[:110]} | "
                     + " / ".join(str(r.get("phases", {}).get(k, "-")) for k in ("compile", "verify", "time", "checks"))
                     + " |")
    b = res.get("batch")
    if b:
        lines += ["", f"## `{b['command']}`", "", f"wall {b['wall_s']} s, exit {b['exit']}", "", b.get("table", "")]
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--short-app", default="heatcg")
    ap.add_argument("--short", default="heat::diffuse_step")
    ap.add_argument("--short-mep-args", default="")
    ap.add_argument("--short-seconds", type=float, default=30.0)
    ap.add_argument("--long-app", default="dense")
    ap.add_argument("--long", default="matmul")
    ap.add_argument("--long-mep-args", default=LONG_MEP_ARGS)
    ap.add_argument("--long-seconds", type=float, default=75.0)
    ap.add_argument("--all-app", default="dense")
    ap.add_argument("--all-mep-args", default="")
    ap.add_argument("--top", type=int, default=3)
    ap.add_argument("--all-seconds", type=float, default=15.0)
    ap.add_argument("--budget", type=int, default=200)
    ap.add_argument("--modes", default="before,after")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               MEPGEN_PATTERNS_DB=str(Path(tempfile.mkdtemp(prefix="mepgen-speed-db-")) / "patterns.sqlite"))
    for k in [k for k in env if k.endswith("API_KEY")]:
        env.pop(k)
    work = Path(tempfile.mkdtemp(prefix="mepgen-speed-"))
    t0 = time.monotonic()
    try:
        import pycuda  # noqa: F401
        have_pycuda = True
    except ImportError:
        have_pycuda = False
    res = {"gpu": gpu_line(), "date": time.strftime("%Y-%m-%dT%H:%M:%S"), "pycuda": have_pycuda,
           "command": "python3 bench/optimize_speed.py " + " ".join(shlex.quote(a) for a in sys.argv[1:]),
           "budget": args.budget, "runs": [], "inputs_s": {}}
    sys.path.insert(0, str(ROOT))
    for which, app, kernel, mep_args, seconds in (
            ("short", args.short_app, args.short, args.short_mep_args, args.short_seconds),
            ("long", args.long_app, args.long, args.long_mep_args, args.long_seconds)):
        if not kernel:          # --short "" or --long "": that one is not measured
            continue
        prepared = prepare(app, [kernel], mep_args, work / which, env)
        res["inputs_s"][kernel] = f"{make_input_sets(prepared, kernel):.1f} s for {kernel}"
        for mode in args.modes.split(","):
            r = optimize_one(fresh_copy(prepared, mode), kernel, mode, seconds, args, env)
            r["which"] = which
            res["runs"].append(r)
            print(json.dumps({k: r[k] for k in ("kernel", "mode", "backend", "wall_s", "evaluations", "verified",
                                                 "verified_search_per_min", "baseline_ms", "stop", "error",
                                                 "exit")}), flush=True)
    res["inputs_s"] = "; ".join(res["inputs_s"].values())
    if args.top > 0:
        prepared = prepare(args.all_app, [], "", work / "all", env)
        p, _ = mepgen(["mep", "--all", "-C", str(prepared), *shlex.split(args.all_mep_args)], env)
        cmd = ["optimize", "-C", str(prepared), "--top", str(args.top), "--budget", str(args.budget),
               "--time-limit", str(args.all_seconds), "--no-inherit", "--run-name", "speed-batch", "--json"]
        p, wall = mepgen(cmd, env, timeout=args.all_seconds * args.top * 4 + 300)
        table = prepared / ".mepgen" / "batches" / "speed-batch" / "table.md"
        res["batch"] = {"command": "mepgen " + " ".join(cmd), "wall_s": round(wall, 1), "exit": p.returncode,
                        "table": table.read_text() if table.is_file() else p.stderr[-2000:],
                        "stderr_tail": p.stderr.strip().splitlines()[-5:]}
        print(json.dumps({"batch_wall_s": res["batch"]["wall_s"], "exit": p.returncode}), flush=True)
    shutil.rmtree(work, ignore_errors=True)       # copies of the applications with their input sets (GiB)
    res["bench_wall_s"] = round(time.monotonic() - t0, 1)
    (args.out / "optimize_speed.json").write_text(json.dumps(res, indent=1) + "\n")
    (args.out / "optimize_speed.md").write_text(markdown(res))
    print(markdown(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
