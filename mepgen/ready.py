"""`mepgen ready`: the first command a team runs on its application. Extracts when the inventory is missing
or stale, then completes every kernel's MEP into .mepgen/meps/ the way `mepgen mep` does (its own stage
functions, one kernel at a time, so that one kernel that cannot be cut out does not hide the others) and
says of each kernel:

- ready: its MEP has no todo; `mepgen run KERNEL` can build, verify and time it;
- needs a person: the MEP is written, and mep.yaml names the fields mepgen could not derive, each with why;
- cannot: no MEP (the reason: an unsupported feature, no launch site mepgen can read, a budget exceeded...).

Files that did not parse where a kernel lives are listed as well: their kernels are not in the inventory.

`ready` reports and never overwrites: a MEP written by `mepgen capture` (complete from a recorded launch), a
mep.yaml a person edited and the sizes a person gave with `mepgen mep K --size` stay; each kernel says where its
MEP came from (`origin`: capture, edited, sizes given, static). A MEP whose files would not change is not
written again (its built binary stays).
"""
from __future__ import annotations

import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path

import click

from . import exitcodes
from .clioptions import emit_json
from .errors import MepgenError
from .todokind import todo_kind
from .workspace import Workspace
from .extract import ExtractOptions, extract
from .inventory import load
from .mep.generate import Failed, check_fresh, generate
from .mep import writer

READY, NEEDS_PERSON, CANNOT = "ready", "needs a person", "cannot"


@dataclass
class KernelOutcome:
    kernel: str
    id: str
    file: str
    line: int
    outcome: str
    mep: str | None = None
    todo: list[dict] = field(default_factory=list)       # {"field", "reason", "kind"} (kind: todokind.py)
    reason: str | None = None                            # why it cannot
    internal: bool = False                               # the reason is a bug in mepgen
    origin: str | None = None                            # capture | edited | sizes given | static (None: no MEP)

    def to_json(self) -> dict:
        return {"kernel": self.kernel, "id": self.id, "file": self.file, "line": self.line,
                "outcome": self.outcome, "mep": self.mep, "todo": self.todo, "reason": self.reason,
                "internal": self.internal, "origin": self.origin}


def mep_origin(mep_dir: Path) -> str:
    """Where an MEP folder's mep.yaml came from, in the words `ready` reports."""
    o = writer.origin(mep_dir)
    if o["by"] == "capture":
        return "capture"
    if writer.yaml_edited(mep_dir):
        return "edited"
    return "sizes given" if o["sizes"] else "static"


def _inventory(app: Path | None, extract_opts, log):
    """The workspace and a fresh inventory: extracted now when there is none or the sources changed."""

    if app is not None:
        ws = Workspace(app)
    else:       # the application around the current folder, else the current folder itself (first run)
        try:
            ws = Workspace.find()
        except MepgenError:
            ws = Workspace(Path.cwd())
    asked = bool(extract_opts.compile_commands or extract_opts.include_dirs or extract_opts.defines
                 or extract_opts.profile)
    if ws.inventory_path.is_file() and not asked:     # flags given: extract with them
        inv = load(ws.inventory_path)
        try:
            check_fresh(ws, inv)
            return ws, inv, False
        except MepgenError as e:
            log(f"{e}: extracting again")
    log(f"extracting {ws.app_root}")
    inv = extract(ws.app_root, extract_opts, log=log)
    return ws, inv, True


def _name(inv: dict, k: dict) -> str:
    """How to name the kernel to the mep stage: its qualified name, or its id when overloads share it."""
    same = [x for x in inv["kernels"] if x["qualified_name"] == k["qualified_name"]]
    return k["qualified_name"] if len(same) == 1 else k["id"]


