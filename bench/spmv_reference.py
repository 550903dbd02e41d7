#!/usr/bin/env python3
"""How far can cg::spmv_csr go on a given matrix? The application's thread-per-row kernel against cuSPARSE's SpMV
(through cupyx) on the same CSR arrays, on two matrices of heatcg's size: the MEP's synthetic one (banded random
columns, `init: {kind: index, band: ...}`, read from the MEP's own `data/in/`) and the application's 5-point
Laplacian (built as `cg::build_matrix` builds it). Frames the library's "none faster" on spmv: if the vendor
library does no better on a matrix, the original kernel is at that matrix's practical limit.

    python3 bench/spmv_reference.py --record bench/results/spmv_reference.md

Each time: median [min-max] of --reps launches, each after a 256 MiB write that evicts the 50 MiB L2 (as the MEP
harness flushes), one launch between two events. Bytes: row_ptr + col_idx + vals + x + y once (the MEP's
`work.bytes`). Needs cupy (the GPU machine has it); outputs checked against a float64 product on the host.
"""
from __future__ import annotations

import argparse
import datetime
import re
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

from library_optimize import gpu_facts, prepare_app  # noqa: E402


def kernel_source() -> str:
    """cg::spmv_csr exactly as the application has it (cut out of examples/heatcg/src/cg.cu)."""
    text = (REPO / "examples" / "heatcg" / "src" / "cg.cu").read_text()
    m = re.search(r"__global__ void spmv_csr\(.*?\n}\n", text, re.S)
    if m is None:
        raise SystemExit("spmv_reference: spmv_csr not found in examples/heatcg/src/cg.cu")
    return 'extern "C" ' + m.group(0)


