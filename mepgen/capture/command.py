"""`mepgen capture KERNEL [options] -- ./app args...`: record one real launch's inputs and outputs for the MEP."""
from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path

import click

from ..clioptions import parse_bytes  # noqa: F401  (re-exported: tests and older callers)
from ..errors import MepgenError, os_error_message
from ..progress import progress
from .. import inventory as inventory_mod
from ..workspace import Workspace
from .names import choose_kernel, KernelChoice
from ..spec import load_spec
from . import build, launcher  # called through the modules: tests replace the injector's build and run
from .convert import convert, load_manifest
from .launcher import explain_failure, outcome_kind, run_plain
from .plan import RunPlan, make_plan, typedef_map
from .mepwrite import static_completion, write_captured_mep
from .use import BACKUP_SUFFIX
from .compare import compare, notes_from_comments
from .gpuprofile import configs_of, print_profile, profile_run
from .definition import find_binary, resolve

@click.command("capture")
@click.argument("kernel", required=False)
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
@click.option("-C", "--app", "app", type=click.Path(path_type=Path), default=None,
              help="The application's folder (default: found from the current folder upwards).")
@click.option("--kernels", "kernel_list", default=None,
              help="Record several kernels in the same run: a comma-separated list of names from the inventory.")
@click.option("--all", "every", is_flag=True, help="Record every kernel of the inventory that the run launches.")
@click.option("--launch", "launch", type=int, default=0, show_default=True,
              help="Which launch of each kernel to record, counting from 0 (after --after-ms when given).")
@click.option("--longest", is_flag=True,
              help="Record each kernel's longest launch instead (every launch is timed; see docs/capture.md).")
@click.option("--after-ms", "after_ms", type=float, default=None,
              help="Only count launches that start this many milliseconds after the application started.")
@click.option("--max-bytes", "max_bytes", default="4G", show_default=True,
              help="Refuse a launch whose reachable allocations add up to more than this (512M, 8G, ...).")
@click.option("--compress-above", "compress_above", default="64M", show_default=True,
              help="Store reference outputs larger than this compressed (.npz), up to 1 GiB (larger ones as they "
                   "are: compressing them took minutes); nothing is ever truncated.")
@click.option("--use", "use", is_flag=True,
              help="Write each recorded kernel's MEP from its capture (complete: launch, sizes, scalars, data, "
                   "build flags); an existing mep.yaml is kept as mep.yaml.before-capture. Without a command: "
                   "from the last capture.")
@click.option("--compare", "compare_only", is_flag=True,
              help="Compare the static MEP (mep.yaml.before-capture, mep.yaml, or static completion now) with the "
                   "last capture and print every disagreement (launch, sizes, counts, roles).")
@click.option("--exit-after", "exit_after", is_flag=True,
              help="Stop the application once every chosen kernel is recorded instead of letting it finish.")
@click.option("--measure-overhead", "measure", is_flag=True,
              help="Also run the application without the injector and report the capture's cost in wall time.")
@click.option("--timeout", type=float, default=None, help="Stop the application after this many seconds.")
@click.option("--rebuild", is_flag=True, help="Rebuild the injector even if a cached build exists.")
@click.option("--gpu-times", "gpu_times_only", is_flag=True,
              help="Record nothing: run the application once and print every kernel's launches and time on the GPU "
                   "(CUPTI activity records), as `mepgen tune` measures the application before and after patching.")
