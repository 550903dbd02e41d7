"""`mepgen optimize KERNEL`: search for the fastest verified variant of an MEP and record how it got there.

Exit codes: 0 the search ran (whether or not it found a faster variant; the summary says); 3 the MEP itself
is broken; 4 no CUDA device; 5 the fidelity guard refused the MEP (its time is too far from the captured
application's: `--force` overrides, and the results say so); 2 a usage error. The best kernel is left in the run folder, never copied over
the MEP's kernel.cu: `mepgen patch KERNEL --from <run>/best/kernel.cu` takes it into the application.
"""
from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import click

from .. import fidelity
from ..clioptions import renamed_flag
from ..config import load_config
from ..errors import MepgenError
from ..exitcodes import UNSOUND_START
from ..evaluate import baseline as baseline_mod
from ..evaluate import estimate
from ..evaluate.evaluator import Evaluator, Options
from ..evaluate.journal import Journal
from ..evaluate.store import digest
from ..kernelname import mep_folder
from ..spec import load_spec
from ..workspace import Workspace
from . import best_files, candidates, many, strategies, summary
from .features import kernel_features
from .patterns import PatternStore
from .proposer import Attempt, Context
from .search import Budget, Search, auto_width
from .trajectory import Trajectory
from .library.proposer import LibraryProposer
from ..llm.client import ChatClient, LLMSettings
from .llm.proposer import LLMProposer
from .dry_run import plan, report
from .inherit import InheritedProposer
from .winner_check import Prebuild, check_winner
from ..evaluate.memcheck import write_marker


def library_proposer():
    return LibraryProposer()


def llm_proposer(settings, workdir: Path, repairs: int, baseline):
    return LLMProposer(ChatClient(settings), workdir, repairs=repairs, baseline=baseline)


def pattern_recorder(store: PatternStore | None, kernel: str, app: str, features: dict, run: str):
    def record(a: Attempt) -> None:
        if store is None or a.result.timed is None or not a.result.timed.speedup:
            return
        p = a.proposal
        store.record(kernel=kernel, app=app, features=features, source=p.source, change=p.change,
                     speedup=a.result.timed.speedup, transformations=p.transformations, launch=p.launch,
                     strategy=p.strategy, edit=p.text if p.source == "llm" else "", run=run)
    return record


def gpu_info(ev: Evaluator, baseline) -> dict:
    peaks = ev.workers[0].peaks
    name = (peaks.device if peaks else "") or getattr(baseline, "device", "") or "unknown GPU"
    raw = peaks.raw if peaks else {}
    return {"name": name, "cc": raw.get("cc", raw.get("compute_capability", "?")),
            "peak_gbps": peaks.bandwidth_gbs if peaks else float("nan"),
            "peak_gflops": peaks.gflops if peaks else float("nan")}


@click.command("optimize")
@click.argument("kernel", required=False)
@click.option("-C", "--app", type=click.Path(path_type=Path), default=None,
              help="The application's folder (default: found from the current folder upwards).")
@click.option("--all", "all_kernels", is_flag=True, help="Every ready MEP of the application, by hotspot rank.")
@click.option("--top", type=click.IntRange(min=1), default=None, help="The N best-ranked ready MEPs.")
@click.option("--only", default=None, help="These kernels (comma-separated ids or names).")
@click.option("--merge", "merge_name", default=None,
              help="Print and write the table of the batch of this name (rows written by several nodes).")
@click.option("--list", "list_only", is_flag=True, help="With --all/--top/--only: print the kernel ids and stop.")
@click.option("--proposer", "proposer_kind", type=click.Choice(["library", "llm", "both"]), default=None,
              help="Who proposes variants (default: library, plus llm when an endpoint is configured: docs/llm.md).")
@click.option("--strategy", type=click.Choice(sorted(strategies.STRATEGIES)), default="elite", show_default=True)
@click.option("--budget", type=click.IntRange(min=1), default=25, show_default=True, help="Candidates to evaluate at most.")
@click.option("--time-limit", type=click.FloatRange(min=1), default=None,
              help="Wall-time budget in seconds of the whole run, baseline included (per kernel with --all).")
@click.option("--repairs", type=click.IntRange(min=0), default=2, show_default=True,
              help="Repair rounds per failed candidate (compile error, fault, wrong result).")
@click.option("--width", type=click.IntRange(min=1), default=None,
              help="Candidates per round (default: half the CPU cores, 4 to 8: their compiles run side by side).")
@click.option("--roofline", type=click.FloatRange(min=1, max=100), default=90.0, show_default=True,
              help="Stop when the best reaches this % of the GPU's measured peak.")
