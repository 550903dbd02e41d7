#!/usr/bin/env python3
"""Which form of warp_per_row reads a row fastest? A controlled comparison on the GPU, every variant verified
and timed by the evaluator (the same one `mepgen optimize` uses): scalar lanes against 128-bit loads (vec=4),
the vector loop unrolled, the unroll transformation on top, blocks of 64 and 256 threads, and 64-256 lanes
(several warps) per row.

    python3 bench/warp_row_variants.py --app kernels --kernels matvec_rows row_sumsq --record OUT.md
"""
from __future__ import annotations

import argparse
import datetime
import importlib.util
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from library_optimize import gpu_facts, prepare_app  # noqa: E402
from mepgen.evaluate import Evaluator, Options  # noqa: E402
from mepgen.optimize import candidates  # noqa: E402
from mepgen.optimize.library.base import current_launch  # noqa: E402
from mepgen.optimize.library.source import KernelSource  # noqa: E402
from mepgen.optimize.library.unroll import Unroll  # noqa: E402
from mepgen.optimize.library.warp_row import WarpPerRow  # noqa: E402
from mepgen.optimize.proposer import Proposal  # noqa: E402
from mepgen.spec import load_spec  # noqa: E402


def variants(src, spec, launch):
    """(label, text, launch) of every variant compared."""
    out = []
    for tpr, block in ((64, 256), (128, 256), (128, 512), (256, 512)):
        many = WarpPerRow().apply(src, spec, launch, {"tpr": tpr, "block": block, "vec": 1})
        out.append((f"scalar, {tpr} lanes per row, block {block}", many.text, many.launch))
        unrolled = Unroll().apply(KernelSource(many.text, spec), spec, many.launch, {"factor": 4})
        out.append((f"scalar + unroll 4, {tpr} lanes per row, block {block}", unrolled.text, many.launch))
    for block in (64, 256):
        scalar = WarpPerRow().apply(src, spec, launch, {"tpr": 32, "block": block, "vec": 1})
        out.append((f"scalar, block {block}", scalar.text, scalar.launch))
        unrolled = Unroll().apply(KernelSource(scalar.text, spec), spec, scalar.launch, {"factor": 8})
        out.append((f"scalar + unroll 8, block {block}", unrolled.text, scalar.launch))
        vec = WarpPerRow().apply(src, spec, launch, {"tpr": 32, "block": block, "vec": 4})
        for u in (1, 4):
            text = vec.text.replace("#pragma unroll 4\n", f"#pragma unroll {u}\n", 1)
            out.append((f"vec4, vector loop unroll {u}, block {block}", text, vec.launch))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--app", default="kernels")
    ap.add_argument("--kernels", nargs="+", default=["matvec_rows", "row_sumsq"])
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/mepgen-warp-row-bench"))
    ap.add_argument("--record", type=Path)
    args = ap.parse_args()
    backend = "pycuda" if importlib.util.find_spec("pycuda") else "native"
    lines = [f"# warp_per_row variants ({args.app})", "", f"- GPU, driver: {gpu_facts()}",
             f"- date: {datetime.datetime.now().isoformat(timespec='seconds')}",
             f"- command: `python3 bench/warp_row_variants.py --app {args.app} --kernels {' '.join(args.kernels)}`",
             f"- backend: {backend}; every variant verified by the evaluator; median of its timed launches", "",
             "| kernel | variant | median ms | speedup over the original | % peak BW |", "|---|---|---|---|---|"]
    meps = {m.name: m for m in prepare_app(args.app, args.workdir)}
    for name in args.kernels:
        mep = meps[name]
        spec = load_spec(mep / "mep.yaml")
        ev = Evaluator(spec, mep, Options(backend=backend, rounds=3, reps=20))
        try:
            ev.prepare()
            src = KernelSource(ev.original_text, spec)
            vs = variants(src, spec, current_launch(spec, None))
            props = [Proposal(text=t, change=label, source="library", transformations=[], launch=launch)
                     for label, t, launch in vs]
            results = candidates.evaluate(ev, mep, spec, props, mep / "variant-candidates")
            for (label, _, _), r in zip(vs, results):
                t = getattr(r, "timed", None)
                if t is None:
                    lines.append(f"| {name} | {label} | failed: {r.status} | - | - |")
                    continue
                bw = f"{t.pct_peak_bw:.0f}%" if t.pct_peak_bw is not None else "-"
                lines.append(f"| {name} | {label} | {t.median_ms:.5f} | {t.speedup:.2f}x | {bw} |")
        finally:
            ev.close()
    text = "\n".join(lines) + "\n"
    print(text)
    if args.record:
        args.record.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
