"""The `mepgen` command line. Each command hands its work to a stage; user errors exit non-zero with one line."""
from __future__ import annotations

import functools
import importlib
import sys
import traceback

import click

from . import __version__, exitcodes, progress
from .errors import MepgenError, os_error_message


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
    """Turns MepgenError (and any unexpected error) into one line on stderr and a non-zero exit. Commands named in
    `lazy` (name -> "module:attribute" under mepgen) are imported the first time they are asked for."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.lazy: dict[str, str] = {}

    def add_command(self, cmd, name=None):
        super().add_command(_with_globals(cmd), name)

    def list_commands(self, ctx):
        return sorted(set(self.commands) | set(self.lazy))

    def get_command(self, ctx, cmd_name):
        if cmd_name not in self.commands and cmd_name in self.lazy:
            module, _, attr = self.lazy[cmd_name].partition(":")
            self.add_command(getattr(importlib.import_module(f"{__package__}.{module}"), attr), cmd_name)
        return super().get_command(ctx, cmd_name)

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


# Each stage defines its commands in its own `command.py`; they are named here, one line each, and imported when
# run (or listed by --help): `mepgen optimize` does not load the extractor, the templates or the report.
main.lazy.update({
    "extract": "extract.command:extract",
    "list": "extract.command:list_",
    "ready": "ready:ready_command",
    "mep": "mep.command:mep",
    "patch": "patch.command:patch",
    "capture": "capture.command:capture",
    "run": "evaluate.command:run",
    "optimize": "optimize.command:optimize",
    "tune": "tune.command:tune",
    "doctor": "evaluate.doctor:doctor",
    "llm": "llm.command:llm",
    "report": "report.command:report",
})


if __name__ == "__main__":  # pragma: no cover
    main()
