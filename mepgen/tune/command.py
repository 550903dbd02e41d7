"""`mepgen tune -- ./app args`: from one run of the application to a faster, verified application.

The whole path, each step the command a person would run, its outcome kept in `.mepgen/tune/state.json` so that a
tune stopped anywhere continues where it stopped (`--fresh` starts again):

 1. build the application with its own build and run it: exit code, its check (`--check`), wall time (`--runs`
    runs: median and spread) -- the reference; an application that fails its own check here stops the tune;
 2. `mepgen extract` (when the sources changed since the last one) and `mepgen capture --all --use`: the real
    launch of every kernel the run launches, and each one's complete MEP;
 3. `mepgen optimize --only ...` over every captured, complete MEP (a batch, one worker per GPU); the fidelity
    guard refuses an MEP whose time is far from the application's;
 4. `mepgen patch --apply` of every verified win, then the application's own build: a patch that breaks the build
    is reverted on its own; a win patch refuses (a launch the application's site cannot spell) gives way to the
    run's fastest verified variant that changes only the kernel's text, when there is one;
 5. the application again: exit code, check and time. A failing check isolates the patch that causes it (each
    alone) and keeps the others; a slower application gets every patch reverted. Either way the sources end as
    the report says, and the application is rebuilt from them.

Exit codes: 0 the path ran (the report says whether anything was kept); 5 the application fails its own check
before any change; 3 nothing could be tuned (no kernel captured with a complete MEP); 4 no CUDA device; 2 usage.
"""
from __future__ import annotations

import json
import shlex
import time
from pathlib import Path

import click

from ..config import load_config
from ..clioptions import parse_bytes
from ..errors import MepgenError
from ..workspace import Workspace, write_json
from . import appruns, report
from .patching import apply_variant, patch_wins, revert, variant_of
from .stages import mepgen, require, say, sources_unchanged


class State:
    """`.mepgen/tune/state.json`: each finished step's outcome, written the moment it is known."""

    def __init__(self, folder: Path, fresh: bool, key: dict):
        self.folder = folder
        self.path = folder / "state.json"
        self.data: dict = {}
        if self.path.is_file() and not fresh:
            try:
                self.data = json.loads(self.path.read_text())
            except (OSError, json.JSONDecodeError):
                self.data = {}
            if self.data.get("key") != key:
                say("the last tune ran another command or options: starting afresh (its report is kept as "
                    "report.previous.json)")
                self.data = {}
        if not self.data:
            if (folder / "report.json").is_file():
                (folder / "report.json").replace(folder / "report.previous.json")
            self.data = {"key": key, "started": time.strftime("%Y-%m-%d %H:%M:%S")}
            self.save()
        elif "finished" not in self.data:
            done = [s for s in ("before", "capture", "optimize", "patch", "after") if s in self.data]
            say(f"continuing the tune started {self.data.get('started')} (done: {', '.join(done) or 'nothing'})")

    def save(self) -> None:
        write_json(self.path, self.data)

    def __contains__(self, step: str) -> bool:
        return step in self.data

    def __getitem__(self, step: str):
        return self.data[step]

    def put(self, step: str, value) -> None:
        self.data[step] = value
        self.save()


@click.command("tune")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
@click.option("-C", "--app", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="The application's folder (default: found from the current folder upwards, else the current one).")
@click.option("--build", "build_cmd", default=None,
              help="The application's build command, run through the shell in its folder (default: "
                   "tune.build_command, else `make` beside a Makefile or `cmake --build` of its one build folder).")
@click.option("--check", "check_cmd", default=None,
              help="The application's own check, run through the shell after each run (default: tune.check_command, "
                   "else patch.validate_command); $MEPGEN_TUNE_LOG names the file holding the run's output "
                   "(--check 'grep -q PASS \"$MEPGEN_TUNE_LOG\"'); the application's exit code always counts.")
@click.option("--runs", type=click.IntRange(min=1), default=None, help="Timed runs before and after (default 3).")
@click.option("--time-limit", type=click.FloatRange(min=1), default=None,
              help="Seconds of search per kernel, its baseline included (default: tune.time_limit_s, 60).")
@click.option("--top", type=click.IntRange(min=1), default=None,
              help="Optimize only the N captured kernels that take longest in the application (their GPU time "
                   "summed over its launches).")
@click.option("--min-share", type=click.FloatRange(min=0, max=1), default=None,
              help="Optimize only kernels that take at least this share of all kernels' GPU time in the application "
                   "(default: tune.min_share, 0.01; 0 optimizes every captured kernel).")
