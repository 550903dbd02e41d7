#!/usr/bin/env python3
"""`mepgen optimize` (default proposer: the transformation library) on every kernel of an example application
(examples/heatcg by default), and the measured saving of performance-pattern inheritance on a second kernel
similar to a first.

    python3 bench/optimize_examples.py [--budget 25] [--time-limit 30] [--wall 470] [--pair cg.axpy:cg.xpay]
    python3 bench/optimize_examples.py --app dense --pair matmul:gemm_tn

Writes bench/results/optimize_examples.md (and .json). Needs a GPU; bounded to `--wall` seconds (default just
under 8 minutes on one H200): kernels left when the wall budget is spent are listed as skipped.

The inheritance saving: kernel A is optimized with an empty patterns database (its wins are recorded), then
kernel B twice: inheriting A's wins, and cold (--no-inherit, another empty database). For each B run: the
evaluations needed to reach 95% of the best speedup either B run found.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# `mepgen mep --all` options of each example: the sizes mepgen cannot trace through heatcg's CSR struct
APP_SIZES = {"heatcg": ["--size", "N=4194304", "--size", "NROWS=4194304", "--size", "NNZ=20930584"], "dense": []}
DEFAULT_PAIR = {"heatcg": "cg.axpy:cg.xpay", "dense": "matmul:gemm_tn"}


def mepgen(args: list[str], env: dict, timeout: float) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "mepgen.cli", *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)


def backend() -> str:
    try:
        import pycuda  # noqa: F401
        return "pycuda"
    except ImportError:
        return "native"


def gpu_line() -> str:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30).stdout.strip().splitlines()
        return out[0] if out else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown (nvidia-smi failed)"


def attempts(run_dir: Path) -> list[dict]:
    f = run_dir / "trajectory.jsonl"
    if not f.is_file():
        return []
    recs = [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
    return [r for r in recs if r.get("kind") == "attempt" and r.get("result") is not None]


def chain(recs: list[dict], best_id: str | None) -> list[str]:
    by_id = {r["id"]: r for r in recs}
    out, cur = [], by_id.get(best_id) if best_id else None
    while cur is not None:
        out.append(cur["change"] + (" (repair)" if cur.get("repair_of") else ""))
        nxt = cur.get("repair_of") or cur.get("parent")
        cur = by_id.get(nxt) if nxt else None
    return out[::-1]


def evals_to(recs: list[dict], target: float) -> int | None:
    for i, r in enumerate(recs, 1):
        if r.get("faster") and (r.get("speedup") or 0) >= target:
            return i
    return None


def optimize(app: Path, kernel: str, run: str, env: dict, args, inherit: bool) -> dict:
    cmd = ["optimize", kernel, "-C", str(app), "--budget", str(args.budget), "--time-limit", str(args.time_limit),
           "--backend", args.backend, "--run-name", run, "--json"] + ([] if inherit else ["--no-inherit"])
    start = time.monotonic()
    p = mepgen(cmd, env, timeout=args.time_limit * 3 + 120)
    wall = time.monotonic() - start
    kid = kernel.replace("::", ".")
    run_dir = app / ".mepgen" / "runs" / kid / run
    recs = attempts(run_dir)
    try:
        out = json.loads(p.stdout)
    except json.JSONDecodeError:
        out = {"error": (p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1]}
    out.update({"kernel": kernel, "wall_s": round(wall, 1), "exit": p.returncode, "run_dir": str(run_dir),
                "command": "mepgen " + " ".join(cmd), "attempts": recs,
                "chain": chain(recs, (out.get("best") or {}).get("id"))})
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", type=int, default=25)
    ap.add_argument("--time-limit", type=float, default=30.0)
    ap.add_argument("--wall", type=float, default=470.0, help="Whole benchmark's wall-time bound in seconds.")
    ap.add_argument("--app", default="heatcg", choices=sorted(APP_SIZES), help="the example application")
    ap.add_argument("--pair", default=None, help="A:B kernel ids for the inheritance saving (default per app).")
    ap.add_argument("--backend", default=backend())
    ap.add_argument("--out", type=Path, default=None,
                    help="default bench/results/optimize_examples.md (heatcg), optimize_examples_APP.md otherwise")
    args = ap.parse_args()
    args.pair = args.pair or DEFAULT_PAIR[args.app]
    args.out = args.out or ROOT / "bench" / "results" / (
        "optimize_examples.md" if args.app == "heatcg" else f"optimize_examples_{args.app}.md")
    t0 = time.monotonic()
    tmp = Path(tempfile.mkdtemp(prefix="mepgen-optbench-"))
    app = tmp / args.app
    shutil.copytree(ROOT / "examples" / args.app, app,
                    ignore=shutil.ignore_patterns(".mepgen", "build", "build-cmake", "compile_commands.json"))
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    for k in [k for k in env if k.endswith("API_KEY")]:
        env.pop(k)                                      # the default proposer needs no key
    p = mepgen(["extract", str(app)], env, 600)
    if p.returncode:
        print(p.stderr, file=sys.stderr)
        return 1
    p = mepgen(["mep", "--all", "-C", str(app), *APP_SIZES[args.app]], env, 600)
    kernels = sorted(d.name for d in (app / ".mepgen" / "meps").iterdir() if (d / "mep.yaml").is_file())
    a_id, b_id = args.pair.split(":")
    survey, skipped = [], []
    env_survey = dict(env, MEPGEN_PATTERNS_DB=str(tmp / "survey.sqlite"))
    reserve = 3 * (args.time_limit + 40)               # keep time for the inheritance runs
    for k in kernels:
        if time.monotonic() - t0 > args.wall - reserve - args.time_limit - 30:
            skipped.append(k)
            continue
        r = optimize(app, k, "survey", env_survey, args, inherit=False)
        survey.append(r)
        best = r.get("best") or {}
        print(f"{k}: {r.get('evaluations')} evaluations, best {best.get('speedup') or 1:.2f}x "
              f"({r.get('error') or r.get('stop_reason')})", file=sys.stderr)
    env_inh = dict(env, MEPGEN_PATTERNS_DB=str(tmp / "inherit.sqlite"))
    env_cold = dict(env, MEPGEN_PATTERNS_DB=str(tmp / "cold.sqlite"))
    first = optimize(app, a_id, "inherit-A", env_inh, args, inherit=True)
    with_inh = optimize(app, b_id, "inherit-B", env_inh, args, inherit=True)
    cold = optimize(app, b_id, "cold-B", env_cold, args, inherit=False)
    best_b = max([r.get("speedup") or 0 for run in (with_inh, cold) for r in run["attempts"] if r.get("faster")] or [0])
    target = 0.95 * best_b
    saving = {"A": a_id, "B": b_id, "best_speedup_B": best_b, "target": target,
              "with_inheritance": evals_to(with_inh["attempts"], target) if best_b else None,
              "without_inheritance": evals_to(cold["attempts"], target) if best_b else None,
              "evaluations_with": len(with_inh["attempts"]), "evaluations_without": len(cold["attempts"]),
              "A_wins": sum(1 for r in first["attempts"] if r.get("faster"))}
    write_report(args, survey, skipped, first, with_inh, cold, saving, time.monotonic() - t0)
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


def write_report(args, survey, skipped, first, with_inh, cold, saving, wall) -> None:
    L = [f"# mepgen optimize on the kernels of examples/{args.app}", "",
         f"- GPU: {gpu_line()}", f"- date: {time.strftime('%Y-%m-%d %H:%M %Z')}",
         f"- command: `python3 bench/optimize_examples.py --app {args.app} --budget {args.budget} --time-limit "
         f"{args.time_limit} --wall {args.wall} --pair {args.pair} --backend {args.backend}`",
         f"- each kernel: `mepgen optimize KERNEL --budget {args.budget} --time-limit {args.time_limit} "
         f"--backend {args.backend} --no-inherit` (default proposer: the transformation library)",
         f"- benchmark wall time: {wall:.0f} s", "",
         "| kernel | original ms | best ms | speedup | evaluations | stopped | winning chain |",
         "|---|---|---|---|---|---|---|"]
    for r in survey:
        best = r.get("best") or {}
        stop = (r.get("stop_reason") or r.get("error") or "").replace("|", "/")
        L.append(f"| {r['kernel']} | {_f(r.get('baseline_ms'))} | {_f(best.get('median_ms'))} | "
                 f"{_f(best.get('speedup'), '{:.2f}x')} | {r.get('evaluations', '-')} | {stop[:70]} | "
                 f"{' → '.join(r['chain']).replace('|', '/') or '-'} |")
    if skipped:
        L.append(f"\nskipped (wall budget spent): {', '.join(skipped)}")
    s = saving
    L += ["", "## Inheritance saving", "",
          f"Kernel A `{s['A']}` optimized first with an empty patterns database ({s['A_wins']} verified win(s) "
          f"recorded); then kernel B `{s['B']}` inheriting them, and cold (`--no-inherit`, empty database).", "",
          f"Best speedup of B over both runs: {s['best_speedup_B']:.2f}x; 95% of it: {s['target']:.2f}x.", "",
          "| B run | evaluations to reach 95% of the best speedup | evaluations |", "|---|---|---|",
          f"| with inheritance | {s['with_inheritance'] or 'not reached'} | {s['evaluations_with']} |",
          f"| without inheritance | {s['without_inheritance'] or 'not reached'} | {s['evaluations_without']} |"]
    for name, r in (("A", first), ("B with inheritance", with_inh), ("B cold", cold)):
        L.append(f"\n{name}: `{r['command']}` → {len(r['attempts'])} evaluations, "
                 f"chain: {' → '.join(r['chain']) or 'no win'}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(L) + "\n")
    raw = {"survey": survey, "skipped": skipped, "A": first, "B_inherit": with_inh, "B_cold": cold, "saving": saving}
    args.out.with_suffix(".json").write_text(json.dumps(raw, indent=1, default=str) + "\n")
    print(f"wrote {args.out}", file=sys.stderr)


def _f(v, fmt: str = "{:.4g}") -> str:
    return "-" if v is None else fmt.format(v)


if __name__ == "__main__":
    sys.exit(main())
