#!/usr/bin/env python3
"""Where does a rewritten kernel's time go? One chain of library transformations applied to an example kernel,
verified and timed by the evaluator (native harness, so that Nsight Compute can profile the same binary), with
ncu's DRAM throughput and duration beside the harness's event times, for the original and the variant.

    python3 bench/variant_profile.py --app kernels --kernel matvec_rows \
        --chain 'warp_per_row:tpr=32,block=256,vec=1' 'unroll:factor=8' [--no-flush] [--record OUT.md]

A chain step is NAME[:KEY=VALUE,...]; values are read as YAML scalars (numbers, booleans, strings).
"""
from __future__ import annotations

import argparse
import datetime
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from library_optimize import gpu_facts, prepare_app  # noqa: E402
from mepgen.evaluate import Evaluator, Options  # noqa: E402
from mepgen.optimize import candidates  # noqa: E402
from mepgen.optimize.library.base import StepRefused, apply_chain  # noqa: E402
from mepgen.optimize.library.catalog import all_transformations  # noqa: E402
from mepgen.optimize.proposer import Proposal  # noqa: E402
from mepgen.spec import load_spec  # noqa: E402


def parse_step(text: str) -> tuple[str, dict]:
    name, _, rest = text.partition(":")
    params = {}
    for item in filter(None, rest.split(",")):
        key, eq, value = item.partition("=")
        if not eq:
            raise SystemExit(f"variant_profile: chain step '{text}': '{item}' is not KEY=VALUE")
        params[key.strip()] = yaml.safe_load(value)
    return name.strip(), params


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--app", default="kernels")
    ap.add_argument("--kernel", required=True)
    ap.add_argument("--chain", nargs="*", default=[])
    ap.add_argument("--no-flush", action="store_true", help="time without the L2 flush before each launch")
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/mepgen-variant-profile"))
    ap.add_argument("--record", type=Path)
    args = ap.parse_args()
    steps = [parse_step(s) for s in args.chain]
    meps = {m.name: m for m in prepare_app(args.app, args.workdir)}
    mep = meps[args.kernel]
    spec = load_spec(mep / "mep.yaml")
    ev = Evaluator(spec, mep, Options(backend="native", rounds=3, reps=20, profile=True,
                                      flush_l2=False if args.no_flush else None, use_cache=False))
    catalog = {t.name: t for t in all_transformations()}
    try:
        text, launch, flags = apply_chain(catalog, ev.original_text, spec,
                                          [{"name": n, "params": p} for n, p in steps])
    except StepRefused as e:
        raise SystemExit(f"variant_profile: {e.step} does not apply to {args.kernel}: {e}") from None
    print(f"variant of {args.kernel}: {' + '.join(args.chain)}; launch {launch}", flush=True)
    ev.prepare()
    base = ev.baseline_result()
    prop = Proposal(text=text, change=" + ".join(args.chain), source="library", transformations=[],
                    launch=launch, nvcc_flags=flags)
    (res,) = candidates.evaluate(ev, mep, spec, [prop], mep / "variant-profile")
    lines = [f"## {args.app}::{args.kernel}: {' + '.join(args.chain)}", "",
             f"- GPU, driver: {gpu_facts()}; date {datetime.datetime.now().isoformat(timespec='seconds')}",
             f"- L2 flush before each timed launch: {'no' if args.no_flush else 'yes'}", "",
             "| | status | events median ms | % peak BW (events) | ncu duration us | ncu DRAM % of peak |",
             "|---|---|---|---|---|---|"]
    for label, r in (("original", base), ("variant", res)):
        t = getattr(r, "timed", None)
        prof = getattr(r, "profile", None) or {}
        lines.append(f"| {label} | {r.status} | {t.median_ms if t else '-'} | "
                     f"{f'{t.pct_peak_bw:.1f}' if t and t.pct_peak_bw is not None else '-'} | "
                     f"{prof.get('duration_ns', 0) / 1e3 if 'duration_ns' in prof else prof.get('error', '-')} | "
                     f"{prof.get('dram_pct', '-')} |")
    out = "\n".join(lines) + "\n"
    print(out)
    if args.record:
        with open(args.record, "a") as fh:
            fh.write(out + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
