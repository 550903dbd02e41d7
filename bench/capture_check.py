#!/usr/bin/env python3
"""Capture on a GPU: does an MEP on captured data reproduce the application's launch, bit for bit and in time?

For each kernel (a data-dependent CSR SpMV inside CG, a stencil with __constant__ data and a struct argument, a
dense mat-vec of the analysis phase) of an example application:
1. `mepgen mep KERNEL --force`, then `mepgen capture KERNEL --launch N --use --measure-overhead -- ./app ARGS`:
   the launch's inputs and outputs, mep.yaml pointed at them, the application's wall time with and without the
   injector;
2. build the MEP (mepgen.mepbuild.nvcc_command), run it on the captured inputs (`./mep --data data/in`, which
   `--use` regenerated from data/captured/before/), and compare every output with the captured "after" copy bit
   for bit; elements the MEP left poisoned must be elements the application did not change either; run it twice
   to check it is deterministic;
3. time the kernel under the same Nsight Compute measurement in both: the captured launch (and the 4 after it) in
   the application, 10 launches in the MEP (`--clock-control none --cache-control all`), plus the harness's CUDA
   events; report the ratio and whether it is within 10%.

    python3 bench/capture_check.py examples/heatcg --steps 10 --record bench/results/capture.md
    python3 bench/capture_check.py examples/dense --record bench/results/capture.md
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from example_apps import example  # noqa: E402
from mep_fidelity import NCU, ncu_times, result_line, sh, short  # noqa: E402
from mepgen.mepbuild import nvcc_command  # noqa: E402
from mepgen.spec import load_spec  # noqa: E402

# per example: kernel, launch to capture (counted per kernel), why it is here
KERNELS = {
    "heatcg": [
        ("cg::spmv_csr", 5, "data-dependent: CSR matrix of the implicit step, CG search direction"),
        ("heat::diffuse_step", 3, "__constant__ stencil, struct argument, in/out pair"),
        ("analysis::dense_matvec", 0, "analysis phase, launched once"),
        ("analysis::histogram", 0, "data-dependent: atomics contend on the bins the field's values fall in"),
        ("cg::dot", 2, "the first dot(p, Ap) of a CG iteration (launches 0 and 1 are dot(b, b) and dot(r, r))"),
    ],
    "dense": [
        ("conv1d_taps", 1, "__constant__ filter taps set by the application"),
        ("diffuse7", 2, "3D stencil, struct argument, ping-pong buffers swapped by the time loop"),
        ("lower_solve", 0, "triangular solve: a sequential dependence down the rows"),
    ],
}
MEPGEN = [sys.executable, "-m", "mepgen.cli"]
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))


def compare(mep_out: np.ndarray, after: np.ndarray, before: np.ndarray) -> dict:
    """Bitwise comparison of one output; elements the MEP did not write (poison) count only if the
    application changed them."""
    n = mep_out.size
    after, before = after[:n], before[:n]
    differ = (mep_out.view(np.uint8).reshape(n, -1) != after.view(np.uint8).reshape(n, -1)).any(axis=1)
    poisoned = np.isnan(mep_out) if mep_out.dtype.kind == "f" else np.zeros(n, bool)
    app_kept = (before.view(np.uint8).reshape(n, -1) == after.view(np.uint8).reshape(n, -1)).all(axis=1)
    excused = differ & poisoned & app_kept
    bad = differ & ~excused
    out = {"elements": int(n), "bit_identical": int(n - differ.sum()), "unwritten_in_both": int(excused.sum()),
           "mismatches": int(bad.sum())}
    if bad.any() and mep_out.dtype.kind == "f":
        d = np.abs(mep_out[bad].astype(np.float64) - after[bad].astype(np.float64))
        out["max_abs_diff"] = float(np.nanmax(d)) if np.isfinite(d).any() else float("nan")
    return out


def check_kernel(app: Path, run: dict, kernel: str, launch: int, have_ncu: bool) -> dict:
    row: dict = {"kernel": kernel, "launch": launch}
    r = subprocess.run([*MEPGEN, "mep", kernel, "--force", "-C", str(app)], capture_output=True, text=True)
    if r.returncode not in (0, 3):  # 3: todo entries the capture will settle
        raise RuntimeError(f"mepgen mep {kernel}: {r.stderr.strip()[-500:]}")
    r = sh([*MEPGEN, "capture", kernel, "--launch", str(launch), "--use", "--measure-overhead", "--json",
            "-C", str(app), "--", str(run["binary"]), *run["args"]], cwd=app, timeout=900)
    (cap,) = json.loads(r.stdout)          # one outcome per kernel; --use writes the MEP from the record
    row["capture"] = {k: cap[k] for k in ("launched_as", "grid", "block", "bytes_captured", "capture_ms", "overhead")}
    row["use_skipped"] = cap.get("todo", [])
    mep = app / ".mepgen" / "meps" / load_spec_id(app, kernel)
    spec = load_spec(mep / "mep.yaml")
    row["placement"] = {p.name: p.placement for p in spec.params if p.is_buffer}
    captured = mep / "data" / "captured"
    manifest = json.loads((captured / "manifest.json").read_text())
    files = {p["name"]: p for p in manifest["params"] if p["kind"] == "buffer"}
    with tempfile.TemporaryDirectory() as tmp:
        exe = Path(tmp) / "mep"
        sh(nvcc_command(spec, mep, mep / "kernel.cu", exe), timeout=600)
        outs = []
        for i in range(2):
            out = Path(tmp) / f"out{i}"
            sh([str(exe), "--data", str(mep / "data" / "in"), "--out", str(out)], cwd=mep)
            outs.append({p.name: np.load(out / f"{p.name}.npy") for p in spec.outputs})
        row["mep_deterministic"] = all(np.array_equal(outs[0][k].view(np.uint8), outs[1][k].view(np.uint8))
                                       for k in outs[0])
        from mepgen.capture.convert import load_array    # an unchanged output has no after file: it is its before
        row["outputs"] = {name: compare(arr, load_array(captured, files[name]["after"] or files[name]["before"]),
                                        np.load(captured / files[name]["before"])) for name, arr in outs[0].items()}
        row["bit_for_bit"] = all(o["mismatches"] == 0 for o in row["outputs"].values())
        res = result_line(sh([str(exe), "--data", str(mep / "data" / "in"), "--out", str(Path(tmp) / "t"),
                              "--time", "--reps", "100", "--warmup", "10"], cwd=mep).stdout)
        row["mep_events_us"] = res["median_ms"] * 1e3
        base = kernel.split("::")[-1]
        if have_ncu:
            r = sh([*NCU, "-k", f"regex:{base}", "--launch-count", "10", str(exe), "--data", str(mep / "data" / "in"),
                    "--out", str(Path(tmp) / "n"), "--time", "--reps", "20", "--warmup", "2", "--no-flush"], cwd=mep,
                   timeout=900)
            mt = ncu_times(r.stdout).get(short(kernel), [])
            row["mep_ncu_us"] = statistics.median(mt) if mt else None
    if have_ncu:
        r = sh([*NCU, "-k", f"regex:{base}", "--launch-skip", str(launch), "--launch-count", "5", str(run["binary"]),
                *run["args"]], cwd=app, timeout=900)
        at = ncu_times(r.stdout).get(short(kernel), [])
        row["app_captured_launch_us"] = at[0] if at else None
        row["app_ncu_us"] = statistics.median(at) if at else None
        if row.get("mep_ncu_us") and row.get("app_captured_launch_us"):
            row["ratio"] = row["mep_ncu_us"] / row["app_captured_launch_us"]
            row["within_10pct"] = abs(row["ratio"] - 1) <= 0.10
    return row


def load_spec_id(app: Path, kernel: str) -> str:
    inv = json.loads((app / ".mepgen" / "inventory.json").read_text())
    return next(k["id"] for k in inv["kernels"] if k["qualified_name"] == kernel)


def write_record(path: Path, args, rows: list[dict], gpu: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    f1 = lambda x: "—" if x is None else f"{x:.1f}"
    run = example(args.app, args.steps)
    runline = " ".join(["./" + run["binary"].relative_to(args.app).as_posix(), *run["args"]])
    with path.open("a") as fh:
        fh.write(f"\n## {datetime.date.today()} — {gpu}\n\nCommand: `python3 bench/capture_check.py "
                 f"{args.app.as_posix()} --steps {args.steps}`. Each kernel: `mepgen mep K --force`, then "
                 f"`mepgen capture K --launch N --use --measure-overhead -- {runline}`; the MEP runs on "
                 "the captured inputs and its outputs are compared bit for bit with the captured outputs. Times in µs: "
                 "ncu `gpu__time_duration.sum` (`--cache-control all --clock-control none`) of the captured launch in "
                 "the application vs the median of 10 MEP launches; events = the harness's CUDA events, L2 flushed.\n\n"
                 "| kernel | launch | bit for bit (mismatches / elements) | MEP deterministic | app ncu (captured launch) | "
                 "MEP ncu | ratio | within 10% | MEP events | captured | capture ms | app wall plain → captured (s) | "
                 "placement (bytes past 2 MiB) |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
        for r in rows:
            if "error" in r:
                fh.write(f"| {r['kernel']} | {r['launch']} | error: {r['error']} | | | | | | | | | | |\n")
                continue
            mism = sum(o["mismatches"] for o in r["outputs"].values())
            elems = sum(o["elements"] for o in r["outputs"].values())
            o = r["capture"].get("overhead") or {}
            fh.write(f"| {r['kernel']} | {r['launch']} | {'yes' if r['bit_for_bit'] else 'no'} ({mism} / {elems}) | "
                     f"{'yes' if r['mep_deterministic'] else 'no'} | {f1(r.get('app_captured_launch_us'))} | "
                     f"{f1(r.get('mep_ncu_us'))} | {r.get('ratio', float('nan')):.3f} | "
                     f"{'yes' if r.get('within_10pct') else 'no'} | {f1(r['mep_events_us'])} | "
                     f"{r['capture']['bytes_captured'] / 2**20:.1f} MiB | {r['capture']['capture_ms']:.0f} | "
                     f"{o.get('wall_s_plain', float('nan')):.2f} → {o.get('wall_s_captured', float('nan')):.2f} "
                     f"(x{o.get('ratio')}) | "
                     f"{', '.join(f'{k} {v}' for k, v in (r.get('placement') or {}).items()) or '-'} |\n")
    # one entry per run, appended like the markdown (a file of the older single-run shape becomes the first entry)
    jpath = path.with_suffix(".json")
    old = json.loads(jpath.read_text()) if jpath.is_file() else {"runs": []}
    runs = old["runs"] if "runs" in old else [old]
    runs.append({"date": str(datetime.date.today()), "app": args.app.as_posix(), "gpu": gpu, "rows": rows})
    jpath.write_text(json.dumps({"runs": runs}, indent=1) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("app", type=Path)
    ap.add_argument("--steps", type=int, default=10, help="the application's --steps")
    ap.add_argument("--record", type=Path)
    args = ap.parse_args()
    app = args.app.resolve()
    sh(["make", "-s", "-C", str(app), "-j8"], timeout=900)
    run = example(app, args.steps)
    sh([*MEPGEN, "extract", str(app)], timeout=900)
    have_ncu = shutil.which("ncu") is not None
    rows = []
    for kernel, launch, why in KERNELS[app.name]:
        try:
            row = check_kernel(app, run, kernel, launch, have_ncu)
        except (RuntimeError, subprocess.TimeoutExpired, json.JSONDecodeError, KeyError) as e:
            lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()] or [repr(e)]
            said = [ln for ln in lines if ln.startswith("mepgen:")]
            row = {"kernel": kernel, "launch": launch, "error": (said or lines)[-1][:300]}
        row["why"] = why
        rows.append(row)
        print(json.dumps(row), flush=True)
    gpu = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                         capture_output=True, text=True).stdout.strip()
    if args.record:
        write_record(args.record, args, rows, gpu)
    if not all(r.get("bit_for_bit") for r in rows):
        sys.exit(1)


if __name__ == "__main__":
    main()
