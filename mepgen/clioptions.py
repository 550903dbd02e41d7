"""Options that several commands share, so that one flag means one thing everywhere."""
from __future__ import annotations

import click


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
