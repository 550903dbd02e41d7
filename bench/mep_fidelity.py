#!/usr/bin/env python3
"""MEP fidelity on a GPU: is a kernel as fast in its MEP as inside the full application?

For every MEP of an example application (made with `mepgen extract` + `mepgen mep --all`):
1. build the application and profile it with Nsight Compute (`gpu__time_duration.sum` of each launch,
   caches flushed before each launch, clocks left alone);
2. build each MEP, run it twice with the same inputs and compare the outputs bit for bit (determinism);
3. time each MEP's kernel with the harness's CUDA events (L2 flushed between launches), and profile the
   MEP with the same Nsight Compute command, so both sides are measured the same way;
4. report per kernel: median time in the application, in the MEP (ncu and events), the ratio, and whether
   it is within 10%.

    python3 bench/mep_fidelity.py examples/heatcg --record bench/results/mep_fidelity.md
"""
from __future__ import annotations

import argparse
import csv
import datetime
import io
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mepgen.extract.profile import base_name  # noqa: E402
from mepgen.mepbuild import nvcc_command  # noqa: E402
from mepgen.spec import load_spec  # noqa: E402

NCU = ["ncu", "--clock-control", "none", "--cache-control", "all", "--csv", "--metrics", "gpu__time_duration.sum"]


