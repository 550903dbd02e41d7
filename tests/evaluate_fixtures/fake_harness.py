"""A stand-in for the axpy MEP's harness binary, speaking the harness protocol (docs/mep-format.md).

It computes y = 0.5 * x + y in numpy and misbehaves on request (`--mode`), so the evaluator's handling of
crashes, hangs, CUDA errors, wrong, partial, NaN, racy and cached outputs and of timing can be tested with
real processes on a machine without a GPU.
"""
import argparse
import json
import os
import signal
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from mepgen import perturb  # noqa: E402
from mepgen.evaluate import output_digest as digest  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--mode", default="good")
ap.add_argument("--data", default="data/in")
ap.add_argument("--out", default="data/out")
ap.add_argument("--time", action="store_true")
ap.add_argument("--warmup", type=int, default=5)
ap.add_argument("--reps", type=int, default=50)
ap.add_argument("--no-flush", action="store_true")
ap.add_argument("--check-inputs", action="store_true")
ap.add_argument("--recheck-data", default=None)
ap.add_argument("--perturb-seed", type=int, default=None)
ap.add_argument("--skip", action="append", default=[])          # NAME:HEX: not written when lane A is HEX
ap.add_argument("--skip-after", action="append", default=[])
args = ap.parse_args()
mode = args.mode

if mode == "hang":
    time.sleep(3600)
if mode == "hang_child":   # a grandchild keeps the pipes open: the whole group must die
    os.system("sleep 3600")
if mode == "segv":
    os.kill(os.getpid(), signal.SIGSEGV)
if mode == "illegal":
    print("MEPGEN_RESULT " + json.dumps({"status": "cuda_error", "call": "cudaDeviceSynchronize()",
                                         "error": "cudaErrorIllegalAddress",
                                         "message": "an illegal memory access was encountered"}))
    sys.exit(3)
if mode == "badinput":
    print("mep: x.npy: expected 1048576 float32 elements", file=sys.stderr)
    sys.exit(2)
if mode == "silent":
    sys.exit(0)

def axpy(folder: str):
    x = np.load(os.path.join(folder, "x.npy"))
    return x, (np.float32(0.5) * x + np.load(os.path.join(folder, "y.npy"))).astype(np.float32)


x, ref = axpy(args.data)


def result(run: int) -> np.ndarray:
    global x
    out = ref.copy()
    if run > 0 and args.recheck_data:        # the re-check reads other inputs (a kernel's cache ignores them)
        x, fresh = axpy(args.recheck_data)
        out = out if mode == "cached" else fresh
    if mode == "skip":                       # does half the work: the rest keeps the poison
        out[out.size // 2:] = np.frombuffer(b"\xff" * 4, np.float32)[0]
    elif mode == "nan":
        out[3] = np.nan
    elif mode == "loose":                    # precision loosened beyond the tolerance
        out = (out * (1 + 1e-3)).astype(np.float32)
    elif mode == "const":
        out[:] = 0.25
    elif mode == "racy" and run > 0:         # right once, different the next time
        out[::97] += 0.01
    return out


def write(folder: str, arr: np.ndarray, hints: list[str], key: str = "") -> None:
    """Outputs as the harness writes them: each output's digests to the record, not written when --skip says its
    lane A; the `in` buffers checked here (inputs_changed) and, for a harness of old, written back."""
    os.makedirs(folder, exist_ok=True)
    lanes = list(digest.of_bytes(arr))
    if mode == "skip_blind" and hints:       # claims the hint's lane A without computing anything
        lanes = [hints[0].split(":")[1], "0" * 16]
    record[key + "digests"] = {"y": lanes}
    if f"y:{lanes[0]}" not in hints:
        np.save(os.path.join(folder, "y.npy"), arr)
    if args.check_inputs:
        xin = x.copy()
        if mode == "changes_inputs":
            xin[0] += 1
        record[key + "inputs_changed"] = [] if np.array_equal(xin, x) else ["x"]
        os.makedirs(os.path.join(folder, "in"), exist_ok=True)
        np.save(os.path.join(folder, "in", "x.npy"), xin)


record = {}
write(args.out, result(0), args.skip)
base = {"faster": 0.70, "slightly_faster": 0.995, "impossible": 1e-6, "slower": 1.5, "escape": 0.05,
        "reuse": 0.05, "slow_probe": 40.0}.get(mode, 1.0)
record.update({"status": "ok", "kernel": "cg::axpy<float>", "device": "FAKE GPU", "cc": "9.0",
               "l2_bytes": 1 << 20, "run_ms": base})
if args.time and args.perturb_seed is not None:
    # the perturbation re-check: x (buffer 0) and y (buffer 1) changed at the re-check step; a kernel that reuses
    # results keyed on inputs the change missed ("reuse") writes what it computed for the unchanged inputs
    x0, y0 = np.load(os.path.join(args.data, "x.npy")), np.load(os.path.join(args.data, "y.npy"))
    xp = perturb.apply(x0, args.perturb_seed, perturb.RECHECK_STEP, 0)
    yp = perturb.apply(y0, args.perturb_seed, perturb.RECHECK_STEP, 1)
    os.makedirs(os.path.join(args.out, "perturbed"), exist_ok=True)
    out = ref if mode == "reuse" else (np.float32(0.5) * xp + yp).astype(np.float32)
    if mode == "nan_when_perturbed":         # an original that breaks on changed inputs (both sides say so)
        out = out.copy()
        out[0] = np.nan
    np.save(os.path.join(args.out, "perturbed", "y.npy"), out)
    record["perturbed"] = 2
if args.time:
    rng = np.random.default_rng()
    times = (base * (1 + 0.002 * rng.standard_normal(args.reps))).tolist()
    write(os.path.join(args.out, "after"), result(1), args.skip_after, "after_")
    record.update(times_ms=times, median_ms=float(np.median(times)), reps=args.reps, warmup=args.warmup,
                  flush_l2=not args.no_flush, sync_ms=1.0 if mode == "escape" else 0.9 * base)
print("MEPGEN_RESULT " + json.dumps(record))