@click.option("--json", "as_json", is_flag=True, help="Print the outcome per kernel as JSON.")
@click.pass_obj
def capture(obj, kernel, command, app, kernel_list, every, launch, longest, after_ms, max_bytes, compress_above, use,
            compare_only, exit_after, measure, timeout, rebuild, gpu_times_only, as_json):
    """Run the application once and record, for one launch of each chosen kernel (KERNEL, --kernels K1,K2 or
    --all), its exact launch, its argument bytes and every device allocation reachable from them (pointer
    arguments, pointers inside structs passed by value and inside buffers), before and after the launch, into
    each MEP's data/captured/. With --use, write each kernel's complete MEP from its record.

    The application is not rebuilt: a CUPTI library injected through CUDA_INJECTION64_PATH sees every launch.
    KERNEL is a name from the inventory (cg::spmv_csr), optionally an instantiation (cg::axpy<float>), or a
    mangled name.
    """

    if gpu_times_only:
        command = [kernel, *command] if kernel is not None else list(command)
        if not command:
            raise MepgenError("--gpu-times runs the application: give it after `--`")
        print_profile(profile_run(command, timeout, rebuild, log=obj.log if obj is not None else None), as_json)
        return
    ws = Workspace(app) if app else Workspace.find()
    inv = inventory_mod.load(ws.inventory_path)
    command = list(command)
    if (kernel_list is not None or every) and kernel is not None:
        command, kernel = [kernel, *command], None   # with --kernels/--all the first word is the application's
    names = _chosen_names(inv, kernel, kernel_list, every)
    if longest and launch:
        raise MepgenError("--launch and --longest choose the launch two ways: give one")
    if compare_only:
        if command:
            raise MepgenError("--compare reads the last capture: give no command")
        _compare(ws, inv, [choose_kernel(inv, n) for n in names], as_json)
        return
    if not command:
        if not use:
            raise MepgenError("no application to run: give it after `--`, e.g. "
                              f"mepgen capture {names[0] if names else 'KERNEL'} -- ./app args "
                              "(or --use to write the MEP from the last capture)")
        outcomes = [_use_last(ws, inv, choose_kernel(inv, n)) for n in names]
        _report(outcomes, as_json)
        if not any(o["outcome"] == "captured" for o in outcomes):
            sys.exit(3)
        return
    outcomes = _record(obj, ws, inv, names, command, launch=launch, longest=longest, after_ms=after_ms,
                       max_bytes=parse_bytes(max_bytes), compress_above=parse_bytes(compress_above, "--compress-above"),
                       use=use, exit_after=exit_after, measure=measure, timeout=timeout, rebuild=rebuild,
                       single=kernel is not None and not kernel_list and not every)
    _report(outcomes, as_json)
    if not any(o["outcome"] == "captured" for o in outcomes):
        if len(outcomes) == 1:
            raise MepgenError(outcomes[0]["reason"], exit_code=3)
        raise MepgenError(f"none of the {len(outcomes)} kernels was captured", exit_code=3)


def _chosen_names(inv: dict, kernel: str | None, kernel_list: str | None, every: bool) -> list[str]:
    given = sum(x is not None and x is not False for x in (kernel, kernel_list, every or None))
    if given > 1:
        raise MepgenError("choose kernels one way: KERNEL, --kernels K1,K2 or --all")
    if every:       # by id: two definitions of one kernel are two entries (told apart by the binary in _record)
        return [k["id"] for k in inv["kernels"]]
    if kernel_list is not None:
        names = [n.strip() for n in kernel_list.split(",") if n.strip()]
        if not names:
            raise MepgenError("--kernels needs at least one kernel name")
        return names
    if kernel is None:
        raise MepgenError("name a kernel (`mepgen list` shows them), or pass --kernels K1,K2 or --all")
    return [kernel]