@click.option("--backend", type=click.Choice(["auto", "native", "pycuda"]), default=None,
              help="Evaluator backend (default from config: evaluate.backend, auto: pycuda when installed).")
@click.option("--reps", type=click.IntRange(min=1), default=None,
              help="Timed launches per round and side (count-based timing; default: chosen by time).")
@click.option("--warmup", type=click.IntRange(min=0), default=None, help="Warm-up launches (count-based timing).")
@click.option("--resume", "resume", default=None, help="Continue the run (with --all: the batch) of this name.")
@click.option("--run-name", default=None, help="Name of a new run (default: the date and time).")
@click.option("--no-inherit", is_flag=True, help="Do not start from the wins of similar kernels (patterns database).")
@click.option("--ncu-metrics", "profile", is_flag=True,
              help="Nsight Compute metrics for every verified candidate (slow).")
@renamed_flag("--profile", "--ncu-metrics")
@click.option("--force", is_flag=True,
              help="Optimize even when the MEP's time is outside the fidelity guard against the application's "
                   "(evaluate.fidelity_tolerance); the results say it was forced.")
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON.")
@click.option("--dry-run", is_flag=True,
              help="No GPU: list what the library would try and why each other transformation refuses, and write "
                   "the candidates' kernel.cu under .mepgen/dryrun/KERNEL/.")
@click.pass_obj
def optimize(obj, kernel, app, all_kernels, top, only, merge_name, list_only, proposer_kind, strategy, budget,
             time_limit, repairs, width, roofline, backend, reps, warmup, resume, run_name, no_inherit, profile,
             profile_old, force, as_json, dry_run):
    """Search for the fastest verified variant of KERNEL's MEP; writes .mepgen/runs/KERNEL/RUN/.

    With --all, --top N or --only K1,K2: every chosen MEP, one worker per visible GPU, a table at the end
    (.mepgen/batches/NAME/); --resume NAME finishes what such a batch left.
    """
    started = time.monotonic()
    profile = profile or profile_old
    _stop_on_sigterm()
    ws = Workspace(app) if app else Workspace.find()
    batch_resume = not kernel and resume is not None and (ws.root / "batches" / resume).is_dir()
    if merge_name or all_kernels or top or only or batch_resume:
        if kernel:
            raise MepgenError("give a KERNEL or --all/--top/--only, not both", exit_code=2)
        if merge_name:
            many.merge(ws, merge_name, as_json)
            return
        if dry_run:       # no GPU: what the library would try for each chosen MEP
            _dry_run_many(ws, many.choose(ws, all_kernels, top, only), as_json)
            return
        forwarded = many.forward_options(proposer_kind=proposer_kind, strategy=strategy, budget=budget,
                                         time_limit=time_limit, repairs=repairs, width=width, roofline=roofline,
                                         backend=backend, reps=reps, warmup=warmup, no_inherit=no_inherit,
                                         ncu_metrics=profile, force=force)
        many.optimize_many(ws, all_kernels, top, only, run_name, resume, forwarded, list_only, as_json)
        return
    if not kernel:
        raise MepgenError("name a KERNEL, or use --all, --top N or --only K1,K2", exit_code=2)
    mep_dir = mep_folder(ws, kernel)
    spec = load_spec(mep_dir / "mep.yaml")
    if dry_run:
        p = plan(spec, (mep_dir / "kernel.cu").read_text(errors="replace"), ws.root / "dryrun" / spec.kernel.id)
        click.echo(json.dumps(p.to_dict(), indent=1) if as_json else report(p))
        return
    if spec.todo:
        raise MepgenError(f"{mep_dir / 'mep.yaml'} has {len(spec.todo)} open todo item(s): complete it first",
                          exit_code=3)
    if not spec.outputs:
        raise MepgenError(f"{spec.kernel.name}: the MEP has no output to verify (no out or inout parameter, buffer "
                          "or written __device__ variable in mep.yaml): a variant that did nothing would pass its "
                          "checks, so mepgen does not optimize it", exit_code=3)
    cfg = load_config(ws.app_root)
    settings = LLMSettings.from_config(cfg)
    kinds = {"library": ["library"], "llm": ["llm"], "both": ["library", "llm"]}[proposer_kind] if proposer_kind \
        else (["library", "llm"] if settings else ["library"])
    if "llm" in kinds and settings is None:
        raise MepgenError("--proposer llm needs an LLM endpoint: export OPENAI_BASE_URL and MEPGEN_LLM_MODEL, or set "
                          "llm.base_url and llm.model in the configuration (docs/llm.md)")
    run_dir = ws.root / "runs" / spec.kernel.id / (resume or run_name or time.strftime("%Y%m%d-%H%M%S"))
    e = cfg["evaluate"]
    opts = Options(backend=backend or e["backend"], min_gain=e["min_gain"], run_timeout=e["timeout_s"],
                   compile_timeout=e["compile_timeout_s"], profile=profile, reps=reps, warmup=warmup,
                   timing=e["timing"], sandbox=e["sandbox"])
    ev = Evaluator(spec, mep_dir, opts, log=progress)
    stream = None
    try:
        ev.require_gpu()
        ev.warm_ahead()          # the pycuda worker starts while the pipeline and the first round are set up
        progress(f"{spec.kernel.name}: backend {ev.backend_name} ({ev.backend_why})")
        guard = (e["fidelity_tolerance"], e["fidelity_floor_us"], force)
        # the search's evaluation pipeline, opened now: its rule workers read the original while it is timed
        stream = candidates.Stream(ev, mep_dir, spec, before=_check_stop)
        outcome, best_path, baseline, fid = _run(ev, ws, spec, mep_dir, run_dir, kinds, settings, strategy, budget,
                                                 time_limit, repairs, width, roofline, resume, no_inherit, obj,
                                                 started, guard, stream)
    finally:
        if stream is not None:
            stream.close(cancel=True)      # nothing is left running after the search (a no-op when it ended)
        ev.close()
    summary.print_outcome(spec.kernel.name, run_dir, outcome, best_path, baseline, as_json, fid)


