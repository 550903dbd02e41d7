"""`mepgen run KERNEL`: evaluate the MEP as it stands (and variants of its kernel.cu against it).

Exit codes (mepgen/exitcodes.py): 0 everything evaluated and accepted; 1 a variant was rejected (the summary says
why); 3 the MEP itself is broken (its kernel.cu does not compile, its reference is NaN, ...); 4 no CUDA device
(after compiling, so compile errors still show); 2 a usage error.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from ..clioptions import renamed_flag
from ..config import load_config
from .. import fidelity
from ..errors import MepgenError
from ..kernelname import mep_folder
from ..spec import load_spec
from ..workspace import Workspace, write_json
from . import baseline as baseline_mod
from .batch import evaluate_many
from .evaluator import Evaluator, Options
from .journal import Journal
from .store import digest
from .summary import render


@click.command("run")
@click.argument("kernel")
@click.option("-C", "--app", type=click.Path(path_type=Path), default=None,
              help="The application's folder (default: found from the current folder upwards).")
@click.option("--variant", "variants", multiple=True, type=click.Path(path_type=Path, exists=True, dir_okay=False),
              help="A variant of kernel.cu to evaluate against the MEP's kernel.cu (repeatable).")
@click.option("--backend", type=click.Choice(["auto", "native", "pycuda"]), default=None,
              help="native: the harness as a subprocess; pycuda: a worker keeping inputs on the GPU "
                   "(mepgen[gpu]); default from config (evaluate.backend).")
@click.option("--input-sets", type=click.IntRange(min=1), default=None, help="Input sets to verify on (default: mep.yaml).")
@click.option("--reps", type=click.IntRange(min=1), default=None,
              help="Timed launches per round and side (count-based timing; default: chosen from a first measured "
                   "launch, evaluate.timing in the config).")
@click.option("--warmup", type=click.IntRange(min=0), default=None, help="Warm-up launches (count-based timing).")
@click.option("--rounds", type=click.IntRange(min=1), default=3, show_default=True,
              help="Alternating baseline/candidate timing rounds.")
@click.option("--ncu-metrics", "profile", is_flag=True, help="Add Nsight Compute metrics (needs ncu).")
@renamed_flag("--profile", "--ncu-metrics")
@click.option("--results", type=click.Path(path_type=Path), default=None,
              help="Append-only results file (JSON lines) to resume from and add to.")
@click.option("--no-cache", is_flag=True, help="Evaluate again even when a result for the same content is cached.")
@click.option("-j", "--jobs", type=click.IntRange(min=0), default=0, show_default=True,
              help="Parallel compiles (0: one per core).")
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
@click.pass_obj
def run(obj, kernel, app, variants, backend, input_sets, reps, warmup, rounds, profile, profile_old, results,
        no_cache, jobs, as_json):
    """Build, verify and time the MEP of KERNEL; with --variant, decide whether each variant is faster.

    Writes baseline.json in the MEP folder. Exits 1 when a variant is rejected, 3 when the MEP's own kernel
    fails, 4 without a CUDA device.
    """
    profile = profile or profile_old
    ws = Workspace(app) if app else Workspace.find()
    mep_dir = mep_folder(ws, kernel)
    spec = load_spec(mep_dir / "mep.yaml")
    if spec.todo:
        raise MepgenError(f"{mep_dir / 'mep.yaml'} has {len(spec.todo)} open todo item(s) (first: "
                          f"{spec.todo[0].field}: {spec.todo[0].reason}): complete it first", exit_code=3)
    cfg = load_config(ws.app_root)["evaluate"]
    opts = Options(backend=backend or cfg["backend"], input_sets=input_sets, warmup=warmup, reps=reps, rounds=rounds,
                   min_gain=cfg["min_gain"], run_timeout=cfg["timeout_s"], compile_timeout=cfg["compile_timeout_s"],
                   profile=profile, jobs=jobs, use_cache=not no_cache, timing=cfg["timing"], sandbox=cfg["sandbox"])
    ev = Evaluator(spec, mep_dir, opts, log=obj.log if obj is not None else None)
    guard = (cfg["fidelity_tolerance"], cfg["fidelity_floor_us"])
    try:
        _run(ev, spec, mep_dir, list(variants), results, as_json, guard)
    finally:
        ev.close()


def _run(ev: Evaluator, spec, mep_dir: Path, variants: list[Path], results_file: Path | None, as_json: bool,
         guard: tuple[float, float] = (fidelity.TOLERANCE, fidelity.FLOOR_US)) -> None:
    if not ev.has_gpu:
        ev.compile_baseline()     # (with a GPU, prepare() builds it while the input sets are made)
        for v in variants:   # compile errors are worth seeing without a GPU
            res = ev.new_result(v.name, v)
            if res.ok and ev.compile(res, v) is not None:
                res.notes.append("compiled; not run (no CUDA device)")
            click.echo(render(res), err=True)
        ev.require_gpu()
    ev.prepare()
    click.echo(f"backend: {ev.backend_name} ({ev.backend_why})", err=True)
    journal = Journal(results_file, spec.kernel.id, digest(spec.to_dict())) if results_file else None
    base = ev.baseline_result()
    fid, base, _ = baseline_mod.against_application(ev, mep_dir, base, *guard,
                                                    log=lambda line: click.echo(line, err=True))
    write_json(mep_dir / "baseline.json", {**base.to_dict(), "fidelity": fid.to_dict()})
    done = evaluate_many(ev, [(v.name, v) for v in variants], journal,
                         on_result=None if as_json else lambda r: ev.log(f"evaluated {r.name}: {r.status}"))
    if as_json:
        click.echo(json.dumps({"kernel": spec.kernel.id, "baseline": base.to_dict(), "fidelity": fid.to_dict(),
                               "variants": [r.to_dict() for r in done]}, indent=1))
    else:
        click.echo(render(base))
        click.echo(fid.line())
        for r in done:
            click.echo(render(r))
        click.echo(f"wrote {mep_dir / 'baseline.json'}")
    if not base.ok:
        raise MepgenError(f"the MEP's own kernel.cu failed evaluation: {base.feedback().splitlines()[0]}", exit_code=3)
    if any(not r.ok for r in done):
        sys.exit(1)
