"""What the application's own build compiles, and with which nvcc options, read statically from its build files.

Two questions the MEP depends on, without compile_commands.json:

- **which sources the build compiles**: a folder may hold leftover variants that define the same kernels as the
  built file (one indexes 2D, the other 1D); the MEP must come from the definition the binary runs. A Makefile's
  rules name their sources (as prerequisites, `main: main.cu kernels.cu`, or as objects a rule builds from a
  source, `main: main.o` with `%.o: %.cu`, or in the recipes that run nvcc): a file no rule names is a leftover
  (a second program of the folder, built by another target, is not); a CMakeLists.txt names them in
  `add_executable`/`add_library`/`cuda_add_executable`. Files those sources `#include` are compiled too (a `.cu`
  included by the built one), which the parse knows (extract/run.py adds them).
- **the nvcc options** of the commands that compile CUDA (`$(NVCC) $(FLAGS) -c $< -o $@`, flags from included
  make files): `-use_fast_math`, `-Xptxas -O3,-v`, `--maxrregcount`, `-arch`/`-gencode`; CMake's
  `CMAKE_CUDA_FLAGS`, `target_compile_options` (CUDA generator expressions unwrapped) and `CUDA_ARCHITECTURES`
  (`-arch=sm_XY`). Include folders and macros are read by extract/buildfiles.py; an option whose text names a
  variable the build files do not define is left out, never guessed.

Nothing is executed: the Makefile is read by extract/buildfiles.parse_makefile.
"""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from .buildfiles import _CMAKE_CMD, _UNDEFINED, MAKEFILE_NAMES, parse_makefile
from .flags import SOURCE_SUFFIXES, parse_command

OBJECT_SUFFIXES = (".o", ".obj")
_SHELL_SEP = re.compile(r"\s*(?:&&|\|\||;|\|)\s*")


@dataclass
class AppBuild:
    """What the build files say about the CUDA compile: the sources, the nvcc options, where from."""

    source: str = ""                                   # "Makefile" or "CMakeLists.txt"
    sources: list[str] = field(default_factory=list)   # relative to the application's root, existing
    nvcc_options: list[str] = field(default_factory=list)             # the options every CUDA compile shares
    per_file: dict[str, list[str]] = field(default_factory=dict)      # a command that names its source
    not_used: list[str] = field(default_factory=list)

    def options_for(self, rel: str) -> list[str]:
        return self.per_file.get(rel, self.nvcc_options)

    def to_json(self) -> dict:
        return {"source": self.source, "sources": self.sources, "nvcc_options": self.nvcc_options,
                "per_file": self.per_file, "not_used": self.not_used}


def read_app_build(app: Path) -> AppBuild | None:
    """What the Makefile (else CMakeLists.txt) at the application's root compiles; None without either."""
    app = Path(app).resolve()
    makefile = next((app / n for n in MAKEFILE_NAMES if (app / n).is_file()), None)
    if makefile is not None:
        return _from_makefile(makefile, app)
    if (app / "CMakeLists.txt").is_file():
        return _from_cmake(app / "CMakeLists.txt", app)
    return None


# --- Makefile ---------------------------------------------------------------------------------------------

def _from_makefile(path: Path, app: Path) -> AppBuild:
    make = parse_makefile(path)
    base = path.parent
    out = AppBuild(source=path.name)
    ordinary = [r for r in make.rules if r[0] and not r[0][0].startswith(".") and "%" not in r[0][0]]
    patterns = [r for r in make.rules if r[0] and "%" in r[0][0]]
    by_target: dict[str, list] = {}
    for r in ordinary:
        for t in r[0]:
            by_target.setdefault(t, []).append(r)
    goal_rules, seen, todo = [], set(), [ordinary[0][0][0]] if ordinary else []
    while todo:
        t = todo.pop()
        if t in seen:
            continue
        seen.add(t)
        for r in by_target.get(t, []):
            goal_rules.append(r)
            todo += r[1]
    # the sources: what any rule compiles (a second program of the folder, `make other`, is built too; a file
    # no rule names is a leftover); the options: those of the default goal's commands and the pattern rules
    for targets, prereqs, _ in ordinary:
        for t in [*targets, *prereqs]:
            _add_source(out, base / t, app)
            if t not in by_target:          # an object a pattern rule builds: `x.o` from `x.cu`
                _add_source(out, _from_pattern(t, patterns, base), app)
    goal = {id(r) for r in goal_rules}
    commands: list[tuple[list[str], bool]] = []      # (words, from a pattern rule) of the default goal
    for rules, pattern in ((ordinary, False), (patterns, True)):
        for r in rules:
            targets, prereqs, recipe = r
            for line in recipe:
                text = _automatic(line, targets, prereqs, pattern)
                for cmd in _SHELL_SEP.split(make.expand(text).lstrip("@-+ ")):
                    words = _words(cmd)
                    if not words:
                        continue
                    if pattern or id(r) in goal:
                        commands.append((words, pattern))
                    if not pattern and _is_nvcc(words[0]):
                        for w in words[1:]:
                            if not w.startswith("-"):
                                _add_source(out, base / w, app)
    _nvcc_options(out, commands, base, app)
    return out


