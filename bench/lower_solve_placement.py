#!/usr/bin/env python3
"""Does dense's lower_solve run at a speed that depends on where its buffers lie in device memory?

The MEP of lower_solve runs 25% slower than the same kernel in the application on the same (captured) data,
with the same clock, SASS, instruction count and DRAM traffic, but 2.5x the L1 misses (bench/results/
ncu_lower_solve.txt). Its 32 blocks each walk a 1 KB column slab of X down 256 rows 32 KB apart, a pattern
whose L1 set conflicts depend on the addresses. This probe times the kernel (cupy, CUDA events, L2 flushed
before each launch) with X and B placed at offsets from a 2 MiB-aligned base and prints the spread.

    python3 bench/lower_solve_placement.py [--record bench/results/lower_solve_placement.md]
"""
from __future__ import annotations

import argparse
import datetime
import statistics
import subprocess
from pathlib import Path

import cupy as cp

SRC = Path(__file__).resolve().parents[1] / "examples" / "dense" / "src" / "solve.cu"
N, NRHS, BLOCK = 256, 8192, 256


def kernel():
    text = SRC.read_text()
    body = text[text.index("__global__ void lower_solve"):text.index("void unit_lower_solve")]
    return cp.RawKernel('extern "C" ' + body, "lower_solve")


def placed(nbytes: int, offset: int, keep: list) -> cp.ndarray:
    raw = cp.cuda.alloc(nbytes + offset + (4 << 20))
    keep.append(raw)
    base = (raw.ptr + (2 << 20) - 1) // (2 << 20) * (2 << 20) - raw.ptr
    return cp.ndarray((nbytes // 4,), cp.float32, cp.cuda.MemoryPointer(raw.mem, raw.ptr - raw.mem.ptr + base + offset))


def time_one(k, L, B, X, flush, reps: int) -> float:
    ms = []
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    for _ in range(reps + 3):
        flush.fill(0)
        start.record()
        k(((NRHS + BLOCK - 1) // BLOCK,), (BLOCK,), (L, B, X, cp.int32(N), cp.int32(NRHS)))
        stop.record()
        stop.synchronize()
        ms.append(cp.cuda.get_elapsed_time(start, stop))
    return statistics.median(ms[3:])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--record", type=Path)
    args = ap.parse_args()
    k, keep = kernel(), []
    rng = cp.random.default_rng(1)
    flush = cp.zeros(64 << 20, cp.uint8)
    L = placed(N * N * 4, 0, keep)
    L[:] = rng.uniform(-1, 1, N * N, dtype=cp.float32) / N
    rows = []
    for xoff in (0, 256, 4096, 16384, 65536, 1 << 20, (1 << 20) + 4096):
        for boff in (0, 4096):
            B = placed(N * NRHS * 4, boff, keep)
            X = placed(N * NRHS * 4, xoff, keep)
            B[:] = rng.uniform(-1, 1, N * NRHS, dtype=cp.float32)
            rows.append((xoff, boff, time_one(k, L, B, X, flush, args.reps) * 1e3))
    times = [r[2] for r in rows]
    gpu = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                         capture_output=True, text=True).stdout.strip()
    lines = ["# lower_solve: time against buffer placement", "", f"- GPU, driver: {gpu}",
             f"- date: {datetime.datetime.now().isoformat(timespec='seconds')}",
             "- command: `python3 bench/lower_solve_placement.py`",
             f"- {N} x {NRHS}, block {BLOCK}, median of {args.reps} launches, L2 flushed before each", "",
             "| X offset from 2 MiB | B offset | median µs |", "|---|---|---|"]
    lines += [f"| {x} | {b} | {t:.1f} |" for x, b, t in rows]
    lines += ["", f"spread: {min(times):.1f} .. {max(times):.1f} µs (max/min {max(times) / min(times):.3f})"]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.record:
        args.record.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