def progress(message: str) -> None:
    """A phase of the run on stderr (each phase longer than a few seconds says what it is doing)."""
    click.echo(f"mepgen optimize: {message}", err=True)


_STOP = {"asked": False}


def _stop_on_sigterm() -> None:
    """A run killed at a job's time limit (SIGTERM) unwinds like ^C: workers closed, summary.md kept. The signal
    is also remembered: raised inside a libclang callback (the library parses kernels through ctypes), the
    KeyboardInterrupt is swallowed by ctypes, so the search checks before each batch (_check_stop)."""
    if threading.current_thread() is threading.main_thread():
        def handler(signum, frame):
            _STOP["asked"] = True
            raise KeyboardInterrupt
        signal.signal(signal.SIGTERM, handler)
        signal.signal(signal.SIGINT, handler)


def _check_stop() -> None:
    if _STOP["asked"]:
        raise KeyboardInterrupt


def _run(ev, ws, spec, mep_dir, run_dir, kinds, settings, strategy, budget, time_limit, repairs, width, roofline,
         resume, no_inherit, obj, started=None, guard=(fidelity.TOLERANCE, fidelity.FLOOR_US, False), evaluate=None):
    """The baseline, then the search; `evaluate`: the run's candidates.Stream (its caller closes it)."""
    started = time.monotonic() if started is None else started
    if resume is None:
        summary.write_pending(run_dir, spec.kernel.name, "building and timing the original kernel")
    if time_limit is not None:
        ev.set_time_limit(started, time_limit)
    setup = round(time.monotonic() - started, 3)      # the command's own start: workspace, spec, evaluator, pipeline
    try:
        progress(f"{spec.kernel.name}: building the original and computing its reference outputs")
        ahead = _first_round_ahead(ev, evaluate, spec, mep_dir, run_dir, kinds, width, resume)
        ev.prepare()             # builds the original while its input sets are made
        progress(f"{spec.kernel.name}: verifying and timing the original")
        baseline = ev.baseline_result()
        if ahead is not None:
            waited = time.monotonic()
            ahead.join()
            ev.spent["ahead"] = round(time.monotonic() - waited, 3)    # the first round's proposing left to wait for
        if not baseline.ok:
            raise MepgenError(f"the MEP's own kernel.cu failed evaluation: {baseline.feedback().splitlines()[0]}",
                              exit_code=3)
    except (MepgenError, KeyboardInterrupt) as e:
        if resume is None:
            summary.write_pending(run_dir, spec.kernel.name, str(e) or "interrupted while timing the original",
                                  state="stopped before any candidate")
        raise
    progress(f"{spec.kernel.name}: original {baseline.timed.median_ms:.4g} ms ({baseline.timed.plan}); "
             f"{time.monotonic() - started:.0f} s so far")
    ready = time.monotonic()
    fid, baseline = check_fidelity(ev, mep_dir, baseline, guard, run_dir, spec.kernel.name, resume)
    original = (mep_dir / "kernel.cu").read_text(errors="replace")
    gpu = gpu_info(ev, baseline)
    features = kernel_features(spec, original, gpu["name"], mep_dir)
    store = PatternStore()
    patterns = [] if no_inherit else store.similar(features, exclude_kernel=(spec.kernel.id, str(ws.app_root)))
    ctx = Context(spec=spec, mep_dir=mep_dir, original=original, gpu=gpu, features=features, patterns=patterns)
    spec_hash = digest(spec.to_dict())
    secrets = []
    proposers = []
    if patterns and "library" in kinds:
        proposers.append(InheritedProposer())       # similar kernels' winning chains, tried first
    if "library" in kinds:
        proposers.append(library_proposer())
    if "llm" in kinds:
        proposers.append(llm_proposer(settings, run_dir / "llm", repairs, baseline))
        # the client holds the key now; candidates (nvcc, the harness, the worker) must not inherit it
        key = os.environ.pop(settings.api_key_env, None)
        if key:
            secrets.append(key)
    phases = {"start": process_age_s(started), "setup": setup, **ev.spent, "to_search": round(time.monotonic() - ready, 3)}
    header = {"kernel": spec.kernel.id, "spec_sha256": spec_hash, "baseline_phases_s": phases, "proposers": kinds,
              "strategy": strategy, "budget": budget, "time_limit_s": time_limit, "repairs": repairs,
              "backend": ev.backend_name, "fidelity": fid.to_dict(),
              "backend_why": ev.backend_why, "gpu": gpu, "features": features, "inherited": len(patterns),
              "llm": {"base_url": settings.base_url, "model": settings.model} if settings and "llm" in kinds else None}
    traj = Trajectory(run_dir, header, resume=resume is not None, secrets=tuple(secrets))
    journal = Journal(run_dir / "results.jsonl", spec.kernel.id, spec_hash)
    command = f"mepgen optimize {spec.kernel.name} --strategy {strategy} --budget {budget}"

    def write_summary(outcome) -> None:
        summary.write(traj, outcome, spec.kernel.name, baseline, command=command)

    # one pipeline for the whole search (candidates.Stream); a signal swallowed inside a libclang callback still stops
    # the run before the next proposal is taken (_check_stop)
    own = evaluate is None
    evaluate = candidates.Stream(ev, mep_dir, spec, before=_check_stop) if own else evaluate
    evaluate.keep_in(journal)
    width = width or auto_width()
    prebuild = Prebuild(ev, run_dir / candidates.WORK)      # the winner's check, made ready during the search
    record = pattern_recorder(store, spec.kernel.id, str(ws.app_root), features, str(run_dir))

    def on_win(attempt) -> None:
        record(attempt)
        prebuild.offer(attempt)         # offered already where the search streams (on_faster): nothing new then
    search = Search(ctx, proposers, evaluate,
                    strategies.make(strategy), Budget(budget, time_limit, repairs, width, roofline), traj,
                    baseline=baseline, on_win=on_win,
                    start=started, on_progress=write_summary, pace_s=estimate.first_candidate_s(ev),
                    on_faster=prebuild.offer_result)     # the build starts as the result arrives, not at round's end
    if resume is not None:
        n = search.resume()
        traj.event("resumed", f"resumed {run_dir.name}: {n} candidate(s) already evaluated")
    if patterns:
        traj.event("inherited", f"{len(patterns)} win(s) of similar kernels inherited (best: "
                                f"{patterns[0]['change']} on {patterns[0]['kernel']}, {patterns[0]['speedup']:.2f}x)")
    write_summary(search.snapshot("still running: searching"))
    try:
        outcome = search.run()
    except BaseException as e:
        prebuild.cancel()
        # a signal raised inside a libclang callback is swallowed by ctypes, and the cursor walk it cut short may
        # fail on its own (a child list missing its last children): after a signal, that is the interruption too
        stopped = isinstance(e, KeyboardInterrupt) or (_STOP["asked"] and isinstance(e, Exception))
        if stopped:
            write_summary(search.snapshot("interrupted (killed or ^C): what was evaluated is kept; --resume "
                                          f"{run_dir.name} continues"))
        if stopped and not isinstance(e, KeyboardInterrupt):
            raise KeyboardInterrupt from e
        raise
    finally:
        if own:
            evaluate.close(cancel=True)
        store.close()
    end = time.monotonic()
    check_winner(ev, outcome, run_dir / "memcheck", traj.event, journal, prebuild)
    if prebuild.best_ms is not None:
        traj.event("phases", f"the winner's memory check took {time.monotonic() - end:.1f} s after the search (made "
                             f"ready during it: {prebuild.seconds:.1f} s)")
    best_path = summary.write(traj, outcome, spec.kernel.name, baseline, command=command)
    if outcome.best is not None and outcome.best.result.memcheck and best_path is not None:
        write_marker(best_path, outcome.best.result.memcheck)
    if outcome.best is not None and (outcome.best.proposal.launch or outcome.best.proposal.nvcc_flags):
        best_files.write_launch(spec, outcome.best.proposal.launch, run_dir / "best" / "mep.yaml", outcome.best.proposal.nvcc_flags,
                     original, [(a.proposal.source, a.proposal.transformations)
                                for a in summary.chain(outcome.best, {a.id: a for a in outcome.attempts})])
    return outcome, best_path, baseline, fid