def _automatic(line: str, targets: list[str], prereqs: list[str], pattern: bool) -> str:
    """$@, $<, $^ of an ordinary rule by their values (a pattern rule's stay empty: they name no one file)."""
    if pattern:
        return line
    first = prereqs[0] if prereqs else ""
    for var, value in (("$@", targets[0] if targets else ""), ("$<", first), ("$^", " ".join(prereqs)),
                       ("$+", " ".join(prereqs)), ("$(@)", targets[0] if targets else ""), ("$(<)", first),
                       ("$(^)", " ".join(prereqs))):
        line = line.replace(var, value)
    return line


def _from_pattern(target: str, patterns: list, base: Path) -> Path | None:
    """The source a pattern rule builds `target` from (`%.o: %.cu` and `x.o` -> `x.cu`), when it exists."""
    for targets, prereqs, _ in patterns:
        for t in targets:
            pre, _, post = t.partition("%")
            if target.startswith(pre) and target.endswith(post) and len(target) >= len(pre) + len(post):
                stem = target[len(pre):len(target) - len(post)]
                for p in prereqs:
                    if "%" in p:
                        cand = base / p.replace("%", stem, 1)
                        if cand.suffix in SOURCE_SUFFIXES and cand.is_file():
                            return cand
    if Path(target).suffix in OBJECT_SUFFIXES:        # make's built-in rules would not build a .o from a .cu:
        return None                                   # a rule of the Makefile must say so
    return None


def _add_source(out: AppBuild, path: Path | None, app: Path) -> None:
    if path is None or _UNDEFINED in str(path) or path.suffix not in SOURCE_SUFFIXES:
        return
    try:
        p = path.resolve()
    except OSError:
        return
    if p.is_file() and p.is_relative_to(app):
        rel = str(p.relative_to(app))
        if rel not in out.sources:
            out.sources.append(rel)


def _words(cmd: str) -> list[str]:
    try:
        return shlex.split(cmd, comments=False)
    except ValueError:
        return cmd.split()


def _is_nvcc(word: str) -> bool:
    """nvcc, by path or through a variable the build files leave undefined (`$(NVCC)` from the environment)."""
    undefined = re.findall(f"{_UNDEFINED}(.*?){_UNDEFINED}", word)
    if undefined and word.replace(_UNDEFINED, "") == "".join(undefined):
        return any("NVCC" in n.upper() or "CUDACC" in n.upper() for n in undefined)
    return Path(re.sub(f"{_UNDEFINED}.*?{_UNDEFINED}", "", word)).name in ("nvcc", "nvcc.exe")


