"""The `mepgen` command line. Each command hands its work to a stage; user errors exit non-zero with one line."""
from __future__ import annotations

import functools
import json
import sys
import traceback
from pathlib import Path

import click

from . import __version__, exitcodes, progress
from .errors import MepgenError, os_error_message
from .workspace import Workspace
from .extract import ExtractOptions, extract as run_extract
from .listing import kernel_table, kernel_rows
from .inventory import load
from .ready import READY, ready as run_ready, render_text


class Context:
    def __init__(self, verbose: int = 0, as_json: bool = False):
        self.verbose = verbose
        self.as_json = as_json

    def log(self, msg: str, level: int = 1) -> None:
        if self.verbose >= level:
            click.echo(msg, err=True)


def _more_verbose(ctx, param, value):
    if value:
        obj = ctx.find_object(Context)
        if obj is None:
            ctx.obj = obj = Context()
        obj.verbose += value


def _with_globals(cmd: click.Command) -> click.Command:
    """The global options after the subcommand too: `-v` on every command, and a `--json` given before the
    subcommand (`mepgen --json list`) reaching the command's own `--json`; --json also quiets progress."""
    if isinstance(cmd, click.Group):
        for sub in cmd.commands.values():
            _with_globals(sub)
    if not any(p.name == "_verbose" for p in cmd.params):
        cmd.params.append(click.Option(["-v", "--verbose", "_verbose"], count=True, expose_value=False,
                                       callback=_more_verbose, help="More detail on stderr (repeat for more)."))
    if cmd.callback is not None and any(p.name == "as_json" for p in cmd.params) \
            and not getattr(cmd.callback, "_mepgen_globals", False):
        inner = cmd.callback

        @functools.wraps(inner)
        def callback(*args, **kwargs):
            obj = click.get_current_context().find_object(Context)
            if obj is not None and obj.as_json:
                kwargs["as_json"] = True
            progress.set_quiet(bool(kwargs.get("as_json")))
            return inner(*args, **kwargs)
        callback._mepgen_globals = True
        cmd.callback = callback
    return cmd


class MepgenGroup(click.Group):
    """Turns MepgenError (and any unexpected error) into one line on stderr and a non-zero exit."""

    def add_command(self, cmd, name=None):
        super().add_command(_with_globals(cmd), name)

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except MepgenError as e:
            click.echo(f"mepgen: {e}", err=True)
            sys.exit(e.exit_code)
        except KeyboardInterrupt:
            click.echo("mepgen: interrupted", err=True)
            sys.exit(exitcodes.INTERRUPTED)
        except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException, SystemExit):
            raise
        except OSError as e:  # the file system said no (permissions, space, a file where a folder belongs)
            if isinstance(ctx.obj, Context) and ctx.obj.verbose:
                traceback.print_exc()
            click.echo(f"mepgen: {os_error_message(e)}", err=True)
            sys.exit(exitcodes.USAGE)
        except Exception as e:  # a bug in mepgen: say so in one line, details with -v
            verbose = ctx.obj.verbose if isinstance(ctx.obj, Context) else 0
            if verbose:
                traceback.print_exc()
            click.echo(f"mepgen: internal error: {type(e).__name__}: {e} (rerun with -v for details)", err=True)
            sys.exit(exitcodes.INTERNAL)


@click.group(cls=MepgenGroup, context_settings={"help_option_names": ["-h", "--help"]},
             epilog=exitcodes.help_text() + "\n\nThe reference: docs/ (exit codes: docs/exit-codes.md).")
@click.version_option(__version__, prog_name="mepgen")
@click.option("-v", "--verbose", count=True, help="More detail on stderr (repeat for more; also after the command).")
@click.option("--json", "as_json", is_flag=True, help="JSON on stdout for every command that has it (also after the "
                                                       "command); no progress display.")
