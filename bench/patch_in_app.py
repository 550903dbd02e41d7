#!/usr/bin/env python3
"""Patch on a GPU: does the optimizer's winner, patched into the application, run there as fast as in its MEP?

For each kernel, in a fresh copy of the example application:
1. build the application, profile it with Nsight Compute (`gpu__time_duration.sum`, caches flushed before each
   launch, clocks left alone): the kernel's time in the original application;
2. `mepgen extract`, `mepgen mep KERNEL`, `mepgen capture KERNEL --use -- ./app ARGS` (the MEP runs on the
   application's own data: a histogram's time depends on where its values fall; `--no-capture` keeps the
   synthetic inputs), `mepgen optimize KERNEL` (default proposer: the transformation library) -> the winner
   `best/kernel.cu` (and `best/mep.yaml` when it changed the launch);
3. build the winner's MEP exactly as the evaluator did (its launch, its flags) and profile it with the same
   Nsight Compute command: the winner's time in the MEP;
4. `mepgen patch KERNEL --apply` (backup, recompile of the changed translation units, re-extraction), rebuild
   the application with its own Makefile, run it: it must pass its own self-check (exit 0); profile it again:
   the patched kernel's time inside the application (each application profile: 3 runs, so a kernel launched
   once still has 3 samples);
5. `mepgen patch KERNEL --revert`: every file of the application must be byte-identical to the original.

Reported per kernel: app time before and after the patch, the application-level speedup of that kernel, the
winner's time in the MEP and the ratio app-after / MEP (goal: within 10%), the self-check, the revert.

    python3 bench/patch_in_app.py examples/heatcg --record bench/results/patch_in_app.md
"""
from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from example_apps import example  # noqa: E402
from mep_fidelity import NCU, ncu_times, sh, short  # noqa: E402
from mepgen.evaluate.launchcfg import candidate_harness  # noqa: E402
from mepgen.mepbuild import nvcc_command  # noqa: E402
from mepgen.spec import load_spec  # noqa: E402

MEPGEN = [sys.executable, "-m", "mepgen.cli"]
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))

# per example: the kernels the transformation library speeds up
KERNELS = {
    "heatcg": ["analysis::dense_matvec", "analysis::histogram", "analysis::column_mean"],
    "dense": ["matmul", "syrk_lower", "smooth9"],
}


def tree_hashes(root: Path) -> dict[str, str]:
    """sha256 of every source file of the application (not its build outputs nor mepgen's workspace)."""
    out = {}
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root)
        if p.is_file() and rel.parts[0] not in (".mepgen", "build") and p.name != "compile_commands.json":
            out[rel.as_posix()] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


APP_RUNS = 3     # the application is profiled this many times: a kernel it launches once gets 3 samples


def app_kernel_us(app: Path, run: dict, kernel: str, count: int) -> list[float]:
    base = short(kernel)
    out: list[float] = []
    for _ in range(APP_RUNS):
        r = sh([*NCU, "-k", f"regex:^{base}", "--launch-count", str(count), str(run["binary"]), *run["args"]],
               cwd=app, timeout=900)
        out += ncu_times(r.stdout).get(base, [])
    return out


def mep_kernel_us(mep: Path, best: Path, tmp: Path) -> list[float]:
    """The winner built as the evaluator built it (its own launch and flags when best/mep.yaml has them)."""
    spec = load_spec(mep / "mep.yaml")
    harness = None
    if (best.parent / "mep.yaml").is_file():
        spec_best = load_spec(best.parent / "mep.yaml")
        if spec_best.launch != spec.launch:
            harness, why = candidate_harness(spec, mep, spec_best.launch, tmp / "harness")
            if harness is None:
                raise RuntimeError(why)
        spec = spec_best
    exe = tmp / "mep-best"
    sh(nvcc_command(spec, mep, best, exe, harness), timeout=600)
    r = sh([*NCU, "-k", f"regex:^{short(spec.kernel.name)}", "--launch-count", "10", str(exe), "--data",
            str(mep / "data" / "in"), "--out", str(tmp / "n"), "--time", "--reps", "20", "--warmup", "2", "--no-flush"],
           cwd=mep, timeout=900)
    return ncu_times(r.stdout).get(short(spec.kernel.name), [])


