#!/usr/bin/env python3
"""Evaluator throughput: verified candidates per minute for a typical kernel, native vs pycuda backend,
and the stability of the baseline's repeated medians.

    python3 bench/evaluator_throughput.py [--kernel cg.axpy] [--n 60] [--backend native|pycuda|both]
                                          [--app APP] [--record]

Candidates are N distinct honest variants of the MEP's kernel.cu (different unroll factors and a unique
comment, so every one is compiled, verified on every input set and timed interleaved with the baseline;
the result cache is off). Goals: >= 60 verified candidates per minute on one GPU with 16 cores; the
baseline's medians over repeated evaluations within 2% of each other.
"""
from __future__ import annotations

import argparse
import os
import platform
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from adversarial import gpu_name, prepare_app  # noqa: E402
from mepgen.evaluate import Evaluator, Options  # noqa: E402
from mepgen.evaluate.batch import evaluate_many  # noqa: E402
from mepgen.evaluate.decide import round_range  # noqa: E402
from mepgen.spec import load_spec  # noqa: E402

_LOOP = re.compile(r"^(\s*)(for\s*\()", re.M)


def make_candidates(kernel_cu: Path, n: int, folder: Path) -> list[tuple[str, Path]]:
    """N compilable, semantically identical variants: an unroll pragma on the first loop, a unique tag."""
    text = kernel_cu.read_text()
    out = []
    for k in range(n):
        unroll = (1, 2, 4, 8)[k % 4]
        body = _LOOP.sub(lambda m: f"{m.group(1)}#pragma unroll {unroll}\n{m.group(1)}{m.group(2)}", text, count=1)
        f = folder / f"cand{k:03d}.cu"
        f.write_text(body + f"\n// throughput candidate {k} ({time.time_ns()})\n")
        out.append((f.stem, f))
    return out


def measure(mep_dir: Path, backend: str, n: int, repeats: int) -> dict:
    spec = load_spec(mep_dir / "mep.yaml")
    ev = Evaluator(spec, mep_dir, Options(backend=backend, use_cache=False, rounds=3))
    try:
        t0 = time.monotonic()
        ev.prepare()
        prepare_s = time.monotonic() - t0
        medians = []
        for _ in range(repeats):
            b = ev.baseline_result()
            if not b.ok:
                raise SystemExit(f"baseline failed: {b.feedback()}")
            medians.append(b.timed.median_ms)
        with tempfile.TemporaryDirectory() as tmp:
            cands = make_candidates(mep_dir / "kernel.cu", n, Path(tmp))
            t0 = time.monotonic()
            results = evaluate_many(ev, cands)
            wall = time.monotonic() - t0
    finally:
        ev.close()
    verified = [r for r in results if r.ok]
    failed = [r for r in results if not r.ok]
    return {"backend": backend, "kernel": spec.kernel.id, "n": n, "verified": len(verified), "wall_s": wall,
            "per_minute": 60.0 * len(verified) / wall if wall > 0 else 0.0, "prepare_s": prepare_s,
            "baseline_medians_ms": medians, "baseline_range": round_range(medians),
            "compile_s_median": statistics.median([r.compile.seconds for r in results if r.compile] or [0.0]),
            "eval_s_median": statistics.median([r.seconds for r in results] or [0.0]),
            "decisions": {d: sum(1 for r in verified if r.timed.decision == d) for d in ("faster", "same", "slower")},
            "failures": [f"{r.name}: {r.status}: {(r.feedback().splitlines() or [''])[0][:120]}" for r in failed[:5]]}


def report(rows: list[dict]) -> str:
    lines = ["# Evaluator throughput", "",
             f"{time.strftime('%Y-%m-%d %H:%M')} on {platform.node()} ({gpu_name()}, {os.cpu_count()} cores)", "",
             "| backend | kernel | verified / tried | wall s | verified per minute | baseline medians (ms) | "
             "baseline range | eval s median | compile s median | decisions |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        meds = ", ".join(f"{m:.4g}" for m in r["baseline_medians_ms"])
        lines.append(f"| {r['backend']} | {r['kernel']} | {r['verified']}/{r['n']} | {r['wall_s']:.1f} | "
                     f"**{r['per_minute']:.0f}** | {meds} | {r['baseline_range']:.2%} | {r['eval_s_median']:.2f} | "
                     f"{r['compile_s_median']:.2f} | {r['decisions']} |")
    for r in rows:
        for f in r["failures"]:
            lines.append(f"\n{r['backend']} failure: {f}")
    goals = [f"{r['backend']}: {'meets' if r['per_minute'] >= 60 else 'misses'} >= 60/min, baseline range "
             f"{'within' if r['baseline_range'] <= 0.02 else 'beyond'} 2%" for r in rows]
    return "\n".join(lines + ["", "Goals: " + "; ".join(goals)]) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernel", default="cg.axpy")
    ap.add_argument("--n", type=int, default=60)
    ap.add_argument("--repeats", type=int, default=5, help="Baseline evaluations for the stability check.")
    ap.add_argument("--backend", choices=["native", "pycuda", "both"], default="both")
    ap.add_argument("--app", type=Path)
    ap.add_argument("--record", action="store_true", help="Write bench/results/evaluator-throughput.md.")
    args = ap.parse_args(argv)
    app = prepare_app(args.app, [args.kernel])
    mep_dir = app / ".mepgen" / "meps" / args.kernel
    rows = [measure(mep_dir, b, args.n, args.repeats)
            for b in (["native", "pycuda"] if args.backend == "both" else [args.backend])]
    text = report(rows)
    print(text)
    if args.record:
        out = ROOT / "bench" / "results" / "evaluator-throughput.md"
        out.write_text(text)
        print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
