"""mepgen's exit codes: one meaning each, the same on every command (listed in `mepgen --help` and
docs/exit-codes.md; tests/test_cli_grammar.py holds each command to them)."""
from __future__ import annotations

OK = 0
CHECK_FAILED = 1       # a check mepgen ran said no: a variant rejected, the patched application failed validation
USAGE = 2              # bad input: an unknown option or kernel, a missing file, a malformed mep.yaml or config
NEEDS_PERSON = 3       # the work needs a person: a todo in mep.yaml, an MEP whose own kernel fails, nothing captured
NO_GPU = 4             # no CUDA device, or a toolchain the command needs (CUDA toolkit, CUPTI, a C++ compiler, nsys/ncu)
UNSOUND_START = 5      # the starting point fails a check: the MEP's time is outside the fidelity guard against the
                       # application's (optimize; --force overrides), or the application fails its own build or check
                       # before any change (tune)
INTERNAL = 70          # a bug in mepgen: one line on stderr, the traceback with -v
INTERRUPTED = 130      # Ctrl-C

TABLE = [
    (OK, "ok"),
    (CHECK_FAILED, "a check failed (a variant rejected, the patched application failed validation, kernels of a "
                   "batch failed)"),
    (USAGE, "usage or bad input (unknown option or kernel, missing file, malformed mep.yaml or config)"),
    (NEEDS_PERSON, "needs a person (a todo in mep.yaml, the MEP's own kernel fails, nothing captured)"),
    (NO_GPU, "GPU or toolchain missing (no CUDA device, no CUDA toolkit/CUPTI/C++ compiler, no nsys/ncu)"),
    (UNSOUND_START, "the starting point fails a check (the MEP's time outside the fidelity guard: --force "
                    "overrides; the application's own build or check fails before any change)"),
    (INTERNAL, "internal error: a bug in mepgen (details with -v)"),
    (INTERRUPTED, "interrupted"),
]


def help_text() -> str:
    """The table for `mepgen --help` (click's \\b keeps the lines as they are)."""
    return "\b\nExit codes:\n" + "\n".join(f"  {code:<4}{what}" for code, what in TABLE)