def check_kernel(app: Path, run: dict, kernel: str, budget: int, time_limit: float, backend: str,
                 original: dict[str, str], capture: bool, sizes: list[str] = ()) -> dict:
    row: dict = {"kernel": kernel}
    count = 10
    before = app_kernel_us(app, run, kernel, count)
    row["app_before_us"] = statistics.median(before) if before else None
    r = subprocess.run([*MEPGEN, "mep", kernel, "-C", str(app), "--force", *[a for v in sizes for a in ("--size", v)]],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"mepgen mep {kernel}: {r.stderr.strip()[-400:]}")
    if capture:
        r = sh([*MEPGEN, "capture", kernel, "--use", "--json", "-C", str(app), "--", str(run["binary"]), *run["args"]],
               cwd=app, timeout=900)
        row["captured"] = json.loads(r.stdout).get("bytes_captured")
    r = sh([*MEPGEN, "optimize", kernel, "-C", str(app), "--budget", str(budget), "--time-limit", str(time_limit),
            "--backend", backend, "--no-inherit", "--json"], cwd=app, timeout=1800)
    opt = json.loads(r.stdout)
    row["optimize"] = {"evaluations": opt["evaluations"], "stop_reason": opt["stop_reason"],
                       "baseline_ms": opt["baseline_ms"], "best": opt["best"]}
    if opt["best"] is None:
        row["skipped"] = "no verified variant was faster"
        return row
    best = Path(opt["best"]["kernel"])
    mep = best.parents[4] / "meps" / best.parents[2].name       # .mepgen/runs/ID/RUN/best/kernel.cu
    with tempfile.TemporaryDirectory() as t:
        mt = mep_kernel_us(mep, best, Path(t))
    row["mep_best_us"] = statistics.median(mt) if mt else None
    r = subprocess.run([*MEPGEN, "patch", kernel, "-C", str(app), "--apply", "--json"], cwd=app, capture_output=True,
                       text=True, timeout=900)
    pr = json.loads(r.stdout) if r.stdout.strip().startswith("{") else {}
    if r.returncode != 0:
        row["patch"] = {"validation": pr.get("validation")}
        raise RuntimeError(r.stderr.strip() or f"mepgen patch exited {r.returncode}")
    row["patch"] = {"launch": pr.get("launch"), "new_helpers": pr.get("new_helpers"), "valid": pr.get("valid"),
                    "nvcc_flags": pr.get("nvcc_flags"),
                    "validation": [f"{c['check']}: {'ok' if c['ok'] else 'FAIL'}" for c in pr.get("validation", [])]}
    sh(["make", "-s", "-C", str(app), "-j8"], timeout=900)
    done = subprocess.run([str(run["binary"]), *run["args"]], cwd=app, capture_output=True, text=True, timeout=900)
    row["self_check"] = done.returncode == 0
    row["self_check_line"] = next((ln for ln in done.stdout.splitlines()[::-1] if "self-check" in ln.lower()),
                                  done.stdout.strip().splitlines()[-1] if done.stdout.strip() else "")
    after = app_kernel_us(app, run, kernel, count)
    row["app_after_us"] = statistics.median(after) if after else None
    if row["app_before_us"] and row["app_after_us"]:
        row["app_speedup"] = row["app_before_us"] / row["app_after_us"]
    if row["app_after_us"] and row["mep_best_us"]:
        row["ratio"] = row["app_after_us"] / row["mep_best_us"]
        row["within_10pct"] = abs(row["ratio"] - 1) <= 0.10
    sh([*MEPGEN, "patch", kernel, "-C", str(app), "--revert"], cwd=app)
    now = tree_hashes(app)
    row["revert_identical"] = now == original
    if not row["revert_identical"]:
        row["revert_differs"] = sorted(k for k in set(now) | set(original) if now.get(k) != original.get(k))
    sh(["make", "-s", "-C", str(app), "-j8"], timeout=900)      # the original build again for the next kernel
    return row