def complete_all(ws: Workspace, inv: dict, log=lambda m: None, host: dict | None = None) -> list[KernelOutcome]:
    """Complete every kernel's MEP with the mep stage in one pass (the translation units parsed once, not once
    per kernel: an application of 76 kernels in one file took minutes) and say what came of each. `host` (a
    dict to fill): the plain C/C++ sources read for value tracing, as mep/hostsrc.py summarizes them."""

    kernels = inv["kernels"]
    failed: list[Failed] = []
    try:
        found: dict = {}
        try:
            results = generate(ws, [_name(inv, k) for k in kernels], keep_edits=True, log=log, failed=failed,
                               host_report=found)
        finally:
            if host is not None and "host" in found:
                host.update(found["host"].summary())
    except MepgenError as e:        # nothing could be completed (the inventory, the project): every kernel says so
        return [KernelOutcome(**_base(k), outcome=CANNOT, reason=str(e)) for k in kernels]
    except Exception as e:  # a bug in mepgen outside any one kernel: said for each, not the end of the command
        log("".join(traceback.format_exception(e)))
        return [KernelOutcome(**_base(k), outcome=CANNOT, reason=f"internal error: {type(e).__name__}: {e}",
                              internal=True) for k in kernels]
    by_path = {Path(r.path).resolve(): r for r in results}
    by_failed = {f.kernel: f for f in failed}
    outcomes = []
    for k in kernels:
        r = by_path.get(ws.mep_dir(k["id"]).resolve())
        if r is not None:
            todo = [{"field": t.field, "reason": t.reason, "kind": t.kind or todo_kind(t.field, t.reason)}
                    for t in r.spec.todo]
            outcomes.append(KernelOutcome(**_base(k), outcome=NEEDS_PERSON if todo else READY, mep=str(r.path),
                                          todo=todo, origin=mep_origin(Path(r.path))))
            continue
        f = by_failed.get(k["id"]) or by_failed.get(k["qualified_name"])
        reason = f.reason if f else "the mep stage wrote no MEP and gave no reason"
        internal = bool(f and f.internal)
        outcomes.append(KernelOutcome(**_base(k), outcome=CANNOT,
                                      reason=f"internal error: {reason}" if internal else reason, internal=internal))
    return outcomes


def _base(k: dict) -> dict:
    return dict(kernel=k["qualified_name"], id=k["id"], file=k["file"], line=k["start_line"])


def ready(app: Path | None, extract_opts, log=lambda m: None) -> dict:
    """Every kernel's outcome, with what extraction left out; a JSON-ready report."""
    ws, inv, extracted = _inventory(app, extract_opts, log)
    host: dict = {}
    with ws.lock("ready"):          # it writes every MEP folder, as `mep --all` does (under the same lock)
        outcomes = complete_all(ws, inv, log, host)
    not_understood = []
    for s in inv.get("skipped", []):
        first = s["diagnostics"][0] if s.get("diagnostics") else None
        not_understood.append({"file": s["file"], "errors": s["errors"],
                               "first": f"{first['file']}:{first['line']}: {first['message']}" if first else None})
    counts = {o: sum(1 for x in outcomes if x.outcome == o) for o in (READY, NEEDS_PERSON, CANNOT)}
    return {
        "app": str(ws.app_root),
        "extracted_now": extracted,
        "flags_source": inv.get("flags_source"),
        "kernels": [o.to_json() for o in outcomes],
        "files_not_understood": not_understood,
        "plain_sources": host or {"read": [], "with_errors": {}, "not_parsed": {}},
        "over_budget": inv.get("over_budget", []),
        "summary": {"kernels": len(outcomes), **counts,
                    "internal_errors": sum(1 for x in outcomes if x.internal)},
    }