@click.pass_context
def main(ctx, verbose, as_json):
    """mepgen: cut hotspot CUDA kernels out of an application into Minimal Executable Programs (MEPs),
    optimize them in seconds per attempt, and patch the winners back.

    Every stage reads and writes plain files under `.mepgen/` at the application's root; every command takes
    the application's folder as `-C APP` (default: found from the current folder upwards).
    """
    ctx.obj = Context(verbose, as_json)


def app_folder(positional: Path | None, option: Path | None) -> Path:
    """The application of `extract`: `-C APP` or the argument APP (one of them, or both the same); neither:
    the application whose workspace is found upwards, else the current folder."""
    if positional is not None and option is not None and Path(positional).resolve() != Path(option).resolve():
        raise MepgenError(f"two applications given: {positional} and -C {option}: give one")
    chosen = option if option is not None else positional
    if chosen is not None:
        return Path(chosen)
    try:
        return Workspace.find().app_root
    except MepgenError:
        return Path(".")


def _emit_json(obj) -> None:
    click.echo(json.dumps(obj, indent=1))


@main.command()
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
def extract(obj: Context, app_arg, app, compile_commands, include_dirs, defines, profile, jobs, no_cache, as_json):
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
        _emit_json(summary)
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


@main.command("list")
@click.option("-C", "--app", "app", type=click.Path(path_type=Path), default=None,
              help="The application's folder (default: found from the current folder upwards).")
@click.option("--json", "as_json", is_flag=True, help="Print the ranked kernels as JSON.")
@click.pass_obj
def list_(obj: Context, app, as_json):
    """Print the ranked kernels of the inventory as a table."""

    ws = Workspace(app) if app else Workspace.find()
    inv = load(ws.inventory_path)
    if as_json:
        _emit_json(kernel_rows(inv))
    else:
        click.echo(kernel_table(inv))


@main.command()
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
def ready(obj: Context, app, compile_commands, include_dirs, defines, profile, as_json):
    """Per kernel: ready, needs a person (which field, why) or cannot (why). Run it first.

    Extracts when there is no inventory or the sources changed, then completes every kernel's MEP into
    .mepgen/meps/ as `mepgen mep --all` does, one kernel at a time (-p/-I/-D/--profile extract again with them).
    Exits 0 when every kernel is ready, 3 (needs a person) otherwise.
    """

    if app is not None and not Path(app).is_dir():
        raise MepgenError(f"{app}: no such directory")
    opts = ExtractOptions(compile_commands=compile_commands, include_dirs=list(include_dirs), defines=list(defines),
                          profile=profile)
    report = run_ready(app, opts, log=obj.log)
    if as_json:
        _emit_json(report)
    else:
        click.echo(render_text(report))
    not_ready = [k for k in report["kernels"] if k["outcome"] != READY]
    if not_ready or report["files_not_understood"]:
        if not as_json:     # under --json the document says it (and stdout stays one document even where mixed)
            click.echo(f"mepgen: {len(not_ready)} of {len(report['kernels'])} kernel(s) not ready"
                       + (f", {len(report['files_not_understood'])} file(s) not understood"
                          if report["files_not_understood"] else ""), err=True)
        sys.exit(exitcodes.NEEDS_PERSON)


# Each stage defines its commands in its own `command.py`; register them here, one line each.
# (stage commands are added below as the stages land)
from .mep.command import mep as _mep_command  # noqa: E402
main.add_command(_mep_command)
from .patch.command import patch as _patch  # noqa: E402

main.add_command(_patch)
from .capture.command import capture as _capture  # noqa: E402

main.add_command(_capture)
from .evaluate.command import run as _run  # noqa: E402

main.add_command(_run)
from .optimize.command import optimize as _optimize  # noqa: E402

main.add_command(_optimize)
from .tune.command import tune as _tune  # noqa: E402

main.add_command(_tune)
from .evaluate.doctor import doctor as _doctor  # noqa: E402

main.add_command(_doctor)
from .llm.command import llm as _llm  # noqa: E402

main.add_command(_llm)
from .report.command import report as _report  # noqa: E402

main.add_command(_report)


if __name__ == "__main__":  # pragma: no cover
    main()
