"""`mepgen capture KERNEL [options] -- ./app args...`: record one real launch's inputs and outputs for the MEP."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import click

from ..errors import MepgenError

_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_bytes(text: str) -> int:
    """`4294967296`, `512M`, `8G`, `8GiB` -> bytes."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*", str(text), re.I)
    if not m:
        raise MepgenError(f"--max-bytes: '{text}' is not a size (e.g. 4294967296, 512M, 8G)")
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


@click.command("capture")
@click.argument("kernel")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
@click.option("-C", "--app", "app", type=click.Path(path_type=Path), default=None,
              help="The application's folder (default: found from the current folder upwards).")
@click.option("--launch", "launch", type=int, default=0, show_default=True,
              help="Which launch of the kernel to capture, counting from 0 (after --after-ms when given).")
@click.option("--after-ms", "after_ms", type=float, default=None,
              help="Only count launches that start this many milliseconds after the application started.")
@click.option("--max-bytes", "max_bytes", default="4G", show_default=True,
              help="Refuse launches whose buffers' allocations add up to more than this (512M, 8G, ...).")
@click.option("--use", "use", is_flag=True,
              help="Point the MEP's mep.yaml at the captured data (backup kept). Without a command: use the last capture.")
@click.option("--exit-after", "exit_after", is_flag=True,
              help="Stop the application right after the capture instead of letting it finish.")
@click.option("--measure-overhead", "measure", is_flag=True,
              help="Also run the application without the injector and report the capture's cost in wall time.")
@click.option("--timeout", type=float, default=None, help="Stop the application after this many seconds.")
@click.option("--rebuild", is_flag=True, help="Rebuild the injector even if a cached build exists.")
@click.option("--json", "as_json", is_flag=True, help="Print the manifest summary as JSON.")
@click.pass_obj
def capture(obj, kernel, command, app, launch, after_ms, max_bytes, use, exit_after, measure, timeout, rebuild,
            as_json):
    """Run the application once and record, for one launch of KERNEL, every buffer it reads (before the
    launch) and writes (after it), its arguments, its __constant__ data and its launch configuration, into the
    MEP's data/captured/ (before/ holds `<param>.npy` as the harness reads them, after/ the reference outputs).

    The application is not rebuilt: a CUPTI library injected through CUDA_INJECTION64_PATH sees every launch.
    KERNEL is a name from the inventory (cg::spmv_csr), optionally an instantiation (cg::axpy<float>), or a
    mangled name.
    """
    from .. import inventory as inventory_mod
    from ..spec import load_spec
    from ..workspace import Workspace
    from .build import build_injector
    from .convert import convert, load_manifest
    from .launcher import explain_failure, run_injected, run_plain
    from .names import choose_kernel
    from .plan import make_plan, typedef_map
    from .use import apply_capture

    log = obj.log if obj is not None else (lambda msg, level=1: None)
    ws = Workspace(app) if app else Workspace.find()
    inv = inventory_mod.load(ws.inventory_path)
    choice = choose_kernel(inv, kernel)
    mep_dir = ws.mep_dir(choice.kernel["id"])
    captured = mep_dir / "data" / "captured"
    command = list(command)

    if not command:
        if not use:
            raise MepgenError("no application to run: give it after `--`, e.g. "
                              f"mepgen capture {choice.display} -- ./app args (or --use to apply the last capture)")
        report = apply_capture(mep_dir, load_manifest(captured))
        _refresh_mep(ws, choice.kernel["qualified_name"], report)
        _print_use(report, as_json)
        return

    plan = make_plan(choice, Path("."), app_root=ws.app_root, launch=launch, after_ms=after_ms,
                     max_bytes=parse_bytes(max_bytes), exit_after=exit_after)
    injector = build_injector(force=rebuild, log=log)
    if injector.built:
        click.echo(f"built the capture injector for CUDA {injector.toolkit.version}: {injector.path}", err=True)
    spec = None
    if (mep_dir / "mep.yaml").is_file():
        try:
            spec = load_spec(mep_dir / "mep.yaml")
        except MepgenError as e:
            click.echo(f"mepgen: note: ignoring the MEP's mep.yaml for dtypes ({e})", err=True)

    ws.ensure()
    ws.cache_dir.mkdir(parents=True, exist_ok=True)
    raw = Path(tempfile.mkdtemp(prefix="capture-", dir=ws.cache_dir))
    plan.out_dir = raw
    try:
        plain = run_plain(command, timeout) if measure else None
        run = run_injected(command, injector.path, plan, raw, timeout)
        if not run.captured:
            raise MepgenError(explain_failure(run, plan), exit_code=3)
        extra = {"app": {"command": command, "cwd": str(Path.cwd()), "exit_code": run.exit_code,
                         "wall_s": round(run.wall_s, 4), "exited_after_capture": exit_after},
                 "injector": {"path": str(injector.path), "cuda": injector.toolkit.version}}
        if plain is not None:
            extra["overhead"] = {"wall_s_plain": round(plain.wall_s, 4), "wall_s_captured": round(run.wall_s, 4),
                                 "ratio": round(run.wall_s / plain.wall_s, 4) if plain.wall_s > 0 else None,
                                 "plain_exit_code": plain.exit_code}
        manifest = convert(raw, plan, captured, spec=spec, typedefs=typedef_map(ws.app_root, choice.kernel),
                           extra=extra)
    finally:
        shutil.rmtree(raw, ignore_errors=True)

    report = apply_capture(mep_dir, manifest) if use and spec is not None else None
    if report is not None:
        _refresh_mep(ws, choice.kernel["qualified_name"], report)
    if as_json:
        out = {"manifest": str(captured / "manifest.json"), **_summary(manifest)}
        if report is not None:
            out["use"] = {"spec": str(report.spec_path), "backup": str(report.backup), "changes": report.changes,
                          "skipped": report.skipped}
        click.echo(json.dumps(out, indent=1))
    else:
        _print_summary(manifest, captured)
        if report is not None:
            _print_use(report, False)
    if use and spec is None:
        click.echo(f"no MEP for {choice.kernel['qualified_name']} yet: run `mepgen mep {choice.kernel['qualified_name']}`, "
                   f"then `mepgen capture {choice.display} --use`", err=True)
    if run.exit_code and not exit_after:
        click.echo(f"mepgen: note: the application exited with {run.exit_code} after the capture", err=True)


