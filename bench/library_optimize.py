#!/usr/bin/env python3
"""GPU benchmark of mepgen's transformation library alone: for each kernel of the example applications,
the original time, the best verified time, the speedup, the transformations that won and the % of the
measured peak bandwidth / FLOP/s; every winner judged by the evaluator (verified on every input set,
timed against the original, decision "faster").

    python3 bench/library_optimize.py --record bench/results/library_optimize.md

Bounded: at most --budget candidates and --seconds per kernel. Resumable: the applications are copied
into --workdir once; results are cached by content in each MEP's store, so a second run re-times nothing
it has already judged.
"""
from __future__ import annotations

import argparse
import datetime
import importlib.util
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from mepgen.evaluate import Evaluator, Options  # noqa: E402
from mepgen.optimize import candidates  # noqa: E402
from mepgen.optimize.library.loop import best_attempt, run_library  # noqa: E402
from mepgen.optimize.proposer import Context  # noqa: E402
from mepgen.spec import load_spec  # noqa: E402

APPS = {"heatcg": ["--size", "N=4194304", "--size", "NROWS=4194304", "--size", "NNZ=20930584"], "kernels": [],
        "dense": []}


def prepare_app(name: str, workdir: Path) -> list[Path]:
    folder = workdir / name
    if not (folder / ".mepgen" / "meps").is_dir():
        shutil.rmtree(folder, ignore_errors=True)
        shutil.copytree(REPO / "examples" / name, folder)
        subprocess.run([sys.executable, "-m", "mepgen.cli", "extract", "."], cwd=folder, check=True, capture_output=True)
        subprocess.run([sys.executable, "-m", "mepgen.cli", "mep", "--all", *APPS[name]], cwd=folder, check=True, capture_output=True)
    return sorted(d for d in (folder / ".mepgen" / "meps").iterdir() if (d / "mep.yaml").is_file())


def gpu_facts() -> str:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20).stdout.strip().splitlines()
        return out[0] if out else "unknown GPU"
    except OSError:
        return "no nvidia-smi"


def matmul_flops(spec, mep: Path) -> str | None:
    """2*M*N*K (half of it on a triangle) for a kernel the library recognises as a matrix product, as an
    expression over the size symbols, so that the table shows % of peak FLOP/s where mep.yaml has no work.flops."""
    from mepgen.optimize.library.matmul_match import bound_sizes, match_matmul, size_value
    from mepgen.optimize.library.source import KernelSource
    try:
        m = match_matmul(KernelSource((mep / "kernel.cu").read_text(), spec), spec)
        sizes = bound_sizes(spec, m)
    except Exception:     # Refused, or a kernel libclang cannot read: no FLOP count, only bandwidth
        return None
    k = size_value(spec, m.loop.hi) if m.loop.lo.strip() == "0" else None
    if k is None:
        return None
    if m.triangle:
        return f"({sizes['row']}) * (({sizes['row']}) + 1) * ({k})"
    return f"2 * ({sizes['row']}) * ({sizes['col']}) * ({k})"


PEAKS_SEEN: dict = {}      # device -> the evaluator's measured peaks, for the table's header


def bench_kernel(mep: Path, args, log) -> dict:
    spec = load_spec(mep / "mep.yaml")
    if not spec.work.flops:
        spec.work.flops = matmul_flops(spec, mep)
    ev = Evaluator(spec, mep, Options(backend=args.backend, rounds=args.rounds, reps=args.reps))
    try:
        ev.prepare()
        base = ev.baseline_result()
        ctx = Context(spec=spec, mep_dir=mep, original=ev.original_text, gpu={})
        deadline = time.monotonic() + args.seconds
        work = mep / "library-candidates"
        run_library(ctx, lambda props: candidates.evaluate(ev, mep, spec, props, work), budget=args.budget,
                    per_round=args.per_round, log=lambda m: log(f"  {m}"), stop=lambda: time.monotonic() > deadline)
        best = best_attempt(ctx.history)
        row = {"kernel": spec.kernel.name, "candidates": len(ctx.history),
               "original_ms": base.timed.median_ms if base.timed else None,
               "original_pct_bw": base.timed.pct_peak_bw if base.timed else None,
               "original_pct_flops": base.timed.pct_peak_flops if base.timed else None,
               "mib": spec.size(spec.work.bytes) / 2**20 if spec.work.bytes and spec.size(spec.work.bytes) else None,
               "pct_stream": base.timed.pct_stream if base.timed else None}
        peaks = ev.workers[0].peaks
        if peaks is not None:
            PEAKS_SEEN[peaks.device] = peaks
        if best is None:
            row.update(best_ms=row["original_ms"], speedup=1.0, won="(none faster)", pct_bw=row["original_pct_bw"],
                       pct_flops=base.timed.pct_peak_flops if base.timed else None)
        else:
            t = best.result.timed
            row.update(best_ms=t.median_ms, speedup=t.speedup, pct_bw=t.pct_peak_bw, pct_flops=t.pct_peak_flops,
                       pct_stream=t.pct_stream,
                       won=" + ".join(f"{x['name']}({', '.join(f'{k}={v}' for k, v in x['params'].items())})"
                                      for x in best.proposal.transformations))
        return row
    finally:
        ev.close()


