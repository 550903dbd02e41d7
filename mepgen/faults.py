"""Fault injection for tests: `point(NAME)` kills the process (SIGKILL: no cleanup runs, as with `kill -9` or a
power cut) when the environment's MEPGEN_KILL_AT names that point. Nothing happens otherwise.

Points are placed between the steps of every write that must be all-or-nothing (patch apply and revert, an
MEP folder's swap), so tests can show that the next command finds the work whole at each of them."""
from __future__ import annotations

import os
import signal


def point(name: str) -> None:
    if os.environ.get("MEPGEN_KILL_AT") == name:
        os.kill(os.getpid(), signal.SIGKILL)
