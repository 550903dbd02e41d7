"""The `mepgen mep` command."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from ..config import load_config
from ..errors import MepgenError
from ..workspace import Workspace
from .generate import generate, refresh as do_refresh
from ..llm.client import ChatClient, LLMSettings
from .ask_llm import TodoAsker

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
        "kernel": r.kernel, "outcome": "needs_person" if s.todo else "ready", "path": str(r.path), "sizes": s.sizes,
        "params": [{"name": p.name, "role": p.role, "dtype": p.dtype, "count": p.count, "value": p.value,
                    "init": p.init.to_dict() if p.init else None} for p in s.params],
        "launch": {"grid": s.launch.grid, "block": s.launch.block, "shared_mem": s.launch.shared_mem,
                   "callee": s.launch.callee},
        "chain": s.to_dict().get("chain", []), "buffers": s.to_dict().get("buffers", []),
        "todo": [{"field": t.field, "reason": t.reason, "kind": t.kind} for t in s.todo],
        "notes": r.notes, "backup": r.backup,
        "llm": r.llm.to_dict() if r.llm is not None else None,
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
@click.option("--ask-llm/--no-ask-llm", "ask_llm", default=None,
              help="Ask the configured LLM (llm.base_url) to propose the fields mepgen could not infer; its values "
                   "are validated like a person's edit and marked in mep.yaml for review (default: mep.ask_llm).")
@click.option("--json", "as_json", is_flag=True, help="Print what was written as JSON.")
@click.pass_obj
def mep(obj, kernels, every, force, refresh, keep_edits, chain, sizes, app, ask_llm, as_json):
    """Cut KERNEL(s) out into Minimal Executable Programs under .mepgen/meps/<kernel id>/.

    Exits 3 when mep.yaml has fields mepgen could not infer (they are named; the MEP is still written) or, with
    several kernels, when some got no MEP (each is named with the reason; the others are written).
    With --ask-llm an LLM proposes them first; what it proposed is named, and refused values stay todo.
    """

    ws = Workspace(app) if app else Workspace.find()
    if refresh and (force or sizes or chain):
        raise MepgenError("--refresh keeps mep.yaml as it is: edit sizes or the chain there instead of "
                          "--size/--chain/--force")
    if refresh and ask_llm:
        raise MepgenError("--refresh keeps mep.yaml as it is: --ask-llm applies to a plain run or --force")
    log = obj.log if obj is not None else (lambda m, level=1: None)
    if keep_edits and (force or refresh):
        raise MepgenError("--keep-edits excludes --force and --refresh")
    ask = None if refresh else _asker(ws, ask_llm)
    # several kernels: each gets its own outcome, one that cannot have an MEP does not stop the others
    failed = [] if every or len(kernels) > 1 else None
    with ws.lock("mep"):
        results = do_refresh(ws, list(kernels), every) if refresh else \
            generate(ws, list(kernels), every, force, sizes, log=log, keep_edits=keep_edits, chain=chain, ask=ask,
                     failed=failed)
    failed = failed or []
    if as_json:
        click.echo(json.dumps([_summary(r) for r in results] + [
            {"kernel": f.kernel, "outcome": "internal_error" if f.internal else "cannot", "reason": f.reason}
            for f in failed], indent=1))
    else:
        for r in results:
            _print(r)
        for f in failed:
            click.echo(f"{f.kernel}: {'mepgen failed on it (a bug, please report)' if f.internal else 'no MEP'}: "
                       f"{f.reason}")
    proposed = [(r.kernel, p.field) for r in results if r.llm is not None for p in r.llm.accepted]
    if proposed:
        fields = "; ".join(f"{k}: {f}" for k, f in proposed)
        click.echo(f"mepgen: the LLM proposed (review them in mep.yaml): {fields}", err=True)
    todo = [(r.kernel, t) for r in results for t in r.spec.todo]
    if todo:
        fields = "; ".join(f"{k}: {t.field}" for k, t in todo)
        click.echo(f"mepgen: mep.yaml needs a person for: {fields}", err=True)
    cannot = [f for f in failed if not f.internal]
    if cannot:
        click.echo(f"mepgen: no MEP for {len(cannot)} kernel(s): "
                   + "; ".join(f"{f.kernel}: {f.reason}" for f in cannot), err=True)
    internal = [f for f in failed if f.internal]
    if internal:
        click.echo("mepgen: internal error on " + "; ".join(f"{f.kernel}: {f.reason}" for f in internal)
                   + f" (the other {len(results)} MEP(s) were written; rerun with -v for details)", err=True)
        sys.exit(70)
    if todo or cannot:
        sys.exit(EXIT_TODO)


def _asker(ws: Workspace, ask_llm: bool | None):
    """The LLM asker of `--ask-llm` (or `mep.ask_llm: true`), None when not asked for."""
    cfg = load_config(ws.app_root)
    if not (cfg["mep"]["ask_llm"] if ask_llm is None else ask_llm):
        return None
    settings = LLMSettings.from_config(cfg)
    if settings is None:
        raise MepgenError("--ask-llm (mep.ask_llm) needs an LLM endpoint: export OPENAI_BASE_URL and MEPGEN_LLM_MODEL, "
                          "or set llm.base_url and llm.model in mepgen's config.yaml (docs/llm.md)")
    return TodoAsker(ChatClient(settings), warn=lambda m: click.echo(f"mepgen: warning: {m}", err=True))


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
    if r.llm is not None:
        for p in r.llm.accepted:
            click.echo(f"  LLM {r.llm.model} proposed {p.field} = {p.value!r}: accepted, review it")
        for p in r.llm.refused:
            click.echo(f"  LLM {r.llm.model} proposed {p.field} = {p.value!r}: refused, {p.refused}")
    for t in s.todo:
        click.echo(f"  TODO {t.field}: {t.reason}")
