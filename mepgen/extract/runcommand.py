"""How the application says it is run: the command of its Makefile's `run` target, of a `run` script beside
it, or of a CMake `add_test`, read statically (nothing is executed).

A size the program reads from the command line (`n = atoi(argv[1])`) has no value in the sources; the
application's own run command (`run: build` then `$(LAUNCHER) ./$(program) 10000 1000`) states the one it is
meant to run with. mepgen takes that argument as a stated choice, named in mep.yaml's notes.

Read, in this order, the first that names a program started as `./NAME` (or a target of the Makefile):
- Makefile (through :func:`buildfiles.parse_makefile`: variables, conditionals, includes): the recipe of the
  target `run` (else the first target whose name starts with `run`); undefined variables (`$(LAUNCHER)`)
  expand to nothing;
- a shell script `run` or `run.sh` at the application's root: its first command line;
- CMakeLists.txt: `add_test(NAME t COMMAND prog args)` or `add_test(t prog args)`.
"""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from .buildfiles import _UNDEFINED, MAKEFILE_NAMES, parse_makefile

_STOP = {";", "|", "||", "&&", "&", ">", ">>", "<", "2>", "2>&1", "1>", "&>"}
_SCRIPTS = ("run", "run.sh")


@dataclass
class RunCommand:
    source: str            # where it was read: "the Makefile's run target"
    text: str              # the command as it runs (variables expanded)
    program: str           # the program word: `./main`
    args: list[str]        # its arguments, argv[1] first

    def describe(self) -> str:
        return f"{self.source}: `{self.text}`"


def find_run_command(app: Path) -> RunCommand | None:
    """The application's own run command, or None when its build files and scripts state none."""
    app = Path(app)
    makefile = next((app / n for n in MAKEFILE_NAMES if (app / n).is_file()), None)
    if makefile is not None:
        found = _from_makefile(makefile)
        if found is not None:
            return found
    for name in _SCRIPTS:
        script = app / name
        if script.is_file():
            found = _from_lines(_script_lines(script), f"the run script `{name}`", set())
            if found is not None:
                return found
    cmake = app / "CMakeLists.txt"
    if cmake.is_file():
        return _from_cmake(cmake)
    return None


def _from_makefile(path: Path) -> RunCommand | None:
    try:
        make = parse_makefile(path)
    except (OSError, RecursionError):
        return None
    rules = [r for r in make.rules if "run" in r[0]] or \
        [r for r in make.rules if r[0] and r[0][0].startswith("run")]
    targets = {t for r in make.rules for t in r[0]}
    for r in rules:
        name = "run" if "run" in r[0] else r[0][0]
        lines = [make.expand(x) for x in r[2]]
        found = _from_lines(lines, f"the {path.name}'s {name} target", targets)
        if found is not None:
            return found
    return None


def _script_lines(path: Path) -> list[str]:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return []
    text = re.sub(r"\\\r?\n[ \t]*", " ", text)
    return [x.strip() for x in text.splitlines() if x.strip() and not x.strip().startswith("#")]


def _from_lines(lines: list[str], source: str, targets: set[str]) -> RunCommand | None:
    """The first program a line starts (`./NAME`, a relative path that starts the line such as `cuda/app`, or a
    Makefile target by name, after a launcher such as `mpirun -n 4` or `cd dir &&`) and its arguments, up to
    the end of that command."""
    for line in lines:
        line = line.lstrip("@-+ \t")
        words = _split(line)
        for i, w in enumerate(words):
            program = w.startswith("./") or i == 0 and "/" in w and not w.startswith(("/", "-", "$")) \
                and not w.endswith((".sh", ".bash", ".py", ".pl"))       # `bin/app`, not a helper script
            if program or (w in targets and i > 0 and not words[i - 1].startswith("-")):
                args = []
                for a in words[i + 1:]:
                    if a in _STOP or a.startswith((">", "2>", "<", "|")):
                        break
                    args.append(a)
                shown = " ".join([w] + args)
                return RunCommand(source, shown, w, args)
    return None


def _split(line: str) -> list[str]:
    line = re.sub(f"{_UNDEFINED}[^{_UNDEFINED}]*{_UNDEFINED}", " ", line)     # $(LAUNCHER): nothing
    try:
        return shlex.split(line, comments=True)
    except ValueError:
        return line.split()


def _from_cmake(path: Path) -> RunCommand | None:
    try:
        text = re.sub(r"#[^\n]*", "", path.read_text(errors="replace"))
    except OSError:
        return None
    for m in re.finditer(r"\badd_test\s*\(([^()]*)\)", text, re.I):
        words = _split(m.group(1))
        if "COMMAND" in words:
            words = words[words.index("COMMAND") + 1:]
            for kw in ("WORKING_DIRECTORY", "CONFIGURATIONS", "COMMAND_EXPAND_LISTS"):
                if kw in words:
                    words = words[:words.index(kw)]
        else:
            words = words[1:]
        if words and "$" not in words[0]:
            return RunCommand("CMakeLists.txt's add_test", " ".join(words), words[0], words[1:])
    return None
