"""Options that several commands share, so that one flag means one thing everywhere."""
from __future__ import annotations

import re

import click

from .errors import MepgenError


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