def process_age_s(at: float) -> float | None:
    """Seconds from this process's start (the interpreter, the imports) to `at` (time.monotonic()); None where
    /proc does not say."""
    try:
        ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        since_boot = time.clock_gettime(time.CLOCK_BOOTTIME) - (time.monotonic() - at)
        return round(since_boot - ticks / os.sysconf("SC_CLK_TCK"), 3)
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def _first_round_ahead(ev, stream, spec, mep_dir, run_dir, kinds, width, resume) -> threading.Thread | None:
    """While the original is built, its references computed and it is verified and timed, the library's first
    proposals from it (the search's first round: it starts from the original, with nothing evaluated yet) are linted
    and compiled into the caches their submit finds, on a thread the caller joins before the search. It starts with
    the baseline, not after its build: the proposals need no GPU (the library reads neither the GPU nor the kernel's
    features), and their compiles then end before the search instead of in its first round. Only where the pipeline
    streams (many cores), for a new run, with the library among the proposers; a proposal that differs in the search
    is compiled there."""
    if stream is None or stream.submit is None or resume is not None or "library" not in kinds:
        return None

    def work() -> None:
        try:
            ctx = Context(spec=spec, mep_dir=mep_dir, original=ev.original_text, gpu={})
            for p in library_proposer().propose(ctx, None, width or auto_width()):
                stream.prefetch(p, run_dir / candidates.WORK)
        except Exception:      # noqa: BLE001 (a warm-up only: the search meets any such error itself, and says it)
            pass
    t = threading.Thread(target=work, name="mepgen-first-round", daemon=True)
    t.start()
    return t


