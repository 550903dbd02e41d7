"""The `mepgen mep` command."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from ..errors import MepgenError
from ..workspace import Workspace

EXIT_TODO = 3


def _size(ctx, param, values) -> dict[str, int]:
    out = {}
    for v in values:
        name, sep, num = v.partition("=")
        try:
            out[name.strip()] = int(num, 0)
        except ValueError:
            raise click.BadParameter(f"'{v}' is not SYM=INTEGER") from None
        if not sep or not name.strip():
            raise click.BadParameter(f"'{v}' is not SYM=INTEGER")
    return out


def _summary(r) -> dict:
    s = r.spec
    return {
        "kernel": r.kernel, "path": str(r.path), "sizes": s.sizes,
        "params": [{"name": p.name, "role": p.role, "dtype": p.dtype, "count": p.count, "value": p.value,
                    "init": p.init.to_dict() if p.init else None} for p in s.params],
        "launch": {"grid": s.launch.grid, "block": s.launch.block, "shared_mem": s.launch.shared_mem,
                   "callee": s.launch.callee},
        "chain": s.to_dict().get("chain", []), "buffers": s.to_dict().get("buffers", []),
        "todo": [{"field": t.field, "reason": t.reason} for t in s.todo],
        "notes": r.notes, "backup": r.backup,
    }


@click.command("mep")
@click.argument("kernels", nargs=-1)
@click.option("--all", "every", is_flag=True, help="Every kernel of the inventory.")
@click.option("--force", is_flag=True, help="Overwrite a hand-edited mep.yaml (a backup is kept).")
@click.option("--refresh", is_flag=True,
              help="Keep mep.yaml and kernel.cu; validate mep.yaml and render harness.cu, Makefile and data/in again.")
@click.option("--keep-edits", is_flag=True,
              help="Like a plain run, but a kernel whose mep.yaml was edited by hand is refreshed from it instead "
                   "(what `make optimize` uses).")
@click.option("--chain", is_flag=True,
              help="Also run the earlier launches (same host function) whose output the kernel reads, before it, "
                   "as the application does (mep.yaml `chain`); without it they are only named in a note.")
@click.option("--size", "sizes", multiple=True, callback=_size, metavar="SYM=N",
              help="Set a size symbol (repeatable), e.g. --size N=4194304.")
@click.option("-C", "--app", "app", type=click.Path(path_type=Path), default=None,
              help="The application's folder (default: found from the current folder upwards).")
@click.option("--json", "as_json", is_flag=True, help="Print what was written as JSON.")
@click.pass_obj
def mep(obj, kernels, every, force, refresh, keep_edits, chain, sizes, app, as_json):
    """Cut KERNEL(s) out into Minimal Executable Programs under .mepgen/meps/<kernel id>/.

    Exits 3 when mep.yaml has fields mepgen could not infer (they are named; the MEP is still written).
    """
    from .generate import generate, refresh as do_refresh

    ws = Workspace(app) if app else Workspace.find()
    if refresh and (force or sizes or chain):
        raise MepgenError("--refresh keeps mep.yaml as it is: edit sizes or the chain there instead of "
                          "--size/--chain/--force")
    log = obj.log if obj is not None else (lambda m, level=1: None)
    if keep_edits and (force or refresh):
        raise MepgenError("--keep-edits excludes --force and --refresh")
    results = do_refresh(ws, list(kernels), every) if refresh else \
        generate(ws, list(kernels), every, force, sizes, log=log, keep_edits=keep_edits, chain=chain)
    if as_json:
        click.echo(json.dumps([_summary(r) for r in results], indent=1))
    else:
        for r in results:
            _print(r)
    todo = [(r.kernel, t) for r in results for t in r.spec.todo]
    if todo:
        fields = "; ".join(f"{k}: {t.field}" for k, t in todo)
        click.echo(f"mepgen: mep.yaml needs a person for: {fields}", err=True)
        sys.exit(EXIT_TODO)


def _print(r) -> None:
    s = r.spec
    click.echo(f"{r.kernel} -> {r.path}")
    click.echo(f"  sizes: {', '.join(f'{k}={v}' for k, v in s.sizes.items()) or 'none'}")
    for p in s.params:
        if p.role == "scalar":
            click.echo(f"  {p.name:<12} scalar = {p.value}")
        else:
            init = f", init {p.init.kind}" if p.init else ""
            click.echo(f"  {p.name:<12} {p.role:<5} {p.dtype}[{p.count}]{init}")
    click.echo(f"  launch: {s.launch.callee}<<<({', '.join(s.launch.grid)}), ({', '.join(s.launch.block)}), "
               f"{s.launch.shared_mem}>>>")
    for step in s.chain:
        bound = ", ".join(a.buffer if a.role != "scalar" else str(a.value) for a in step.args)
        click.echo(f"  chain: {step.callee}<<<({', '.join(step.grid)}), ({', '.join(step.block)}), "
                   f"{step.shared_mem}>>>({bound}) first")
    for n in r.notes:
        click.echo(f"  note: {n}")
    if r.backup:
        click.echo(f"  your edited mep.yaml was saved as {r.backup}")
    for t in s.todo:
        click.echo(f"  TODO {t.field}: {t.reason}")