def _nvcc_options(out: AppBuild, commands: list[tuple[list[str], bool]], base: Path, app: Path) -> None:
    """The options of each command that runs nvcc: a command naming sources gives them theirs; the options of
    the commands that compile (`-c`) with no source named (pattern rules) are the ones every file shares."""
    shared: list[list[str]] = []
    for words, pattern in commands:
        if not _is_nvcc(words[0]):
            continue
        kept = []
        for w in words[1:]:
            if _UNDEFINED in w:
                shown = re.sub(f"{_UNDEFINED}(.*?){_UNDEFINED}", r"$(\1)", w)
                if shown not in out.not_used:
                    out.not_used.append(f"{shown} (names a variable the build files do not define)")
                continue
            kept.append(w)
        options = parse_command(["nvcc", *kept], base).nvcc_args
        options = [o for o in options if not o.startswith(("-D", "-U"))]     # macros: buildfiles.py reads them
        named = [w for w in kept if not w.startswith("-") and Path(w).suffix in SOURCE_SUFFIXES]
        for w in named:
            p = (base / w).resolve()
            if p.is_file() and p.is_relative_to(app):
                out.per_file.setdefault(str(p.relative_to(app)), options)
        if not named and ("-c" in kept or "-dc" in kept or pattern):
            shared.append(options)
    if shared:
        out.nvcc_options = shared[0]
    elif out.per_file:           # one command compiles and links every source: its options are the build's
        firsts = list(dict.fromkeys(tuple(v) for v in out.per_file.values()))
        if len(firsts) == 1:
            out.nvcc_options = list(firsts[0])


# --- CMake ------------------------------------------------------------------------------------------------

_TARGET_CMDS = ("add_executable", "add_library", "cuda_add_executable", "cuda_add_library")
_GENEX = re.compile(r"^\$<\$<COMPILE_LANGUAGE:CUDA>:(.*)>$")


def _from_cmake(path: Path, app: Path) -> AppBuild:
    text = re.sub(r"#[^\n]*", "", path.read_text(errors="replace"))
    base = path.parent
    out = AppBuild(source=path.name)
    cvars: dict[str, str] = {n: str(base) for n in ("CMAKE_CURRENT_SOURCE_DIR", "CMAKE_SOURCE_DIR",
                                                     "PROJECT_SOURCE_DIR", "CMAKE_CURRENT_LIST_DIR")}

    def expand(s: str) -> str:
        for _ in range(10):
            new = re.sub(r"\$\{(\w+)\}", lambda m: cvars.get(m.group(1), ""), s)
            if new == s:
                break
            s = new
        return s

    options: list[str] = []
    arch = None
    for m in _CMAKE_CMD.finditer(text):
        cmd = m.group(1).lower()
        try:
            raw = shlex.split(m.group(2))
        except ValueError:
            raw = m.group(2).split()
        args = [expand(a) for a in raw]
        if cmd == "set" and args:
            cvars[args[0]] = " ".join(a for a in args[1:] if a not in ("CACHE", "PARENT_SCOPE", "STRING", "FORCE"))
            if args[0] == "CMAKE_CUDA_ARCHITECTURES" and len(args) > 1:
                arch = args[1]
        elif cmd in _TARGET_CMDS and args:
            for a in args[1:]:
                for word in a.split(";"):
                    _add_source(out, base / word, app)
        elif cmd in ("target_compile_options", "add_compile_options"):
            for a in args[1 if cmd == "target_compile_options" else 0:]:
                g = _GENEX.match(a)
                if g:
                    options += [w for w in re.split(r"[;,]\s*|\s+", g.group(1)) if w]
                elif not a.startswith("$<") and a not in ("PUBLIC", "PRIVATE", "INTERFACE", "BEFORE"):
                    options.append(a)
        elif cmd == "set_target_properties" or cmd == "set_property":
            if "CUDA_ARCHITECTURES" in args:
                i = args.index("CUDA_ARCHITECTURES")
                if i + 1 < len(args):
                    arch = args[i + 1]
    flags = _words(cvars.get("CMAKE_CUDA_FLAGS", "").strip())
    cuda = parse_command(["nvcc", *flags, *options], base).nvcc_args
    cuda = [o for o in cuda if not o.startswith(("-D", "-U"))]
    first = (arch or "").split(";")[0].split()[0] if arch else ""
    m = re.match(r"^(\d+)([a-z]?)(?:-(real|virtual))?$", first)
    if m and not any(o.startswith(("-arch", "--gpu-architecture", "-gencode", "--generate-code")) for o in cuda):
        cuda.append(f"-arch=sm_{m.group(1)}{m.group(2)}")
    elif arch and first not in ("", "OFF", "native", "all", "all-major"):
        out.not_used.append(f"CUDA_ARCHITECTURES {arch} (not a number mepgen can turn into -arch)")
    out.nvcc_options = cuda
    return out
