#!/usr/bin/env python3
"""What confinement costs per candidate: the same candidates evaluated with `evaluate.sandbox: off` and `auto`.

    python3 bench/sandbox_cost.py OUT_DIR [--app APP] [--kernel cg.axpy] [--candidates 8] [--repeats 3]
                                  [--backend native --backend auto]

Without --app, examples/heatcg is copied to a temporary folder and its MEP made (`mepgen extract`, `mepgen mep`).
The candidates are the library's own proposals for the kernel (the original first). Each repeat evaluates all
of them once per mode, the modes alternating (off, auto, auto, off, ...) so drift hits both; before each
evaluation the builds and results are deleted, so every candidate is compiled (nvcc in the sandbox), run on
every input set and timed, at the default settings (mep.yaml's input sets, reps and warm-up; 3 rounds).
Each --backend is measured in turn (default: native and auto, the default backend, which takes pycuda where it
is installed: its worker is confined too, confined.for_worker).
Writes OUT_DIR/sandbox_cost.json and OUT_DIR/sandbox_cost.md (after each backend): per backend and mode the wall
time per candidate (the whole batch: lint, compiles on all cores, GPU stages) and the GPU stage per candidate
(EvalResult.seconds), median and spread over repeats, and the overhead of `auto` over `off`. Exit 0; 1 when a
candidate's verdict differs between the modes (confinement must not change a verdict).
"""
from __future__ import annotations

import argparse
import json
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from mepgen.evaluate import Evaluator, Options, sandbox  # noqa: E402
from mepgen.evaluate.batch import evaluate_many  # noqa: E402
from mepgen.spec import load_spec  # noqa: E402


def candidates(mep: Path, spec, count: int, folder: Path) -> list[tuple[str, Path]]:
    from mepgen.optimize.library.proposer import LibraryProposer
    from mepgen.optimize.proposer import Context
    original = (mep / "kernel.cu").read_text()
    ctx = Context(spec=spec, mep_dir=mep, original=original, gpu={})
    folder.mkdir(parents=True, exist_ok=True)
    out = [("original", mep / "kernel.cu")]
    for i, p in enumerate(LibraryProposer().propose(ctx, None, count * 3)):
        if len(out) >= count:
            break
        if p.launch or p.nvcc_flags:        # plain text variants only: the same build path for every candidate
            continue
        f = folder / f"library{i}.cu"
        f.write_text(p.text)
        out.append((f"library{i}:{p.change[:40]}", f))
    return out


def evaluate(mep: Path, spec, mode: str, cands, backend: str) -> dict:
    for sub in ("build", "results", "work"):
        shutil.rmtree(mep / "eval" / sub, ignore_errors=True)
    ev = Evaluator(spec, mep, Options(backend=backend, rounds=3, use_cache=False, sandbox=mode))
    try:
        ev.prepare()
        start = time.monotonic()
        results = evaluate_many(ev, cands)
        wall = time.monotonic() - start
    finally:
        ev.close()
    return {"mode": mode, "level": ev.sandbox, "backend": ev.backend_name, "wall_s": wall,
            "per_candidate_s": wall / len(cands),
            "gpu_stage_s": [r.seconds for r in results], "verdicts": [r.status for r in results],
            "device": next((r.device for r in results if r.device), "")}


def summary(runs: list[dict], key) -> dict:
    values = [key(r) for r in runs]
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}


def measure(mep: Path, spec, cands, backend: str, repeats: int, done=None) -> dict:
    """Both modes `repeats` times; `done(partial)` after each repeat with what it measured so far."""
    runs = []
    for r in range(repeats):
        for mode in (("off", "auto") if r % 2 == 0 else ("auto", "off")):
            run = evaluate(mep, spec, mode, cands, backend)
            print(f"{backend}: repeat {r} {mode:4s} ({run['level']}, backend {run['backend']}): "
                  f"{run['per_candidate_s']:.3f} s per candidate", flush=True)
            runs.append(run)
        if done is not None:
            done(summarize_runs(backend, runs))
    return summarize_runs(backend, runs)