@click.option("--max-bytes", "max_bytes", default=None,
              help="Passed to `mepgen capture`: the most bytes one captured launch may reach (default 4G; "
                   "a launch over it is refused with its size).")
@click.option("--timeout", type=click.FloatRange(min=1), default=None,
              help="Seconds one run of the application, its build or its check may take (default 1800).")
@click.option("--force", is_flag=True, help="Optimize MEPs outside the fidelity guard too (said in the report).")
@click.option("--fresh", is_flag=True, help="Start again instead of continuing an unfinished tune.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def tune(command, app, build_cmd, check_cmd, runs, time_limit, top, min_share, max_bytes, timeout, force, fresh,
         as_json):
    """Capture, optimize, patch and rebuild: the application made faster and checked, in one command.

    COMMAND is the application's run, after `--` (`mepgen tune -- ./app -n 1000`), run from the current folder
    as `mepgen capture` runs it. Writes .mepgen/tune/: state.json (resumable), report.json, report.md, logs/.
    """
    app_root = Path(app).resolve() if app else _find_root()
    ws = Workspace(app_root)
    cfg = load_config(app_root)
    t = cfg["tune"]
    build_cmd = build_cmd or t["build_command"] or appruns.detect_build(app_root)
    if not build_cmd:
        raise MepgenError(f"no build command for {app_root}: give --build 'CMD' (or tune.build_command in "
                          ".mepgen/config.yaml); mepgen found no Makefile and no single configured CMake folder")
    check_cmd = check_cmd or t["check_command"] or cfg["patch"]["validate_command"]
    runs = runs or t["runs"]
    time_limit = time_limit or t["time_limit_s"]
    timeout = timeout or t["timeout_s"]
    min_share = t["min_share"] if min_share is None else min_share
    if max_bytes is not None:
        parse_bytes(max_bytes)                 # a bad size is refused before the application runs
    cwd = Path.cwd()
    command = list(command)
    key = {"command": command, "cwd": str(cwd), "build": build_cmd, "check": check_cmd}
    ws.ensure()
    folder = ws.root / "tune"
    logs = folder / "logs"
    state = State(folder, fresh, key)
    rep = report.Report(folder, app_root, command, build_cmd, check_cmd, runs)

    # 1. the reference: build, runs, check
    if "before" not in state:
        say(f"building the application: {build_cmd}")
        b = appruns.run_step(build_cmd, app_root, logs / "build-before.log", timeout)
        if not b.ok:
            raise MepgenError(f"the application's build fails before any change ({build_cmd}): {b.tail.splitlines()[-1:] or ''} "
                              f"-- see {b.log}", exit_code=5)
        say(f"running the application {runs} time(s): {shlex.join(command)}")
        before = appruns.measure(command, cwd, logs, "before", runs, check_cmd, timeout)
        if not before.ok:
            raise MepgenError(f"the application fails before any change: {before.first_failure()}", exit_code=5)
        state.put("before", {**before.to_dict(), "gpu": _gpu_times(command, cwd, logs / "gpu-before.log", timeout)})
        say(f"before: {before.median():.3f} s median over {runs} run(s)")
    rep.before = state["before"]
    bound = appruns.amdahl(state["before"])
    if bound and "said_bound" not in state.data:
        state.data["said_bound"] = True
        say(f"the kernels take {bound['kernels_share']:.2%} of the application's run on the GPU: making them "
            f"infinitely fast would make it at most {bound['max_app_speedup']:.4g}x faster")

    # 2. extract and capture
    if "capture" not in state:
        if not (ws.inventory_path.is_file() and sources_unchanged(ws.inventory_path, app_root)):
            say("extracting the application's kernels")
            require(mepgen(["extract", str(app_root)], logs / "extract.log"), "mepgen extract")
        say("capturing every launched kernel from one run")
        cap = mepgen(["capture", "--all", "--use", "-C", str(app_root), "--json", "--timeout", str(timeout),
                      *(["--max-bytes", max_bytes] if max_bytes else []), "--", *command], logs / "capture.log",
                     cwd=cwd)
        if cap.code not in (0, 3) or not isinstance(cap.doc, list):
            raise MepgenError(f"mepgen capture failed: {cap.last_error}", exit_code=cap.code if cap.code in (3, 4) else 2)
        state.put("capture", cap.doc)
    outcomes = state["capture"]
    rep.add_captures(outcomes)
    chosen, minor = _chosen(outcomes, top, (state["before"] or {}).get("gpu"), min_share)
    rep.not_hotspots = minor
    if not chosen:
        rep.outcome = "nothing to tune: no launched kernel was captured with a complete MEP"
        rep.write(state, as_json)
        raise MepgenError(rep.outcome + f" (see {folder / 'report.md'})", exit_code=3)

    # 3. optimize the captured MEPs, one batch
    batch = state.data.setdefault("batch", time.strftime("tune-%Y%m%d-%H%M%S"))
    state.save()
    if "optimize" not in state:
        say(f"optimizing {len(chosen)} kernel(s), {time_limit:g} s each: {', '.join(c['id'] for c in chosen)}")
        batch_dir = ws.root / "batches" / batch
        args = ["optimize", "--only", ",".join(c["id"] for c in chosen), "-C", str(app_root), "--json",
                "--time-limit", str(time_limit)] + (["--force"] if force else []) + \
            (["--resume", batch] if batch_dir.is_dir() else ["--run-name", batch])
        opt = mepgen(args, logs / "optimize.log")
        if opt.code == 4:
            raise MepgenError(f"mepgen optimize: {opt.last_error}", exit_code=4)
        rows = _rows(batch_dir)
        # a kernel whose baseline alone needs more than the limit (the long launches of a hotspot) gets, once, the
        # time its evaluator asked for and the search time every other kernel had on top: the limit its baseline
        # alone would need leaves no time for a candidate (seen on the GPU: a 10 ms kernel on 1 GiB of input, the
        # application's hotspot, got no candidate while its 1 us kernels got 25 each). Bounded: a baseline of three
        # times the limit, at least 120 s
        longer = {}
        for kid, row in rows.items():
            need = row.get("needs_time_limit_s")          # optimize --all's row says it (optimize/many.py)
            if row.get("status") == "failed" and need and need <= max(3 * time_limit, 120.0):
                longer[kid] = need + time_limit
        if longer:
            limit = max(longer.values())
            say(f"{len(longer)} kernel(s) need a longer search to time their original: {limit:g} s each")
            again = ["optimize", "--only", ",".join(longer), "-C", str(app_root), "--json", "--time-limit",
                     str(limit), "--run-name", batch + "-longer"] + (["--force"] if force else [])
            mepgen(again, logs / "optimize.log")
            rows.update({k: v for k, v in _rows(ws.root / "batches" / (batch + "-longer")).items() if k in longer})
        state.put("optimize", rows)
    rep.add_rows(state["optimize"])

    # 4. patch every verified win, then the application's build
    if "patch" not in state:
        state.put("patch", patch_wins(mepgen, app_root, state["optimize"], cfg["evaluate"]["min_gain"], build_cmd, logs,
                                       timeout))
    rep.patches = state["patch"]

    # 5. the application again; keep what passes its check and is not slower
    if "after" not in state:
        state.put("after", _after(app_root, state, command, cwd, logs, runs, check_cmd, build_cmd, timeout))
    rep.after = state["after"]
    state.data["finished"] = time.strftime("%Y-%m-%d %H:%M:%S")
    state.save()
    rep.write(state, as_json)


