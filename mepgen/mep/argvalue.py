"""The value of a command-line argument (`n = atoi(argv[1])`) taken from the application's own run command.

:mod:`..extract.runcommand` reads how the application says it is run (`./main 10000 1000`); argument k of that
command is the value of `argv[k]`. It is a stated choice (the caller puts the note in mep.yaml), and only a
number is taken: a file path, a word, or no run command at all leaves the todo, whose reason says why and
names `mepgen capture` as the way to complete it. When the command gives fewer arguments than `k` and the code
has a default for the missing one (`argc > 2 ? atoi(argv[2]) : 64`), the default is what that run uses.
Options read with getopt (`case 'n': n = atoi(optarg);`) take the value after `-n` (or `-n1000`), options the code
compares by name (`if (!strcmp(argv[i], "-paths")) paths = atoi(argv[++i]);`) the value after `-paths`; an option the
run command does not give leaves the variable's value before the getopt loop, when it has one.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ..extract.runcommand import RunCommand, find_run_command
from .cstrings import convert

_FLOAT_CONVERTERS = ("atof", "strtod", "strtof", "stof", "stod", "stold", "strtold")
CAPTURE = "`mepgen capture KERNEL -- ./app ARGS` records it from a run"


@dataclass
class ArgValue:
    value: str | None      # C++ literal text, or None
    note: str              # the stated choice (value) or why there is none (todo reason's tail)


def run_command(project, near: str | None = None) -> RunCommand | None:
    """The run command of the program whose source file is `near`: the first that the file's folder or one of
    its parents up to the application's root states (`srad_v1/run` beside `srad_v1/main.cu` in an application
    of several programs), else the root's; read once per folder."""
    cache = project.__dict__.setdefault("_run_commands", {})
    root = Path(project.app_root).resolve()
    folders = []
    if near:
        d = Path(near).resolve().parent
        while d != root and root in d.parents:
            folders.append(d)
            d = d.parent
    for d in folders + [root]:
        if d not in cache:
            cache[d] = find_run_command(d)
        if cache[d] is not None:
            return cache[d]
    return None


def argv_index(text: str) -> int | None:
    """k of the one `argv[k]` with a literal index in `text` (`atoi(argv[2])` -> 2), else None."""
    found = {int(m.group(1)) for m in re.finditer(r"\bargv\s*\[\s*(\d+)\s*\]", text)}
    return found.pop() if len(found) == 1 else None


def number(arg: str, integral: bool) -> str | None:
    """The argument as a C++ literal of the variable's kind, or None when it is no number."""
    if integral:
        return str(int(arg, 10)) if re.fullmatch(r"[+-]?\d+", arg) else None
    try:
        float(arg)
    except ValueError:
        return None
    return arg if re.fullmatch(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?", arg) else None


def flag(option: str) -> str:
    """The option as written on a command line: getopt's letter `n` is `-n`; a named flag (`-paths`) stays."""
    return option if option.startswith("-") else f"-{option}"


def option_value(args: list[str], letter: str) -> str | None:
    """The value of an option in a command's arguments: getopt's `-n 1000` or `-n1000`, a named flag's
    `-paths 1000` or `--paths=1000` (the last one wins)."""
    found, name = None, flag(letter)
    for i, a in enumerate(args):
        if a == name and i + 1 < len(args):
            found = args[i + 1]
        elif a.startswith(name + "=") and name.startswith("--"):
            found = a[len(name) + 1:]
        elif len(letter) == 1 and a.startswith(name) and len(a) > 2 and not a.startswith("--"):
            found = a[2:]
    return found


def from_run(project, name: str, text: str, integral: bool, default: str | None,
             option: str | None = None, near: str | None = None) -> ArgValue:
    """The value of variable `name`, set by `text` (an expression reading argv, or getopt's `optarg` for
    `option`) in source file `near`, from the run command."""
    k = argv_index(text) if option is None else None
    if k is None and option is None:
        return ArgValue(None, "mepgen reads only a literal index of argv")
    rc = run_command(project, near)
    if rc is None:
        return ArgValue(None, "the application states no run command mepgen can read (no Makefile `run` target, "
                              f"run script or add_test); {CAPTURE}")
    if not integral and any(re.search(rf"\b{c}\s*\(", text) for c in ("atoi", "atol", "atoll", "stoi", "stol")):
        integral = True
    arg = option_value(rc.args, option) if option is not None else rc.args[k - 1] if k - 1 < len(rc.args) else None
    where = f"option {flag(option)}" if option is not None else f"argv[{k}]"
    if arg is not None:
        value = number(arg, integral)
        if value is None:       # `atoi(optarg)` of `1024x768`: the number the word starts with, as C reads it
            value = convert(text, arg, integral)
        if value is None:
            what = "a file" if "/" in arg or "." in arg and not arg[0].isdigit() else "not a number"
            return ArgValue(None, f"{rc.describe()} passes `{arg}` there ({what}); {CAPTURE}")
        opt = f" (option {flag(option)})" if option is not None else ""
        return ArgValue(value, f"`{name}` = {_short(text)}{opt} = {value}, from {rc.describe()}")
    if default is not None:
        return ArgValue(default, f"`{name}` = {default}, the application's default: {rc.describe()} passes no "
                                 f"{where}")
    return ArgValue(None, f"{rc.describe()} passes no {where} and the code gives no default; {CAPTURE}")


def _short(text: str) -> str:
    t = " ".join(text.split())
    return t if len(t) <= 60 else t[:57] + "..."
