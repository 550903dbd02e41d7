#!/usr/bin/env python3
"""Candidates per minute in `mepgen optimize`, before (native backend, count-based timing) and after (the
defaults: `--backend auto`, timing by time), on a short (us) and a long (>= 100 ms) kernel; then
`mepgen optimize --top N` on an application with several kernels, its wall time and table.

    python3 bench/optimize_speed.py OUT_DIR [--short-app APP --short KERNEL] [--long-app APP --long KERNEL]
                                    [--all-app APP --top N] [--seconds S] [--budget B]

APP is a folder under examples/ by name (heatcg, dense) or a path to an application (copied to a temporary
folder first; `mepgen extract` runs there unless it has a .mepgen/inventory.json). Defaults: the short kernel is
heatcg's cg::axpy (4M elements), the long one dense's matmul at 8192^3 (`--long-mep-args`), the batch is
dense's top 3. Every optimize run starts from its own copy of the prepared application (no cache shared
between before and after) and gets `--time-limit S` (the baseline included) and `--budget B`.
Writes OUT_DIR/optimize_speed.json and OUT_DIR/optimize_speed.md. Needs a GPU.
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
MEP_ARGS = {"heatcg": "--size N=4194304 --size NROWS=4194304 --size NNZ=20930584",
            "dense": "--size MAT_M=8192 --size MAT_N=8192 --size MAT_K=8192"}


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


def fresh_copy(prepared: Path, name: str) -> Path:
    target = prepared.parent / f"{prepared.name}-{name}"
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(prepared, target, ignore=shutil.ignore_patterns("runs", "batches", "cache"))
    for sub in (target / ".mepgen" / "meps").glob("*/eval"):      # the evaluator's caches (store.EVAL_DIR)
        shutil.rmtree(sub, ignore_errors=True)
    return target


def records(run_dir: Path) -> list[dict]:
    f = run_dir / "trajectory.jsonl"
    if not f.is_file():
        return []
    recs = [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
    return [r for r in recs if r.get("kind") == "attempt" and r.get("result") is not None]


def optimize_one(app: Path, kernel: str, mode: str, args, env: dict) -> dict:
    from mepgen.spec import load_spec
    kid = kernel.replace("::", ".")
    spec = load_spec(app / ".mepgen" / "meps" / kid / "mep.yaml")
    extra = (["--backend", "native", "--reps", str(spec.timing.reps), "--warmup", str(spec.timing.warmup)]
             if mode == "before" else [])
    cmd = ["optimize", kernel, "-C", str(app), "--budget", str(args.budget), "--time-limit", str(args.seconds),
           "--run-name", mode, "--no-inherit", "--json", *extra]
    started = time.time()
    p, wall = mepgen(cmd, env, timeout=args.seconds * 4 + 300)
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
    plan = (recs[0]["result"].get("timed") or {}).get("plan") if recs and recs[0]["result"].get("timed") else None
    return {"kernel": kernel, "mode": mode, "command": "mepgen " + " ".join(cmd), "exit": p.returncode,
            "wall_s": round(wall, 1), "evaluations": len(recs), "verified": verified,
            "per_min": round(len(recs) / wall * 60, 1), "verified_per_min": round(verified / wall * 60, 1),
            "search_s": round(search_s, 1) if search_s else None,
            "search_per_min": round(len(recs) / search_s * 60, 1) if search_s else None,
            "baseline_ms": out.get("baseline_ms"), "baseline_plan": out.get("plan"), "candidate_plan": plan,
            "backend": header.get("backend"), "backend_why": header.get("backend_why"),
            "speedup": (out.get("best") or {}).get("speedup"), "stop": out.get("stop_reason"),
            "error": out.get("error"), "stderr_tail": p.stderr.strip().splitlines()[-5:]}


def gpu_line() -> str:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30).stdout.strip().splitlines()
        return out[0] if out else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "no nvidia-smi"


def markdown(res: dict) -> str:
    lines = ["# mepgen optimize: candidates per minute, before and after", "",
             f"- GPU: {res['gpu']}; date {res['date']}; pycuda installed: {res['pycuda']}",
             f"- command: `{res['command']}`",
             f"- each run: `--time-limit {res['seconds']:g}` (baseline included), `--budget {res['budget']}`, "
             "`--no-inherit`, its own copy of the application", "",
             "| kernel | mode | backend | original ms | wall s | candidates | verified | per minute (wall) | "
             "per minute (search) | best | stopped | timing plan of a candidate |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in res["runs"]:
        lines.append(f"| {r['kernel']} | {r['mode']} | {r['backend'] or '-'} | {r['baseline_ms'] or '-'} | {r['wall_s']} | "
                     f"{r['evaluations']} | {r['verified']} | {r['per_min']} | {r['search_per_min'] or '-'} | "
                     f"{('%.2fx' % r['speedup']) if r['speedup'] else '-'} | {(r['stop'] or r['error'] or '').replace('|', '/')[:80]} | "
                     f"{(r['candidate_plan'] or '-').replace('|', '/')[:120]} |")
    b = res.get("batch")
    if b:
        lines += ["", f"## `{b['command']}`", "", f"wall {b['wall_s']} s, exit {b['exit']}", "", b.get("table", "")]
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--short-app", default="heatcg")
    ap.add_argument("--short", default="cg::axpy")
    ap.add_argument("--short-mep-args", default=None)
    ap.add_argument("--long-app", default="dense")
    ap.add_argument("--long", default="matmul")
    ap.add_argument("--long-mep-args", default=None)
    ap.add_argument("--all-app", default="dense")
    ap.add_argument("--all-mep-args", default="")
    ap.add_argument("--top", type=int, default=3)
    ap.add_argument("--all-seconds", type=float, default=20.0)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--budget", type=int, default=40)
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
           "seconds": args.seconds, "budget": args.budget, "runs": []}
    for which, app, kernel, mep_args in (
            ("short", args.short_app, args.short, args.short_mep_args),
            ("long", args.long_app, args.long, args.long_mep_args)):
        name = Path(app).name
        prepared = prepare(app, [kernel], mep_args if mep_args is not None else MEP_ARGS.get(name, ""),
                           work / which, env)
        for mode in args.modes.split(","):
            r = optimize_one(fresh_copy(prepared, mode), kernel, mode, args, env)
            r["which"] = which
            res["runs"].append(r)
            print(json.dumps({k: r[k] for k in ("kernel", "mode", "backend", "wall_s", "evaluations", "per_min",
                                                 "baseline_ms", "stop", "error")}), flush=True)
    if args.top > 0:
        prepared = prepare(args.all_app, [], "", work / "all", env)
        p, _ = mepgen(["mep", "--all", "-C", str(prepared), *shlex.split(args.all_mep_args)], env)
        cmd = ["optimize", "-C", str(prepared), "--top", str(args.top), "--budget", str(max(4, args.budget // 4)),
               "--time-limit", str(args.all_seconds), "--no-inherit", "--run-name", "speed-batch", "--json"]
        p, wall = mepgen(cmd, env, timeout=args.all_seconds * args.top * 4 + 300)
        table = prepared / ".mepgen" / "batches" / "speed-batch" / "table.md"
        res["batch"] = {"command": "mepgen " + " ".join(cmd), "wall_s": round(wall, 1), "exit": p.returncode,
                        "table": table.read_text() if table.is_file() else p.stderr[-2000:],
                        "stderr_tail": p.stderr.strip().splitlines()[-5:]}
        print(json.dumps({"batch_wall_s": res["batch"]["wall_s"], "exit": p.returncode}), flush=True)
    res["bench_wall_s"] = round(time.monotonic() - t0, 1)
    (args.out / "optimize_speed.json").write_text(json.dumps(res, indent=1) + "\n")
    (args.out / "optimize_speed.md").write_text(markdown(res))
    print(markdown(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
