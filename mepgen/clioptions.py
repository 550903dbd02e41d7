"""Options that several commands share, so that one flag means one thing everywhere."""
from __future__ import annotations

import json
import re
from pathlib import Path

import click

from .errors import MepgenError
from .workspace import Workspace


def renamed_flag(old: str, new: str):
    """The old spelling of a renamed switch: still accepted, hidden from --help, with a one-line note on stderr.
    The command reads it as the parameter `old` without dashes and ORs it into the new one."""
    def note(ctx, param, value):
        if value:
            click.echo(f"mepgen: note: {old} on `{ctx.info_name}` is now {new} ({old} names a profile report to "
                       f"read, on `mepgen extract`); {old} still works here for now", err=True)
        return value
    return click.option(old, old.lstrip("-").replace("-", "_") + "_old", is_flag=True, hidden=True, callback=note,
                        expose_value=True)


_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_bytes(text: str, option: str = "--max-bytes") -> int:
    """`4294967296`, `512M`, `8G`, `8GiB` -> bytes."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*", str(text), re.I)
    if not m:
        raise MepgenError(f"{option}: '{text}' is not a size (e.g. 4294967296, 512M, 8G)")
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


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


def emit_json(obj) -> None:
    click.echo(json.dumps(obj, indent=1))