def fmt(v, spec="{:.4g}") -> str:
    return "-" if v is None else spec.format(v)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--apps", nargs="+", default=["heatcg"], choices=sorted(APPS))
    ap.add_argument("--kernels", nargs="*", default=None, help="only these MEP ids (e.g. analysis.dense_matvec)")
    ap.add_argument("--budget", type=int, default=32, help="candidates per kernel at most")
    ap.add_argument("--per-round", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=30.0, help="wall-clock limit per kernel (between rounds)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--backend", default="pycuda" if importlib.util.find_spec("pycuda") else "native")
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/mepgen-library-bench"))
    ap.add_argument("--record", type=Path, default=None)
    args = ap.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    rows, started = [], time.monotonic()
    for app in args.apps:
        for mep in prepare_app(app, args.workdir):
            if args.kernels and mep.name not in args.kernels:
                continue
            print(f"== {mep.name}", flush=True)
            try:
                rows.append(bench_kernel(mep, args, lambda m: print(m, flush=True)))
            except Exception as e:        # one broken MEP must not lose the others' rows
                rows.append({"kernel": mep.name, "error": f"{type(e).__name__}: {e}"})
            print(rows[-1], flush=True)
            record(args, rows, started, final=False)
    print(record(args, rows, started, final=True))
    return 0


def record(args, rows, started, final: bool) -> str:
    """The table so far; written after every kernel, so a run cut off by a time limit keeps its rows."""
    speedups = [r["speedup"] for r in rows if r.get("speedup")]
    geo = 1.0
    for s in speedups:
        geo *= s
    geo = geo ** (1 / len(speedups)) if speedups else None
    lines = [f"# mepgen transformation library: {', '.join(args.apps)}", "",
             f"- GPU, driver: {gpu_facts()}", f"- date: {datetime.datetime.now().isoformat(timespec='seconds')}",
             f"- command: `python3 bench/library_optimize.py {' '.join(sys.argv[1:])}`",
             f"- backend: {args.backend}; budget {args.budget} candidates / {args.seconds:g} s per kernel; "
             f"wall {time.monotonic() - started:.0f} s" + ("" if final else " (cut off: partial table)"),
             f"- geometric-mean speedup: {fmt(geo, '{:.2f}')}x"]
    for p in PEAKS_SEEN.values():
        lines.append(f"- measured peaks ({p.device}): {p.bandwidth_gbs:.0f} GB/s; one perfect streaming launch of "
                     + ", ".join(f"{b >> 20} MiB {g:.0f} GB/s ({100 * g / p.bandwidth_gbs:.0f}%)" for b, g in p.stream_curve))
    lines += ["- `% stream`: the best's bandwidth as a share of one perfect streaming launch of the same bytes, timed "
              "the same way (launch and ramp included); a kernel under ~64 MiB cannot reach the peak in one launch", "",
              "| kernel | MiB | candidates | original ms | best ms | speedup | % peak BW (orig -> best) | % stream | "
              "% peak FLOP/s (orig -> best) | won |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['kernel']} | - | - | - | - | - | - | - | - | error: {r['error'][:120]} |")
            continue
        lines.append(f"| {r['kernel']} | {fmt(r.get('mib'), '{:.0f}')} | {r['candidates']} | {fmt(r['original_ms'])} | "
                     f"{fmt(r['best_ms'])} | {fmt(r['speedup'], '{:.2f}')}x | {fmt(r['original_pct_bw'], '{:.0f}%')} -> "
                     f"{fmt(r['pct_bw'], '{:.0f}%')} | {fmt(r.get('pct_stream'), '{:.0f}%')} | "
                     f"{fmt(r.get('original_pct_flops'), '{:.0f}%')} -> {fmt(r['pct_flops'], '{:.0f}%')} | {r['won']} |")
    text = "\n".join(lines) + "\n"
    if args.record:
        args.record.parent.mkdir(parents=True, exist_ok=True)
        args.record.write_text(text)
    return text


if __name__ == "__main__":
    sys.exit(main())