def write_record(path: Path, args, rows: list[dict], gpu: str) -> None:
    f1 = lambda x: "—" if x is None else f"{x:.1f}"
    yes = lambda b: "yes" if b else "no"
    with path.open("a") as fh:
        fh.write(f"\n## {datetime.date.today()} — {gpu}\n\nCommand: `python3 bench/patch_in_app.py "
                 f"{args.app.as_posix()} --budget {args.budget} --time-limit {args.time_limit} --backend "
                 f"{args.backend}{'' if args.capture else ' --no-capture'}"
                 f"{''.join(f' --kernel {k}' for k in args.kernel or [])}{''.join(f' --size {v}' for v in args.size)}`. "
                 "Per kernel: "
                 f"{'`mepgen capture --use` (the MEP on the application data), ' if args.capture else ''}"
                 "`mepgen optimize` (library, no inheritance), `mepgen patch --apply`, "
                 "rebuild with the application's Makefile, run (self-check), `mepgen patch --revert`. Times in µs: "
                 "median ncu `gpu__time_duration.sum` (`--cache-control all --clock-control none`) of the kernel's "
                 f"launches in {APP_RUNS} runs of the application before and after the patch, and of 10 launches of the winner in its "
                 "MEP (its own launch and flags).\n\n"
                 "| kernel | app before | app after | speedup in app | MEP winner | app after / MEP | within 10% | "
                 "self-check | revert byte-identical | launch change | winner |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
        for r in rows:
            if "error" in r or "skipped" in r:
                fh.write(f"| {r['kernel']} | {f1(r.get('app_before_us'))} | {r.get('error') or r.get('skipped')} "
                         "| | | | | | | | |\n")
                continue
            fh.write(f"| {r['kernel']} | {f1(r['app_before_us'])} | {f1(r['app_after_us'])} | "
                     f"{r.get('app_speedup', float('nan')):.2f}x | {f1(r['mep_best_us'])} | "
                     f"{r.get('ratio', float('nan')):.3f} | {yes(r.get('within_10pct'))} | "
                     f"{yes(r['self_check'])} | {yes(r['revert_identical'])} | "
                     f"{'; '.join(r['patch']['launch'] or []) or '-'} | {r['optimize']['best']['change'][:160]} |\n")
    path.with_suffix(".json").write_text(json.dumps({"gpu": gpu, "rows": rows}, indent=1) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("app", type=Path, help="an example application (examples/heatcg, examples/dense)")
    ap.add_argument("--kernel", action="append", help="kernels to patch (default: the example's list)")
    ap.add_argument("--budget", type=int, default=20)
    ap.add_argument("--time-limit", type=float, default=40.0)
    ap.add_argument("--backend", default="auto")
    ap.add_argument("--record", type=Path)
    ap.add_argument("--size", action="append", default=[], metavar="NAME=VALUE",
                    help="passed to `mepgen mep` (the sizes mepgen cannot trace, e.g. heatcg's N for cg::axpy)")
    ap.add_argument("--no-capture", dest="capture", action="store_false",
                    help="optimize on the MEP's synthetic inputs instead of the application's captured data")
    args = ap.parse_args()
    src = args.app.resolve()
    kernels = args.kernel or KERNELS.get(src.name)
    if not kernels:
        sys.exit(f"patch_in_app.py: name the kernels with --kernel (no default list for {src.name})")
    rows = []
    with tempfile.TemporaryDirectory(prefix="mepgen-patchbench-") as tmp:
        app = Path(tmp) / src.name
        shutil.copytree(src, app, ignore=shutil.ignore_patterns(".mepgen", "build", "compile_commands.json"))
        sh(["make", "-s", "-C", str(app), "-j8"], timeout=900)
        sh(["make", "-s", "-C", str(app), "compile_commands.json"], timeout=300)   # flags for extract and patch
        original = tree_hashes(app)
        run = example(app)
        sh([*MEPGEN, "extract", str(app)], timeout=900)
        for kernel in kernels:
            try:
                row = check_kernel(app, run, kernel, args.budget, args.time_limit, args.backend, original,
                                   args.capture, args.size)
            except (RuntimeError, subprocess.TimeoutExpired, json.JSONDecodeError, KeyError) as e:
                lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()] or [repr(e)]
                said = [ln for ln in lines if ln.startswith("mepgen:")]
                row = {"kernel": kernel, "error": (said or lines)[-1][:300]}
                subprocess.run([*MEPGEN, "patch", kernel, "-C", str(app), "--revert", "--force"], capture_output=True)
            rows.append(row)
            print(json.dumps(row), flush=True)
    gpu = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                         capture_output=True, text=True).stdout.strip()
    if args.record:
        write_record(args.record, args, rows, gpu)
    ok = all(r.get("self_check") and r.get("revert_identical") and r.get("within_10pct") for r in rows if "skipped" not in r)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