def render_text(report: dict) -> str:
    rows = report["kernels"]
    width = max([len("kernel")] + [len(r["kernel"]) for r in rows])
    out = [f"{'kernel':<{width}}  {'outcome':<14}  detail"]
    for r in rows:
        if r["outcome"] == READY:
            detail = r["mep"] + (f" ({r['origin']})" if r.get("origin") and r["origin"] != "static" else "")
        elif r["outcome"] == NEEDS_PERSON:
            detail = "; ".join(f"{t['field']}: {t['reason']}" for t in r["todo"])
        else:
            detail = r["reason"] or ""
        if r["outcome"] == NEEDS_PERSON and r.get("origin") not in (None, "static"):
            detail = f"({r['origin']}) {detail}"
        out.append(f"{r['kernel']:<{width}}  {r['outcome']:<14}  {detail}")
    for f in report["files_not_understood"]:
        out.append(f"not understood: {f['file']} ({f['errors']} errors, first {f['first']}); its kernels are "
                   "not listed")
    for o in report["over_budget"]:
        out.append(f"cannot: {o['kernel']} ({o['file']}:{o['line']}): {o['reason']}")
    plain = report.get("plain_sources") or {}
    if plain.get("read") or plain.get("not_parsed"):
        out.append(f"read for values: {len(plain['read'])} sources without CUDA code"
                   + (f" ({len(plain['with_errors'])} with parse errors, used for what parsed)"
                      if plain.get("with_errors") else ""))
    for f, why in (plain.get("not_parsed") or {}).items():
        out.append(f"not understood: {f} ({why}); values it holds were not read")
    s = report["summary"]
    origins = [r.get("origin") for r in rows if r.get("origin")]
    if origins:
        out.append("MEPs: " + ", ".join(f"{origins.count(o)} {o}" for o in ("capture", "edited", "sizes given", "static")
                                        if o in origins) + " (a captured or edited MEP, and sizes given, are kept)")
    out.append(f"{s['kernels']} kernels: {s[READY]} ready, {s[NEEDS_PERSON]} need a person, {s[CANNOT]} cannot"
               + (f" ({s['internal_errors']} internal errors)" if s["internal_errors"] else ""))
    out.append(f"flags: {report['flags_source']}")
    return "\n".join(out)


@click.command("ready")
@click.option("-C", "--app", "app", type=click.Path(path_type=Path), default=None,
              help="The application's folder (default: found from the current folder upwards).")
@click.option("-p", "--compile-commands", "compile_commands", type=click.Path(path_type=Path),
              help="For the extraction it runs: compile_commands.json, or the folder holding it.")
@click.option("-I", "include_dirs", multiple=True, help="For the extraction it runs: extra include folder.")
@click.option("-D", "defines", multiple=True, help="For the extraction it runs: extra macro NAME[=VALUE].")
@click.option("--profile", type=click.Path(path_type=Path),
              help="For the extraction it runs: an Nsight report (.nsys-rep, .ncu-rep) or its CSV to rank by.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON (for scripts).")
@click.pass_obj
def ready_command(obj, app, compile_commands, include_dirs, defines, profile, as_json):
    """Per kernel: ready, needs a person (which field, why) or cannot (why). Run it first.

    Extracts when there is no inventory or the sources changed, then completes every kernel's MEP into
    .mepgen/meps/ as `mepgen mep --all` does, one kernel at a time (-p/-I/-D/--profile extract again with them).
    Exits 0 when every kernel is ready, 3 (needs a person) otherwise.
    """

    if app is not None and not Path(app).is_dir():
        raise MepgenError(f"{app}: no such directory")
    opts = ExtractOptions(compile_commands=compile_commands, include_dirs=list(include_dirs), defines=list(defines),
                          profile=profile)
    report = ready(app, opts, log=obj.log)
    if as_json:
        emit_json(report)
    else:
        click.echo(render_text(report))
    not_ready = [k for k in report["kernels"] if k["outcome"] != READY]
    if not_ready or report["files_not_understood"]:
        if not as_json:     # under --json the document says it (and stdout stays one document even where mixed)
            click.echo(f"mepgen: {len(not_ready)} of {len(report['kernels'])} kernel(s) not ready"
                       + (f", {len(report['files_not_understood'])} file(s) not understood"
                          if report["files_not_understood"] else ""), err=True)
        sys.exit(exitcodes.NEEDS_PERSON)