def _record(obj, ws, inv, names, command, *, launch, longest, after_ms, max_bytes, compress_above, use, exit_after,
            measure, timeout, rebuild, single) -> list[dict]:

    log = obj.log if obj is not None else (lambda msg, level=1: None)
    outcomes, plans = [], []
    choices, refused = _definitions(ws, inv, names, command, choose_kernel, log)
    outcomes += refused
    if single and refused and not choices:
        raise MepgenError(refused[0]["reason"])
    for choice in choices:
        try:
            plans.append(make_plan(choice, Path("."), app_root=ws.app_root, launch=launch, after_ms=after_ms,
                                   max_bytes=max_bytes, exit_after=exit_after, longest=longest))
        except MepgenError as e:
            if single:
                raise
            outcomes.append({"kernel": choice.kernel["qualified_name"], "outcome": "refused", "reason": str(e)})
    if not plans:
        return outcomes
    with progress("building the capture injector (first use only)"):
        injector = build.build_injector(force=rebuild, log=log)
    if injector.built:
        click.echo(f"built the capture injector for CUDA {injector.toolkit.version}: {injector.path}", err=True)
    ws.ensure()
    ws.cache_dir.mkdir(parents=True, exist_ok=True)
    raw = Path(tempfile.mkdtemp(prefix="capture-", dir=ws.cache_dir))
    run_plan = RunPlan(raw, plans, after_ms=after_ms, max_bytes=max_bytes, exit_after=exit_after)
    try:
        plain = run_plain(command, timeout) if measure else None
        run = launcher.run_injected(command, injector.path, run_plan, raw, timeout)
        extra = {"app": {"command": command, "cwd": str(Path.cwd()), "exit_code": run.exit_code,
                         "wall_s": round(run.wall_s, 4), "exited_after_capture": exit_after},
                 "injector": {"path": str(injector.path), "cuda": injector.toolkit.version}}
        if plain is not None:
            extra["overhead"] = {"wall_s_plain": round(plain.wall_s, 4), "wall_s_captured": round(run.wall_s, 4),
                                 "ratio": round(run.wall_s / plain.wall_s, 4) if plain.wall_s > 0 else None,
                                 "plain_exit_code": plain.exit_code}
        # the application's own output went straight to the terminal: no bar while it ran; one now, over the records
        with progress(f"converting {len(plans)} record(s)", total=len(plans)) as bar:
            for t, plan in enumerate(plans):
                bar.note(f"converting the record of {plan.choice.kernel['qualified_name']}")
                outcomes.append(_one_record(ws, inv, raw, run, t, plan, extra, compress_above, use))
                bar.advance()
    finally:
        shutil.rmtree(raw, ignore_errors=True)
    if run.exit_code and not exit_after:
        click.echo(f"mepgen: note: the application exited with {run.exit_code}", err=True)
    return outcomes


def _one_record(ws, inv, raw: Path, run, t: int, plan, extra: dict, compress_above: int, use: bool) -> dict:
    """What became of kernel `t` of the run: its record converted into the MEP's data/captured/ (and its MEP with
    --use), or why not."""
    k = plan.choice.kernel
    out = {"kernel": k["qualified_name"], "outcome": outcome_kind(run, t)}
    if out["outcome"] != "captured":
        out["reason"] = explain_failure(run, plan, t)
        return out
    mep_dir = ws.mep_dir(k["id"])
    captured = mep_dir / "data" / "captured"
    spec = None
    if (mep_dir / "mep.yaml").is_file():
        try:
            spec = load_spec(mep_dir / "mep.yaml")
        except MepgenError:
            spec = None
    try:
        manifest = convert(raw / f"k{t}", plan, captured, spec=spec, typedefs=typedef_map(ws.app_root, k),
                           extra={**extra, **gpu_times(run, t, raw / f"k{t}")},
                           compress_above=compress_above)
    except MepgenError as e:
        return {**out, "outcome": "refused", "reason": f"the record cannot be read: {e}"}
    except OSError as e:    # a full disk (numpy says "Not enough free space" with no errno), permissions: this
        # kernel's record is lost, the others are converted; its earlier data/captured/, if any, is as it was
        shutil.rmtree(captured.parent / f".{captured.name}.tmp", ignore_errors=True)
        why = os_error_message(e) if e.filename is not None else (e.strerror or str(e))
        return {**out, "outcome": "failed", "reason": f"writing its record into {captured} failed ({why}); free "
                "space (or capture less with --max-bytes), then capture it again"}
    out.update(_summary(manifest), manifest=str(captured / "manifest.json"))
    if use:
        out.update(_write_mep(ws, inv, k, manifest))
    return out


