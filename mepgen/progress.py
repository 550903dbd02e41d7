"""Progress on long work (extract over many files, `mep --all`, a capture, an optimize batch), drawn with rich
on stderr: only when stderr is a terminal and the command is not printing --json, so scripts and logs never see
it. `MEPGEN_PROGRESS=1` forces it on (what the tests use), `=0` off."""
from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from typing import Iterator

_quiet = False


def set_quiet(quiet: bool) -> None:
    """Set by the CLI for each command: True under --json."""
    global _quiet
    _quiet = quiet


def enabled() -> bool:
    forced = os.environ.get("MEPGEN_PROGRESS")
    if forced in ("0", "1"):
        return forced == "1" and not _quiet
    return not _quiet and sys.stderr.isatty()


class Task:
    """One bar: `advance()` per item done, `note(text)` to say what it is on now."""

    def __init__(self, bar=None, task_id=None):
        self._bar, self._id = bar, task_id

    def advance(self, n: int = 1) -> None:
        if self._bar is not None:
            self._bar.advance(self._id, n)

    def note(self, text: str) -> None:
        if self._bar is not None:
            self._bar.update(self._id, description=text)

    def total(self, total: int | None) -> None:
        if self._bar is not None:
            self._bar.update(self._id, total=total)


@contextmanager
def progress(description: str, total: int | None = None) -> Iterator[Task]:
    """A bar for `total` items (None: a spinner), gone when the work ends; a no-op Task when not enabled."""
    if not enabled():
        yield Task()
        return
    # rich, loaded only where a bar is drawn (a terminal): --json, pipes and tests never pay its import
    from rich.console import Console
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn,
                               TimeElapsedColumn)
    console = Console(file=sys.stderr, force_terminal=os.environ.get("MEPGEN_PROGRESS") == "1" or None)
    bar = Progress(SpinnerColumn(), TextColumn("[progress.description]{task.description}"), BarColumn(),
                   MofNCompleteColumn(), TimeElapsedColumn(), console=console, transient=True)
    with bar:
        yield Task(bar, bar.add_task(description, total=total))
