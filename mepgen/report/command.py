"""`mepgen report`: the HTML page of an optimize run or batch."""
from __future__ import annotations

import json
from pathlib import Path

import click
from ..errors import MepgenError
from ..workspace import Workspace, write_atomic
from .load import choose
from .page import render


@click.command("report")
@click.option("-C", "--app", "app", type=click.Path(path_type=Path), default=None,
              help="The application's folder (default: found from the current folder upwards).")
@click.option("--run", "run", default=None,
              help="KERNEL (its newest run) or KERNEL/RUN, as under .mepgen/runs/ (default: the newest run or batch).")
@click.option("--batch", "batch", default=None, help="The batch NAME of `mepgen optimize --all` (.mepgen/batches/).")
@click.option("-o", "--output", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Where to write the page (default: .mepgen/reports/NAME.html).")
@click.option("--json", "as_json", is_flag=True, help="Print what was written as JSON.")
def report(app, run, batch, output, as_json):
    """Write one self-contained HTML page for an optimize run or batch: the table, each kernel's trajectory
    (speedup per candidate, verified or rejected), its place on the roofline, the fidelity ratio and the patch
    state when recorded, and the application's speedup when `mepgen tune` ran."""

    if app is not None and not Path(app).is_dir():
        raise MepgenError(f"{app}: no such directory")
    ws = Workspace(app) if app else Workspace.find()
    rep = choose(ws, run, batch)
    html = render(rep)
    out = output or ws.root / "reports" / (rep.name.replace("/", "--") + ".html")
    out.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(out, html)
    if as_json:
        click.echo(json.dumps({"report": str(out), "kind": rep.kind, "name": rep.name,
                               "kernels": [k.kernel for k in rep.kernels], "tune": rep.tune is not None}, indent=1))
    else:
        click.echo(f"wrote {out} ({rep.kind} {rep.name}, {len(rep.kernels)} kernel(s)"
                   f"{', with the tune report' if rep.tune else ''})")