def gpu_times(run, t: int, raw_dir: Path) -> dict:
    """The recorded launch's own time on the GPU (CUPTI activity record: start to end of the kernel, without its
    submission) and, for the function it launched, every launch's in the run: launches, total, min, max."""
    gpu_ms = next((x["gpu_ms"] for x in run.target(t) if isinstance(x.get("gpu_ms"), (int, float)) and x["gpu_ms"] > 0),
                   None)
    name = ""
    try:
        name = json.loads((raw_dir / "capture.json").read_text()).get("demangled", "")
    except (OSError, json.JSONDecodeError):
        pass            # no readable record: no name, so no per-function totals (the launch's gpu_ms stays)
    launches = total = 0
    lo, hi = None, None
    for st in run.statuses:
        v = ((st.get("gpu") or {}).get("kernels") or {}).get(name)
        if v:
            launches, total = launches + v[0], total + v[1]
            lo = v[2] if lo is None else min(lo, v[2])
            hi = v[3] if hi is None else max(hi, v[3])
    every = {"launches": launches, "total_ms": total / 1e6, "min_ms": lo / 1e6, "max_ms": hi / 1e6,
             "configs": configs_of(run.statuses, name)} if launches else None
    return {"app_gpu_ms": gpu_ms, "app_gpu": every}


def _definitions(ws, inv, names, command, choose_kernel, log) -> tuple[list, list[dict]]:
    """The kernels to record, each the definition the application runs: a definition the build does not compile
    is refused (extract/definitions.py), and definitions the build files could not tell apart are told apart by
    the application's binary (capture/definition.py); those it cannot tell apart are all refused, the candidates
    listed."""
    wanted = []
    for n in names:
        twins = [k for k in inv["kernels"] if k["qualified_name"] == n and k.get("definition", {}).get("ambiguous")]
        wanted += [KernelChoice(k) for k in twins] if len(twins) > 1 else [choose_kernel(inv, n)]
    choices, refused, groups = [], [], {}
    for c in wanted:
        k = c.kernel
        if k.get("not_built"):
            refused.append({"kernel": k["qualified_name"], "id": k["id"], "outcome": "refused",
                            "reason": f"not the definition the application runs: {k['not_built']}"})
        elif k.get("definition", {}).get("ambiguous"):
            groups.setdefault(k["qualified_name"], []).append(c)
        else:
            choices.append(c)
    binary = find_binary(command, Path.cwd()) if groups else None
    for q, group in groups.items():
        every = [x for x in inv["kernels"] if x["qualified_name"] == q and x.get("definition", {}).get("ambiguous")]
        r = resolve(binary, ws.app_root, inv, every)
        log(f"{q}: {r.reason}")
        for c in {x.kernel["id"]: x for x in group}.values():
            k = c.kernel
            if r.chosen is not None and r.chosen["id"] == k["id"]:
                choices.append(c)
            else:
                why = (f"not the definition the application runs: {r.reason}" if r.chosen is not None else
                       f"cannot tell which definition the application runs, so none is recorded: {r.reason}")
                refused.append({"kernel": k["qualified_name"], "id": k["id"], "outcome": "refused", "reason": why})
    return choices, refused


def _write_mep(ws, inv, kernel, manifest) -> dict:
    try:
        w = write_captured_mep(ws, inv, kernel, manifest)
    except MepgenError as e:
        return {"mep": None, "mep_error": str(e)}
    return {"mep": str(w.path), "complete": not w.todo, "todo": w.todo, "notes": w.notes,
            "static_backup": str(w.backup) if w.backup else None}


def _use_last(ws, inv, choice) -> dict:
    k = choice.kernel
    try:
        manifest = load_manifest(ws.mep_dir(k["id"]) / "data" / "captured")
    except MepgenError as e:
        return {"kernel": k["qualified_name"], "outcome": "not_captured", "reason": str(e)}
    return {"kernel": k["qualified_name"], "outcome": "captured", **_summary(manifest),
            **_write_mep(ws, inv, k, manifest)}


