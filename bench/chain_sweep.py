#!/usr/bin/env python3
"""Time named chains of library transformations side by side on one example kernel: each chain applied to the
MEP's kernel, verified and timed by the evaluator against the original (the same L2 flush, events and rounds
as `mepgen optimize`), one row per chain. For choosing what to build, or checking a change to a transformation
on the shapes it must serve, before a whole library run.

    python3 bench/chain_sweep.py --app dense --kernel diffuse7 \
        --chain 'stencil_rows:rows=4' --chain 'stencil_rows:rows=8,vec=4 + launch_config:block=64x4x1'

A chain is steps joined by ` + `; a step is NAME[:KEY=VALUE,...] (values read as YAML scalars).
"""
from __future__ import annotations

import argparse
import datetime
import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from library_optimize import gpu_facts, prepare_app  # noqa: E402
from variant_profile import parse_step  # noqa: E402
from mepgen.evaluate import Evaluator, Options  # noqa: E402
from mepgen.evaluate.backend import CompileFailed  # noqa: E402
from mepgen.evaluate.launchcfg import launch_from  # noqa: E402
from mepgen.evaluate.native import NativeBackend  # noqa: E402
from mepgen.optimize import candidates  # noqa: E402
from mepgen.optimize.library.base import StepRefused, apply_chain  # noqa: E402
from mepgen.optimize.library.catalog import all_transformations  # noqa: E402
from mepgen.optimize.proposer import Proposal  # noqa: E402
from mepgen.spec import load_spec  # noqa: E402


def proposals(chains: list[str], original: str, spec) -> list[Proposal]:
    catalog = {t.name: t for t in all_transformations()}
    out = []
    for chain in chains:
        steps = [parse_step(s.strip()) for s in chain.split(" + ")]
        try:
            text, launch, flags = apply_chain(catalog, original, spec, [{"name": n, "params": p} for n, p in steps])
        except StepRefused as e:
            raise SystemExit(f"chain_sweep: {e.step} does not apply in '{chain}': {e}") from None
        out.append(Proposal(text=text, change=chain, source="library", transformations=[], launch=launch,
                            nvcc_flags=flags))
    return out


def memcheck(ev, spec, prop: Proposal, work: Path) -> str:
    """compute-sanitizer's memcheck over one plain launch of the proposal (native harness, its own launch and
    flags, the first input set): 'clean', or the first error line."""
    exe = shutil.which("compute-sanitizer")
    if exe is None:
        return "no compute-sanitizer"
    work.mkdir(parents=True, exist_ok=True)
    kernel = work / "kernel.cu"
    kernel.write_text(prop.text)
    be = NativeBackend(spec, ev.mep_dir, work / "build")
    extra = {k: v for k, v in (("launch", launch_from(spec, prop.launch) if prop.launch else None),
                               ("flags", tuple(prop.nvcc_flags))) if v}
    built = be.compile(kernel, **extra)
    if isinstance(built, CompileFailed):
        return f"native build failed: {built.message}"
    done = subprocess.run([exe, "--tool", "memcheck", "--error-exitcode", "9", str(built.artifact),
                           "--data", str(ev.sets[0].data_dir), "--out", str(work / "out")],
                          capture_output=True, text=True, timeout=300)
    if done.returncode == 0:
        return "clean"
    errors = [ln for ln in done.stdout.splitlines() if "ERROR SUMMARY" in ln or "Invalid" in ln]
    return (errors[0] if errors else f"exit {done.returncode}").replace("=", "").replace("|", "/").strip()


def row(chain: str, res) -> str:
    t = getattr(res, "timed", None)
    if t is None:
        return f"| {chain} | {res.status} | - | - | - | - |"
    pct = f"{t.pct_peak_bw:.0f}%" if t.pct_peak_bw is not None else "-"
    speed = f"{t.speedup:.2f}x" if t.speedup else "-"
    return (f"| {chain} | {res.status} | {t.median_ms:.5f} [{t.min_ms:.5f}-{t.max_ms:.5f}] | {t.spread:.3f} | "
            f"{speed} | {pct} |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--app", default="dense")
    ap.add_argument("--kernel", required=True)
    ap.add_argument("--chain", action="append", required=True, help="steps joined by ' + '")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--backend", default="pycuda" if importlib.util.find_spec("pycuda") else "native")
    ap.add_argument("--memcheck", action="store_true",
                    help="also run each chain once under compute-sanitizer memcheck (native harness)")
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/mepgen-chain-sweep"))
    ap.add_argument("--record", type=Path)
    args = ap.parse_args()
    meps = {m.name: m for m in prepare_app(args.app, args.workdir)}
    if args.kernel not in meps:
        raise SystemExit(f"chain_sweep: no kernel {args.kernel} in {args.app} (it has {', '.join(sorted(meps))})")
    mep = meps[args.kernel]
    spec = load_spec(mep / "mep.yaml")
    ev = Evaluator(spec, mep, Options(backend=args.backend, rounds=args.rounds, reps=args.reps, use_cache=False))
    props = proposals(args.chain, ev.original_text, spec)
    ev.prepare()
    base = ev.baseline_result()
    results = candidates.evaluate(ev, mep, spec, props, mep / "chain-sweep")
    checks = [memcheck(ev, spec, p, mep / "chain-sweep-memcheck" / str(n)) for n, p in enumerate(props)] \
        if args.memcheck else None
    lines = [f"## {args.app}::{args.kernel}", "",
             f"- GPU, driver: {gpu_facts()}; date {datetime.datetime.now().isoformat(timespec='seconds')}; "
             f"backend {args.backend}; {args.rounds} rounds x {args.reps} launches per side, L2 flushed",
             f"- command: `python3 bench/chain_sweep.py --app {args.app} --kernel {args.kernel} "
             + " ".join(f"--chain '{c}'" for c in args.chain) + "`",
             "- time: the median [min-max] of the candidate's launches, ms; spread: interquartile range / median;",
             "  speedup: over the original in the same rounds"
             + ("; memcheck: compute-sanitizer over one launch of the native harness" if checks else ""), "",
             "| chain | status | ms | spread | speedup | % peak BW |" + (" memcheck |" if checks else ""),
             "|---|---|---|---|---|---|" + ("---|" if checks else ""),
             row("(original)", base) + (" |" if checks else ""),
             *[row(c, r) + (f" {checks[n]} |" if checks else "") for n, (c, r) in enumerate(zip(args.chain, results))]]
    out = "\n".join(lines) + "\n"
    print(out, flush=True)
    if args.record:
        with open(args.record, "a") as fh:
            fh.write(out + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