def _rows(batch_dir: Path) -> dict:
    rows = {}
    for f in sorted((batch_dir / "rows").glob("*.json")):
        try:
            row = json.loads(f.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        rows[row["kernel"]] = row
    return rows


def _find_root() -> Path:
    try:
        return Workspace.find().app_root
    except MepgenError:
        return Path.cwd().resolve()


def _chosen(outcomes: list[dict], top: int | None, gpu: dict | None = None,
            min_share: float = 0.0) -> tuple[list[dict], dict]:
    """(captured kernels with a complete MEP, longest in the application first: their GPU time summed over the
    run's launches where the run's profile has it, else the captured launch's own; {id: why left out} for those
    under `min_share` of all kernels' GPU time in the application's run: not hotspots)."""
    kernels = (gpu or {}).get("kernels") or {}
    total = (gpu or {}).get("gpu_total_ms") or 0.0
    out, minor = [], {}
    for o in outcomes:
        if o.get("outcome") == "captured" and o.get("mep") and o.get("complete"):
            kid = Path(o["mep"]).name
            mine = kernels.get(o.get("launched_as") or "")
            if min_share > 0 and total > 0 and mine is not None and mine["total_ms"] < min_share * total:
                minor[kid] = (f"not a hotspot: {mine['total_ms'] / total:.2%} of the kernels' GPU time in the "
                              f"application (tune.min_share {min_share:.0%})")
                continue
            # a kernel launched 100 times at 9 ms outweighs one launched once at 390 ms (seen on the GPU: --top 1
            # took the single long launch)
            out.append({"id": kid, "kernel": o["kernel"], "kernel_ms": o.get("kernel_ms") or 0.0,
                        "app_ms": mine["total_ms"] if mine is not None else None})
    out.sort(key=lambda c: -(c["app_ms"] if c["app_ms"] is not None else c["kernel_ms"]))
    return (out[:top] if top else out), minor


def _after(app_root, state, command, cwd, logs, runs, check_cmd, build_cmd, timeout) -> dict:
    patches = state["patch"]
    kept = [k for k, v in patches.items() if v["state"] == "applied"]
    if not kept:
        return {"timing": None, "comparison": None, "kept": [], "note": "no patch to measure: nothing won"}
    say(f"building the patched application: {build_cmd}")
    build = appruns.run_step(build_cmd, app_root, logs / "build-after.log", timeout)
    after = appruns.measure(command, cwd, logs, "after", runs, check_cmd, timeout) if build.ok else None
    note = ""
    if after is not None and not after.ok:
        say(f"the patched application fails: {after.first_failure()}; checking each patch alone")
        failing = _isolate(app_root, kept, {k: variant_of(patches[k], state["optimize"][k]) for k in kept}, command,
                           cwd, logs, check_cmd, build_cmd, timeout)
        for k in failing:
            patches[k].update(state="reverted", why="the application's check fails with it")
        state.put("patch", patches)
        kept = [k for k in kept if k not in failing]
        note = f"reverted {len(failing)} patch(es) that fail the application's check: {', '.join(failing)}"
        if kept:
            appruns.run_step(build_cmd, app_root, logs / "build-after2.log", timeout)
            after = appruns.measure(command, cwd, logs, "after2", runs, check_cmd, timeout)
        else:
            after = None
    if after is None or not after.ok:
        for k in reversed(kept):
            revert(mepgen, app_root, k, logs)
            patches[k].update(state="reverted", why=patches[k]["why"] or "the patched application failed")
        state.put("patch", patches)
        appruns.run_step(build_cmd, app_root, logs / "build-reverted.log", timeout)
        return {"timing": after.to_dict() if after else None, "comparison": None, "kept": [],
                "note": note or "the patched application failed; every patch reverted"}
    before = appruns.Timing(state["before"]["runs"])
    gpu_after = _gpu_times(command, cwd, logs / "gpu-after.log", timeout)
    cmp = appruns.judge(before, after, state["before"].get("gpu"), gpu_after)
    say(f"after: {after.median():.3f} s median; application speedup {cmp['speedup']}x ({cmp['verdict']}, noise "
        f"{cmp['noise']:.1%})" + (f"; kernels on the GPU {cmp['gpu_speedup']}x" if cmp.get("gpu_speedup") else "")
        + (f": {cmp['why']}" if cmp.get("why") else ""))
    if cmp["verdict"] == "slower":
        for k in reversed(kept):
            revert(mepgen, app_root, k, logs)
            patches[k].update(state="reverted", why="the application got slower with the patches"
                              + (f" ({cmp['why']})" if cmp.get("why") else ""))
        state.put("patch", patches)
        appruns.run_step(build_cmd, app_root, logs / "build-reverted.log", timeout)
        return {"timing": {**after.to_dict(), "gpu": gpu_after}, "comparison": cmp, "kept": [],
                "note": "the patched application was slower: every patch reverted"}
    return {"timing": {**after.to_dict(), "gpu": gpu_after}, "comparison": cmp, "kept": kept, "note": note}


def _gpu_times(command, cwd, log, timeout) -> dict | None:
    """Every kernel's time on the GPU over one more run (`mepgen capture --gpu-times`); None where it cannot be had
    (the reason is in the log), which costs the report a column, not the tune."""
    r = mepgen(["capture", "--gpu-times", "--json", "--timeout", str(timeout), "--", *command], log, cwd=cwd, echo=False)
    if r.code != 0 or not isinstance(r.doc, dict):
        say(f"no GPU times of the kernels: {r.last_error}")
        return None
    return r.doc


def _isolate(app_root, kept, variants, command, cwd, logs, check_cmd, build_cmd, timeout) -> list[str]:
    """The patches whose application fails its check when applied alone (each is tried on the original sources);
    `variants`: each kept patch's kernel.cu."""
    for k in reversed(kept):
        revert(mepgen, app_root, k, logs)
    failing = []
    for k in kept:
        apply_variant(mepgen, app_root, k, variants[k], logs)
        ok = appruns.run_step(build_cmd, app_root, logs / f"build-{k}-alone.log", timeout).ok and \
            appruns.measure(command, cwd, logs, f"alone-{k}", 1, check_cmd, timeout, warmup=0).ok
        revert(mepgen, app_root, k, logs)
        if not ok:
            failing.append(k)
    for k in kept:
        if k not in failing:
            apply_variant(mepgen, app_root, k, variants[k], logs)
    return failing