def _static_spec(ws, inv, kernel):
    """The static MEP of `kernel`: the one static completion wrote (kept beside a captured one), else static
    completion now (nothing written)."""
    mep_dir = ws.mep_dir(kernel["id"])
    for path in (mep_dir / ("mep.yaml" + BACKUP_SUFFIX), mep_dir / "mep.yaml"):
        if path.is_file():
            text = path.read_text()
            if "written by `mepgen capture`" not in text:
                spec = load_spec(path)
                notes = notes_from_comments(text)
                for p in spec.params:       # mep.yaml keeps each value's note as the comment above it
                    p.note = p.note or notes.get(p.name)
                return spec, str(path)
    try:
        spec = static_completion(ws, inv, kernel)
    except MepgenError as e:
        raise MepgenError(f"{e}, so there is nothing to compare the capture with") from None
    return spec, "static completion (mepgen mep, not written)"


def _compare(ws, inv, choices, as_json: bool) -> None:
    results = []
    for choice in choices:
        k = choice.kernel
        try:
            manifest = load_manifest(ws.mep_dir(k["id"]) / "data" / "captured")
            static, source = _static_spec(ws, inv, k)
        except MepgenError as e:
            if len(choices) == 1:
                raise
            results.append({"kernel": k["qualified_name"], "error": str(e)})
            if not as_json:
                click.echo(f"{k['qualified_name']}: not compared: {e}")
            continue
        found = compare(static, manifest)
        real = [d for d in found if not d.placeholder]
        results.append({"kernel": k["qualified_name"], "static": source, "agree": not found,
                        "disagreements": [vars(d) for d in found],
                        "real": len(real), "static_placeholders": len(found) - len(real)})
        if not as_json:
            state = "static and captured agree" if not found else f"{len(real)} disagreement(s)" + (
                f", {len(found) - len(real)} where static completion has a placeholder (a todo)"
                if len(found) > len(real) else "")
            click.echo(f"{k['qualified_name']}: {state} (static: {source}; captured launch {manifest['launch_index']})")
            for d in found:
                click.echo(f"  {d.line()}")
    if as_json:
        click.echo(json.dumps(results, indent=1))


def _report(outcomes: list[dict], as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(outcomes, indent=1))
        return
    for o in outcomes:
        if o["outcome"] != "captured":
            click.echo(f"{o['kernel']}: {o['outcome'].replace('_', ' ')}: {o['reason']}")
            continue
        click.echo(f"{o['kernel']}: captured {o['launched_as']} (launch {o['launch_index']}) grid {o['grid']} block "
                   f"{o['block']} shared {o['shared_mem']} B: {o['bytes_captured'] / 2**20:.1f} MiB in "
                   f"{o['allocations']} allocation(s), {o['relocations']} device pointer(s) inside")
        for p in o["params"]:
            for note in p.get("notes", []):
                click.echo(f"  {p['name']}: note: {note}")
        if "mep" in o:
            if o["mep"] is None:
                click.echo(f"  MEP not written: {o['mep_error']}")
            else:
                state = "complete" if o["complete"] else f"{len(o['todo'])} todo(s): " + "; ".join(o["todo"])
                click.echo(f"  MEP {o['mep']}: {state}")
                for n in o.get("notes", []):
                    click.echo(f"  note: {n}")


def _summary(m: dict) -> dict:
    return {"kernel": m["kernel"], "launched_as": m["launched_as"], "launch_index": m["launch_index"],
            "selection": m.get("selection"), "kernel_ms": m.get("kernel_ms"), "app_gpu_ms": m.get("app_gpu_ms"),
            "app_gpu": m.get("app_gpu"),
            "grid": m["grid"], "block": m["block"], "shared_mem": m["shared_mem"],
            "bytes_captured": m["bytes_captured"], "capture_ms": m["capture_ms"],
            "allocations": len(m.get("allocations", [])), "relocations": len(m.get("relocations", [])),
            "params": [{k: p.get(k) for k in ("name", "kind", "dtype", "count", "written", "value", "notes")
                        if p.get(k) is not None} for p in m["params"]],
            "constants": [c["name"] for c in m["constants"]], "overhead": m.get("overhead")}