def check_fidelity(ev, mep_dir, baseline, guard, run_dir, name, resume) -> tuple[fidelity.Fidelity, object]:
    """The MEP/application time ratio of the original, and the baseline the search compares with (from a warm L2
    where that is what reproduces the application: evaluate/baseline.against_application); outside the guard the run
    stops here unless forced."""
    tolerance, floor_us, force = guard
    fid, baseline, warm_ms = baseline_mod.against_application(ev, mep_dir, baseline, tolerance, floor_us,
                                                              lambda line: progress(f"{name}: {line}"))
    fid.forced = bool(force and fid.ok is False)
    progress(f"{name}: {fid.line()}")
    if fid.ok is False and not force:
        warm_too = f"; {warm_ms:.4g} ms from a warm L2" if warm_ms is not None else ""
        why = (f"the MEP's original takes {fid.mep_ms:.4g} ms against {fid.app_ms:.4g} ms in the application "
               f"(ratio {fid.ratio:.2f}, outside +-{tolerance:.0%}{warm_too}): a speedup measured on it would not be "
               f"the application's; check the MEP's sizes and data (`mepgen capture`), or pass --force")
        if resume is None:
            summary.write_pending(run_dir, name, why, state="refused by the fidelity guard")
        raise MepgenError(why, exit_code=FIDELITY_EXIT)
    return fid, baseline


#: exit code of a run the fidelity guard refused
FIDELITY_EXIT = UNSOUND_START     # mepgen/exitcodes.py


def _dry_run_many(ws: Workspace, chosen: list[dict], as_json: bool) -> None:
    plans = []
    for m in chosen:
        mep_dir = ws.mep_dir(m["id"])
        p = plan(load_spec(mep_dir / "mep.yaml"), (mep_dir / "kernel.cu").read_text(errors="replace"),
                 ws.root / "dryrun" / m["id"])
        plans.append((m["id"], p))
    if as_json:
        click.echo(json.dumps([{"kernel": kid, **p.to_dict()} for kid, p in plans], indent=1))
    else:
        click.echo("\n\n".join(f"== {kid}\n{report(p)}" for kid, p in plans))
