"""A short machine-readable kind for each todo of an MEP (`mepgen ready --json`, mep.yaml's `kind`).

The code that makes a todo says its kind where it knows it (a size read with fscanf is `file` wherever the
words of its reason fall); :func:`todo_kind` derives it from the field and the reason's words otherwise, and for
records written before todos carried a kind.

Kinds, the first rule that matches wins:
- `capture`: the input exists only in a run of the application (a struct of device pointers, an element type
  that is not a number, records in a constant): `mepgen capture` completes it;
- `file`: the value comes from data the application reads (the run command passes a file there, or the value
  is read with fopen/fread/fscanf/ifstream/getline or a read*/load* function);
- `runtime`: the value is computed while the program runs from data or chance (rand(), time(), the
  nonzeros of a matrix), which no static reading can give;
- `argv`: a command-line value the run command did not give (no run command, or no such argument);
- `launch`: a launch configuration mepgen could not derive;
- `count`: a buffer whose element count mepgen could not bound;
- `parse`: the kernel did not parse cleanly (a role to check);
- `placeholder`: a size mepgen could not trace, any other way (it may well be a constant of main);
- `other`: anything else (sizes too large, chains...).
`capture`, `file` and `runtime` are outside what static completion can do; the others are mepgen's to derive.
"""
from __future__ import annotations

import re

OUT_OF_SCOPE = ("capture", "file", "runtime")

_FILE = re.compile(r"\((?:a file)\)|\b(fopen|fread|fscanf|fgets|ifstream|getline|read\w*|load\w*)\(", re.I)
_RUNTIME = re.compile(r"\b(s?rand\w*|random|time|clock|gettimeofday|drand48)\(|nonzeros of the CSR", re.I)
_CAPTURE = re.compile(r"device pointers|not a numeric element type|holds records")


def todo_kind(field: str, reason: str) -> str:
    if field.startswith("chain["):
        return todo_kind(reason.split(": ", 2)[1] if reason.count(": ") >= 2 else "", reason)
    if _CAPTURE.search(reason):
        return "capture"
    if _FILE.search(reason):
        return "file"
    if _RUNTIME.search(reason):
        return "runtime"
    if re.search(r"from the command line|command-line option", reason):
        return "argv"
    if field == "launch":
        return "launch"
    if field.endswith(".count"):
        return "count"
    if field.endswith(".role"):
        return "parse"
    if field.startswith(("sizes.", "params[", "constants[")):
        return "placeholder"
    return "other"


def in_scope(kinds: list[str]) -> bool:
    """Whether a kernel with todos of these kinds belongs to the programs static completion should finish:
    arrays of numbers, sizes from macros, main's constants or the run command."""
    return not set(kinds) & set(OUT_OF_SCOPE)
