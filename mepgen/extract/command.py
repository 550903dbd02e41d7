"""`mepgen extract` and `mepgen list`: the inventory of an application's kernels, and its ranked table."""
from __future__ import annotations

from pathlib import Path

import click

from ..clioptions import app_folder, emit_json
from ..inventory import load
from ..listing import kernel_rows, kernel_table
from ..workspace import Workspace
from .run import ExtractOptions, extract as run_extract


@click.command()
@click.argument("app_arg", metavar="[APP]", required=False, type=click.Path(path_type=Path))
@click.option("-C", "--app", "app", type=click.Path(path_type=Path), default=None,
              help="The application's folder (also as the argument APP; default: the application whose .mepgen/ "
                   "is found from the current folder upwards, else the current folder).")
@click.option("-p", "--compile-commands", "compile_commands", type=click.Path(path_type=Path),
              help="compile_commands.json, or the folder holding it (default: APP/ and its build folders).")
@click.option("-I", "include_dirs", multiple=True, help="Extra include folder for parsing (repeatable).")
@click.option("-D", "defines", multiple=True, help="Extra macro definition NAME[=VALUE] (repeatable).")
@click.option("--profile", type=click.Path(path_type=Path),
              help="Rank hotspots by measured time: an Nsight Systems report (.nsys-rep, or its cuda_gpu_kern_sum "
                   "CSV) or an Nsight Compute report (.ncu-rep, or its raw CSV).")
@click.option("-j", "--jobs", type=click.IntRange(min=0), default=0, show_default=True,
              help="Parallel parser processes (0: one per core).")
@click.option("--no-cache", is_flag=True, help="Reparse every file, ignoring .mepgen/cache.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary instead of a table.")
@click.pass_obj
def extract(obj, app_arg, app, compile_commands, include_dirs, defines, profile, jobs, no_cache, as_json):
    """Find every kernel, launch site and dependency of the application in APP and rank the hotspots.

    Writes APP/.mepgen/inventory.json.
    """

    app = app_folder(app_arg, app)

    opts = ExtractOptions(compile_commands=compile_commands, include_dirs=list(include_dirs),
                          defines=list(defines), profile=profile, jobs=jobs, use_cache=not no_cache)
    inv = run_extract(app, opts, log=obj.log)
    summary = {
        "inventory": str(Path(inv["app_root"]) / ".mepgen" / "inventory.json"),
        "kernels": len(inv["kernels"]),
        "launch_sites": sum(len(k["launch_sites"]) for k in inv["kernels"]),
        "translation_units": len(inv["translation_units"]),
        "skipped_files": [s["file"] for s in inv["skipped"]],
        "files_with_host_errors": [s["file"] for s in inv.get("tolerated", [])],
        "flags_source": inv["flags_source"],
        "build_files": inv.get("build_files"),
        "skipped": [{"file": s["file"], "errors": s["errors"], "first": s["diagnostics"][:1]} for s in inv["skipped"]],
        "over_budget": inv.get("over_budget", []),
        "ranking_basis": inv["ranking_basis"],
    }
    if as_json:
        emit_json(summary)
        return
    click.echo(kernel_table(inv))
    click.echo(f"\n{summary['kernels']} kernels, {summary['launch_sites']} launch sites in "
               f"{summary['translation_units']} translation units; flags: {summary['flags_source']}")
    click.echo(f"ranking: {summary['ranking_basis']}")
    if inv["skipped"]:
        click.echo(f"skipped {len(inv['skipped'])} file(s) with errors in a kernel or what it uses (their kernels "
                   "are not in the inventory):")
        for s in inv["skipped"]:
            first = s["diagnostics"][0] if s["diagnostics"] else None
            where = f"{first['file']}:{first['line']}: {first['message']}" if first else "no diagnostic"
            click.echo(f"  {s['file']}: {s['errors']} errors, first {where}")
    for o in inv.get("over_budget", []):
        click.echo(f"left out {o['kernel']} ({o['file']}:{o['line']}): {o['reason']}")
    if inv.get("tolerated"):
        click.echo(f"kept {len(inv['tolerated'])} file(s) whose errors are outside their kernels (host code, headers "
                   "on no include path): " + ", ".join(s["file"] for s in inv["tolerated"]) + " (details with -v)")
    if inv.get("profile_unmatched"):
        click.echo(f"profiled kernels not in the sources: {', '.join(inv['profile_unmatched'])}")
    click.echo(f"wrote {summary['inventory']}")


@click.command("list")
@click.option("-C", "--app", "app", type=click.Path(path_type=Path), default=None,
              help="The application's folder (default: found from the current folder upwards).")
@click.option("--json", "as_json", is_flag=True, help="Print the ranked kernels as JSON.")
@click.pass_obj
def list_(obj, app, as_json):
    """Print the ranked kernels of the inventory as a table."""

    ws = Workspace(app) if app else Workspace.find()
    inv = load(ws.inventory_path)
    if as_json:
        emit_json(kernel_rows(inv))
    else:
        click.echo(kernel_table(inv))