def summarize_runs(backend: str, runs: list[dict]) -> dict:
    by = {m: [r for r in runs if r["mode"] == m] for m in ("off", "auto")}
    per = {m: summary(by[m], lambda r: r["per_candidate_s"]) for m in by}
    gpu = {m: summary(by[m], lambda r: statistics.median(r["gpu_stage_s"])) for m in by}
    return {"backend": backend, "runs_on": runs[0]["backend"], "level": by["auto"][0]["level"],
            "device": runs[0]["device"], "per_candidate_s": per, "gpu_stage_s": gpu,
            "overhead_pct": (per["auto"]["median"] - per["off"]["median"]) / per["off"]["median"] * 100,
            "gpu_stage_overhead_pct": (gpu["auto"]["median"] - gpu["off"]["median"]) / gpu["off"]["median"] * 100,
            "verdicts_agree": len({tuple(r["verdicts"]) for r in runs}) == 1, "runs": runs}


def write(args, cands, measured: list[dict]) -> None:
    record = {"kernel": args.kernel, "candidates": [n for n, _ in cands], "host": platform.node(),
              "repeats": args.repeats, "why_not_stronger": sandbox.strongest()[1], "backends": measured}
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / "sandbox_cost.json").write_text(json.dumps(record, indent=1))
    done = min(b["per_candidate_s"][m]["n"] for b in measured for m in ("off", "auto"))
    rows = [f"# Cost of confinement ({args.kernel}, {len(cands)} candidates, {done} of {args.repeats} repeats)", "",
            f"device: {measured[0]['device']}; sandbox level of `auto`: {measured[0]['level']}", "",
            "| backend | mode | wall per candidate (s): median [min, max] | GPU stage per candidate (s): "
            "median [min, max] |", "|---|---|---|---|"]
    for b in measured:
        name = b["backend"] + (f" ({b['runs_on']})" if b["runs_on"] != b["backend"] else "")
        for m in ("off", "auto"):
            per, gpu = b["per_candidate_s"][m], b["gpu_stage_s"][m]
            rows.append(f"| {name} | {m} | {per['median']:.3f} [{per['min']:.3f}, {per['max']:.3f}] | "
                        f"{gpu['median']:.3f} [{gpu['min']:.3f}, {gpu['max']:.3f}] |")
    rows.append("")
    for b in measured:
        rows.append(f"- {b['backend']} ({b['runs_on']}): overhead of `auto` {b['overhead_pct']:+.1f} % per "
                    f"candidate, {b['gpu_stage_overhead_pct']:+.1f} % of the GPU stage (goal: under 5 %); verdicts "
                    f"identical in both modes: {'yes' if b['verdicts_agree'] else 'NO'}")
    (args.out_dir / "sandbox_cost.md").write_text("\n".join(rows) + "\n")
    print("\n".join(rows), flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out_dir", type=Path)
    ap.add_argument("--app", type=Path, help="an application with the MEP made (default: examples/heatcg)")
    ap.add_argument("--kernel", default="cg.axpy")
    ap.add_argument("--candidates", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--backend", action="append", choices=["native", "pycuda", "auto"],
                    help="a backend to measure, repeatable (default: native and auto, the default backend: "
                         "pycuda where installed)")
    args = ap.parse_args()
    backends = args.backend or ["native", "auto"]
    if args.app is None:
        import adversarial
        app = adversarial.prepare_app(None, [args.kernel])
    else:
        app = args.app.resolve()
    mep = app / ".mepgen" / "meps" / args.kernel
    spec = load_spec(mep / "mep.yaml")
    cands = candidates(mep, spec, args.candidates, Path(tempfile.mkdtemp(prefix="mepgen-sandbox-cost-")))
    measured = []
    for b in backends:        # the record is rewritten after each repeat: a run cut short keeps what it measured
        measured.append(measure(mep, spec, cands, b, args.repeats,
                                done=lambda partial: write(args, cands, measured + [partial])))
        write(args, cands, measured)
    return 0 if all(b["verdicts_agree"] for b in measured) else 1


if __name__ == "__main__":
    sys.exit(main())