def laplacian(nx: int, ny: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The application's matrix (cg.cu build_matrix): Dirichlet rows on the border, 5 points inside, couplings to
    border points dropped, columns in increasing order. Coefficients are the app's shape, values arbitrary."""
    j, i = np.divmod(np.arange(nx * ny, dtype=np.int64), nx)
    interior = (i > 0) & (i < nx - 1) & (j > 0) & (j < ny - 1)

    def inner(ii, jj):
        return (ii > 0) & (ii < nx - 1) & (jj > 0) & (jj < ny - 1)

    row = j * nx + i
    # candidates in increasing column order: -nx, -1, 0, +1, +nx
    cols = np.stack([row - nx, row - 1, row, row + 1, row + nx], axis=1)
    vals = np.stack([np.full(row.shape, -0.3), np.full(row.shape, -0.2), np.full(row.shape, 2.0),
                     np.full(row.shape, -0.2), np.full(row.shape, -0.3)], axis=1).astype(np.float32)
    keep = np.stack([interior & inner(i, j - 1), interior & inner(i - 1, j), np.ones_like(interior),
                     interior & inner(i + 1, j), interior & inner(i, j + 1)], axis=1)
    vals[~interior, 2] = 1.0
    row_ptr = np.concatenate([[0], np.cumsum(keep.sum(axis=1))]).astype(np.int32)
    return row_ptr, cols[keep].astype(np.int32), vals[keep]


def timed(cp, fn, reps: int, flush) -> list[float]:
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    out = []
    for _ in range(reps + 2):
        flush.fill(1)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        out.append(cp.cuda.get_elapsed_time(start, stop))
    return sorted(out[2:])


def streamed(cp, fn, reps: int) -> list[float]:
    """Per-call time of `reps` calls back to back between two events (host overheads between calls hidden, L2 not
    flushed between them: only x, 16 MiB, can stay resident; the 160 MiB of col_idx and vals cannot)."""
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    out = []
    for _ in range(7):
        fn()
        start.record()
        for _ in range(reps):
            fn()
        stop.record()
        stop.synchronize()
        out.append(cp.cuda.get_elapsed_time(start, stop) / reps)
    return sorted(out[2:])


def cell(ts: list[float], nbytes: int, peak: float | None) -> str:
    med = ts[len(ts) // 2]
    gbs = nbytes / (med * 1e-3) / 1e9
    pct = f", {100 * gbs / peak:.0f}% of {peak:.0f}" if peak else ""
    return f"{med * 1e3:.1f} [{ts[0] * 1e3:.1f}-{ts[-1] * 1e3:.1f}] us, {gbs:.0f} GB/s{pct}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--peak", type=float, default=None, help="GB/s to express bandwidth against (e.g. the "
                    "evaluator's measured peak of the same day)")
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/mepgen-spmv-reference"))
    ap.add_argument("--record", type=Path)
    args = ap.parse_args()
    import cupy as cp
    import cupyx.scipy.sparse as sp

    mep = next(m for m in prepare_app("heatcg", args.workdir) if m.name == "cg.spmv_csr")
    data = mep / "data" / "in"
    synthetic = tuple(np.load(data / f"{name}.npy") for name in ("row_ptr", "col_idx", "vals"))
    side = int(round((len(synthetic[0]) - 1) ** 0.5))
    matrices = {
        "MEP synthetic (banded random columns)": synthetic,
        f"application's 5-point Laplacian {side}x{side}": laplacian(side, side),
    }
    kern = cp.RawKernel(kernel_source(), "spmv_csr")
    flush = cp.empty(64 * 2**20, dtype=cp.float32)
    lines = [f"# cg::spmv_csr: the application's kernel against cuSPARSE on the same matrix",
             "", f"- GPU, driver: {gpu_facts()}; cupy {cp.__version__}; date {datetime.datetime.now().isoformat(timespec='seconds')}",
             f"- command: `python3 bench/spmv_reference.py {' '.join(sys.argv[1:])}`",
             f"- each cell: median [min-max] of {args.reps} launches, each after a 256 MiB write (L2 evicted); "
             "bytes = row_ptr + col_idx + vals + x + y once", "",
             f"- `back to back`: per-call time of {args.reps} calls between two events, median [min-max] of 5 such runs",
             "", "| matrix | rows | nnz | MiB | original (thread per row, 256) | cuSPARSE SpMV (cupyx) | "
             "original, back to back | cuSPARSE, back to back | max rel. error orig / cuSPARSE |",
             "|---|---|---|---|---|---|---|---|---|"]
    rng = np.random.default_rng(7)
    for label, (row_ptr, col_idx, vals) in matrices.items():
        n = len(row_ptr) - 1
        x = rng.standard_normal(n).astype(np.float32)
        nbytes = row_ptr.nbytes + col_idx.nbytes + vals.nbytes + 2 * x.nbytes
        d_rp, d_ci, d_v, d_x = (cp.asarray(a) for a in (row_ptr, col_idx, vals, x))
        y = cp.zeros(n, dtype=cp.float32)
        block = 256
        def original():
            kern(((n + block - 1) // block,), (block,), (np.int32(n), d_rp, d_ci, d_v, d_x, y))
        t_orig = timed(cp, original, args.reps, flush)
        y_orig = cp.asnumpy(y)
        A = sp.csr_matrix((d_v, d_ci, d_rp), shape=(n, n))
        box = {}

        def vendor():
            box["y"] = A @ d_x
        t_vendor = timed(cp, vendor, args.reps, flush)
        y_vendor = cp.asnumpy(box["y"])
        s_orig, s_vendor = streamed(cp, original, args.reps), streamed(cp, vendor, args.reps)
        ref = np.add.reduceat(vals.astype(np.float64) * x[col_idx].astype(np.float64), row_ptr[:-1])
        ref[np.diff(row_ptr) == 0] = 0.0
        scale = np.abs(ref).max()
        err = [float(np.abs(y_ - ref).max() / scale) for y_ in (y_orig, y_vendor)]
        lines.append(f"| {label} | {n} | {len(col_idx)} | {nbytes / 2**20:.1f} | {cell(t_orig, nbytes, args.peak)} | "
                     f"{cell(t_vendor, nbytes, args.peak)} | {cell(s_orig, nbytes, args.peak)} | "
                     f"{cell(s_vendor, nbytes, args.peak)} | {err[0]:.1e} / {err[1]:.1e} |")
        print(lines[-1], flush=True)
    text = "\n".join(lines) + "\n"
    print(text)
    if args.record:
        args.record.parent.mkdir(parents=True, exist_ok=True)
        args.record.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