def sh(cmd, cwd=None, timeout=600) -> subprocess.CompletedProcess:
    r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} failed ({r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    return r


def short(name: str) -> str:
    """`cg::axpy` -> `axpy`: ncu names a kernel with or without its namespace depending on the build."""
    return name.split("::")[-1]


def ncu_times(stdout: str) -> dict[str, list[float]]:
    """unqualified kernel name -> list of launch durations in microseconds."""
    lines = [ln for ln in stdout.splitlines() if ln.startswith('"')]
    out: dict[str, list[float]] = {}
    rows = list(csv.reader(io.StringIO("\n".join(lines))))
    if not rows:
        return out
    h = rows[0]
    ni, mi, ui, vi = h.index("Kernel Name"), h.index("Metric Name"), h.index("Metric Unit"), h.index("Metric Value")
    scale = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3}
    for r in rows[1:]:
        if r[mi] == "gpu__time_duration.sum":
            out.setdefault(short(base_name(r[ni])), []).append(float(r[vi].replace(",", "")) * scale.get(r[ui], 1.0))
    return out


def result_line(stdout: str) -> dict:
    for ln in stdout.splitlines():
        if ln.startswith("MEPGEN_RESULT "):
            return json.loads(ln[len("MEPGEN_RESULT "):])
    raise RuntimeError(f"no MEPGEN_RESULT line in:\n{stdout[-2000:]}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("app", type=Path)
    ap.add_argument("--app-args", default="--steps 5", help="arguments for the application run under ncu")
    ap.add_argument("--launch-count", type=int, default=300, help="ncu: launches profiled in the application")
    ap.add_argument("--binary", default="build/heatcg", help="the application's executable, relative to APP")
    ap.add_argument("--also", default="histogram|dense_matvec|column_mean",
                    help="ncu regex of kernels that run after the first --launch-count launches (heatcg's analysis "
                         "phase); '' for none")
    ap.add_argument("--record", type=Path)
    args = ap.parse_args()
    app = args.app.resolve()

    # 1. the application under Nsight Compute
    sh(["make", "-s", "-C", str(app), "-j8"], timeout=900)
    binary = app / args.binary
    app_times: dict[str, list[float]] = {}
    # the time loop's kernels come first; the analysis kernels run once after it
    runs = [["--launch-count", str(args.launch_count)]] + \
        ([["-k", f"regex:{args.also}", "--launch-count", "6"]] if args.also else [])
    for extra in runs:
        r = sh([*NCU, *extra, str(binary), *args.app_args.split()], cwd=app, timeout=900)
        for k, v in ncu_times(r.stdout).items():
            app_times.setdefault(k, []).extend(v)

    rows = []
    for mep in sorted((app / ".mepgen" / "meps").iterdir()):
        spec = load_spec(mep / "mep.yaml")
        row = {"kernel": spec.kernel.name, "id": spec.kernel.id}
        try:
            with tempfile.TemporaryDirectory() as tmp:
                exe = Path(tmp) / "mep"
                sh(nvcc_command(spec, mep, mep / "kernel.cu", exe), timeout=600)
                outs = []
                for i in range(2):  # 2. determinism: same inputs twice
                    out = Path(tmp) / f"out{i}"
                    sh([str(exe), "--data", str(mep / "data" / "in"), "--out", str(out)], cwd=mep)
                    outs.append({p.name: np.load(p) for p in sorted(out.glob("*.npy"))})
                row["outputs"] = sorted(outs[0])
                row["identical"] = all(np.array_equal(outs[0][n], outs[1][n], equal_nan=True) for n in outs[0])
                # 3. events timing, then the same ncu measurement as for the application
                res = result_line(sh([str(exe), "--data", str(mep / "data" / "in"), "--out", str(Path(tmp) / "t"),
                                      "--time", "--reps", "100", "--warmup", "10"], cwd=mep).stdout)
                row["mep_events_us"] = res["median_ms"] * 1e3
                row["mep_events_spread_us"] = (res["max_ms"] - res["min_ms"]) * 1e3
                r = sh([*NCU, str(exe), "--data", str(mep / "data" / "in"), "--out", str(Path(tmp) / "n"),
                        "--time", "--reps", "20", "--warmup", "2", "--no-flush"], cwd=mep)
                mt = ncu_times(r.stdout).get(short(spec.kernel.name), [])
                row["mep_ncu_us"] = statistics.median(mt) if mt else None
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            row["error"] = str(e).splitlines()[0][:200]
        at = app_times.get(short(spec.kernel.name), [])
        row["app_ncu_us"] = statistics.median(at) if at else None
        row["app_launches_profiled"] = len(at)
        if row.get("mep_ncu_us") and row["app_ncu_us"]:
            row["ratio"] = row["mep_ncu_us"] / row["app_ncu_us"]
            row["within_10pct"] = abs(row["ratio"] - 1) <= 0.10
        rows.append(row)
        print(json.dumps(row), flush=True)

    gpu = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                         capture_output=True, text=True).stdout.strip()
    if args.record:
        args.record.parent.mkdir(parents=True, exist_ok=True)
        fmt = lambda x: "—" if x is None else f"{x:.1f}"
        with args.record.open("a") as fh:
            fh.write(f"\n## {datetime.date.today()} — {gpu}\n\nCommand: `python3 bench/mep_fidelity.py "
                     f"{args.app.as_posix()} --binary {args.binary} --app-args '{args.app_args}' --also '{args.also}'` (after `mepgen extract` and "
                     "`mepgen mep --all`). Times are medians in µs; ncu = `gpu__time_duration.sum` with "
                     "`--cache-control all --clock-control none` on both sides; events = the harness's CUDA "
                     "events with L2 flushed between launches.\n\n"
                     "| kernel | app ncu | MEP ncu | ratio | within 10% | MEP events (spread) | same seed, same outputs |\n"
                     "|---|---|---|---|---|---|---|\n")
            for r in rows:
                if "error" in r:
                    fh.write(f"| {r['kernel']} | {fmt(r['app_ncu_us'])} | error: {r['error']} | | | | |\n")
                    continue
                fh.write(f"| {r['kernel']} | {fmt(r['app_ncu_us'])} | {fmt(r.get('mep_ncu_us'))} | "
                         f"{r.get('ratio', float('nan')):.3f} | {'yes' if r.get('within_10pct') else 'no'} | "
                         f"{fmt(r['mep_events_us'])} ({fmt(r['mep_events_spread_us'])}) | "
                         f"{'yes' if r['identical'] else 'no'} |\n")
        args.record.with_suffix(".json").write_text(json.dumps({"gpu": gpu, "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