def _refresh_mep(ws, qualified: str, report) -> None:
    """Render harness.cu and data/in again from the edited mep.yaml (the harness bakes counts and values in),
    through `mepgen mep --refresh`: the MEP stage owns its rendering."""
    cmd = [sys.executable, "-m", "mepgen.cli", "mep", qualified, "--refresh", "-C", str(ws.app_root)]
    here = str(Path(__file__).resolve().parents[2])  # this mepgen, installed or run from a checkout
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [here, os.environ.get("PYTHONPATH")]))}
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode == 0:
        report.changes.append("harness.cu, Makefile and data/in rendered again (mepgen mep --refresh)")
    else:
        why = (r.stderr.strip().splitlines() or ["no output"])[-1]
        report.skipped.append(f"re-rendering the MEP: `mepgen mep {qualified} --refresh` failed: {why}")


def _summary(m: dict) -> dict:
    return {"kernel": m["kernel"], "launched_as": m["launched_as"], "launch_index": m["launch_index"],
            "grid": m["grid"], "block": m["block"], "shared_mem": m["shared_mem"],
            "bytes_captured": m["bytes_captured"], "capture_ms": m["capture_ms"],
            "params": [{k: p.get(k) for k in ("name", "kind", "dtype", "count", "written", "value", "notes")
                        if p.get(k) is not None} for p in m["params"]],
            "constants": [c["name"] for c in m["constants"]], "overhead": m.get("overhead")}


def _print_summary(m: dict, captured: Path) -> None:
    click.echo(f"captured {m['launched_as']} (launch {m['launch_index']}) grid {m['grid']} block {m['block']} "
               f"shared {m['shared_mem']} B: {m['bytes_captured'] / 2**20:.1f} MiB in {m['capture_ms']:.0f} ms")
    for p in m["params"]:
        if p["kind"] == "buffer":
            what = f"{p['dtype']}[{p['count']}]" + (f" at +{p['offset_elements']}" if p["offset_bytes"] else "")
            click.echo(f"  {p['name']:<16} {what:<28} {'written' if p['written'] else 'read only'}")
        elif p["kind"] == "value":
            click.echo(f"  {p['name']:<16} = {p['value'] if p['value'] is not None else '0x' + p['bytes_hex']}")
        else:
            click.echo(f"  {p['name']:<16} null pointer")
        for note in p.get("notes", []):
            click.echo(f"      note: {note}")
    for c in m["constants"]:
        click.echo(f"  {c['name']:<16} __constant__ {c['dtype']}[{c['count']}]")
    if m.get("overhead"):
        o = m["overhead"]
        click.echo(f"application wall time: {o['wall_s_plain']:.2f} s plain, {o['wall_s_captured']:.2f} s with capture "
                   f"(x{o['ratio']})")
    click.echo(f"wrote {captured / 'manifest.json'}")


def _print_use(report, as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps({"spec": str(report.spec_path), "backup": str(report.backup),
                               "changes": report.changes, "skipped": report.skipped}, indent=1))
        return
    for c in report.changes:
        click.echo(f"  mep.yaml: {c}")
    for s in report.skipped:
        click.echo(f"  mep.yaml: kept {s}")
    click.echo(f"updated {report.spec_path} (original kept as {report.backup.name})")
