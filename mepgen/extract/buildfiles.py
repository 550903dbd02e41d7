"""Include folders, macro definitions and the language standard an application's own build files pass to
the compiler, read statically when there is no compile_commands.json.

A Makefile that says `CFLAGS := -I../common -DBLOCK=16` or a CMakeLists.txt with
`target_include_directories(app PRIVATE ../common)` holds what the sources need to parse: without it a
kernel whose header sits in a sibling folder is not found at all. Nothing is executed (no `make -n`: a
Makefile may run anything in `$(shell ...)`); this reads:

- Makefile: variable assignments (`=`, `:=`, `?=`, `+=`, `override`), conditionals over them
  (`ifeq`/`ifneq`/`ifdef`/`ifndef`, with the variables' values in the file, the environment's never), included
  makefiles that exist, and the recipes of the default goal, what it depends on and the pattern rules;
  `$(VAR)`, `${VAR}` and `$(VAR:a=b)` are expanded, other functions (`$(shell ...)`) are not.
- CMakeLists.txt: `set()`, `include_directories`, `target_include_directories`, `add_definitions`,
  `add_compile_definitions`, `target_compile_definitions`, `add_compile_options`, `target_compile_options`,
  `CMAKE_CUDA_STANDARD`/`CMAKE_CXX_STANDARD`.

Include folders that exist are kept, except the toolkit's and the system's (mepgen parses with its own
declarations of the toolkit); flags that name an undefined variable are reported, never guessed.
"""
from __future__ import annotations

import glob
import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

MAKEFILE_NAMES = ("GNUmakefile", "makefile", "Makefile")
_ASSIGN = re.compile(r"^(?:override\s+)?(?:export\s+)?([A-Za-z_][\w.-]*)\s*(\+=|::=|:=|\?=|!=|=)\s*(.*)$")
_RULE = re.compile(r"^([^:=#\t][^:=#]*?)\s*::?(?!=)\s*(.*)$")
_UNDEFINED = "\x00"  # marks the place of an undefined variable inside an expanded word


@dataclass
class BuildFileFlags:
    """What the build files say about compiling the sources."""

    source: str = ""                                    # e.g. "Makefile" or "Makefile, CMakeLists.txt"
    include_dirs: list[str] = field(default_factory=list)   # absolute, existing
    defines: list[str] = field(default_factory=list)        # NAME or NAME=VALUE
    std: str | None = None
    not_used: list[str] = field(default_factory=list)       # flags left out, each with the reason

    def flags_text(self) -> str:
        parts = [f"-I{d}" for d in self.include_dirs] + [f"-D{d}" for d in self.defines]
        if self.std:
            parts.append(f"-std={self.std}")
        return " ".join(parts)

    def to_json(self) -> dict:
        return {"source": self.source, "include_dirs": self.include_dirs, "defines": self.defines,
                "std": self.std, "not_used": self.not_used}


def read_build_files(app: Path) -> BuildFileFlags | None:
    """The flags of the application's Makefile and/or CMakeLists.txt at its root; None when it has neither."""
    app = Path(app)
    out = BuildFileFlags()
    sources = []
    makefile = next((app / n for n in MAKEFILE_NAMES if (app / n).is_file()), None)
    if makefile is not None:
        _collect(out, _makefile_words(makefile), makefile.parent, app)
        sources.append(makefile.name)
    cmake = app / "CMakeLists.txt"
    if cmake.is_file():
        _collect(out, _cmake_words(cmake), cmake.parent, app)
        sources.append(cmake.name)
    if not sources:
        return None
    out.source = ", ".join(sources)
    return out


def _collect(out: BuildFileFlags, words: list[str], base: Path, app: Path) -> None:
    """Pick -I/-isystem/-D/-std out of compiler words (as a shell would split them)."""
    i = 0
    while i < len(words):
        w = words[i]
        value = None
        for flag in ("-isystem", "-I", "-D"):
            if w == flag and i + 1 < len(words):
                value, i = (flag, words[i + 1]), i + 1
                break
            if w.startswith(flag) and len(w) > len(flag):
                value = (flag, w[len(flag):])
                break
        i += 1
        if value is None:
            m = re.match(r"^--?std(?:=|$)(.*)", w)
            if m and re.match(r"^(c|gnu)\+\+\w+$", m.group(1)):     # C++ only: -std=c99 is for the C files
                out.std = m.group(1)
            continue
        flag, v = value
        shown = re.sub(f"{_UNDEFINED}(.*?){_UNDEFINED}", r"$(\1)", f"{flag}{v}")
        if _UNDEFINED in v:
            _note(out, f"{shown} (names a variable the build file does not define)")
        elif flag == "-D":
            if v not in out.defines:
                out.defines.append(v)
        else:
            d = (base / v).resolve()
            if str(d) in out.include_dirs or d == app.resolve():
                continue
            if not d.is_dir():
                _note(out, f"{shown} (no such folder)")
            elif _system_folder(d):
                _note(out, f"{shown} (the CUDA toolkit's or a system folder: mepgen parses with its own "
                           "declarations of the toolkit instead)")
            else:
                out.include_dirs.append(str(d))


def _system_folder(d: Path) -> bool:
    """A folder of the system or of the CUDA toolkit: put before mepgen's shim, it would replace it."""
    return d.parts[1:2] in (("usr",), ("opt",)) or (d / "cuda_runtime.h").is_file() or (d / "cuda.h").is_file()


def _note(out: BuildFileFlags, text: str) -> None:
    if text not in out.not_used:
        out.not_used.append(text)


# --- Makefile ---------------------------------------------------------------------------------------------

def _logical_lines(path: Path) -> list[str]:
    """Lines with continuations joined and comments dropped (`include` lines kept: their names may hold
    variables, which only the parse knows at that point)."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return []
    text = re.sub(r"\\\r?\n[ \t]*", " ", text)
    return [re.sub(r"(?<!\\)#.*", "", raw).rstrip() for raw in text.splitlines()]


def _included(line: str, make: "_Make", top: Path) -> list[Path] | None:
    """The makefiles an `include` line names (None when the line is not one): its words expanded with the
    variables set so far, as make does, each relative to the folder make runs in (the top Makefile's); those
    that do not exist are left out (`-include`, or an include make would have to build first)."""
    m = re.match(r"^-?s?include\s+(.+)$", line)
    if not m or line.startswith("\t"):
        return None
    paths = []
    for name in make.expand(m.group(1)).split():
        if _UNDEFINED in name:
            continue
        p = Path(os.path.expanduser(name))
        p = p if p.is_absolute() else top / p
        if p.is_file():
            paths.append(p.resolve())
    return paths


class _Make:
    def __init__(self, top: Path | None = None):
        self.top = top                     # the folder make runs in ($(wildcard) is relative to it)
        self.vars: dict[str, str] = {}
        self.rules: list[tuple[list[str], list[str], list[str]]] = []   # targets, prerequisites, recipe

    def expand(self, text: str, depth: int = 0) -> str:
        if depth > 20 or "$" not in text:
            return text
        out, i = [], 0
        while i < len(text):
            c = text[i]
            if c != "$" or i + 1 >= len(text):
                out.append(c)
                i += 1
                continue
            nxt = text[i + 1]
            if nxt == "$":
                out.append("$")
                i += 2
            elif nxt in "({":
                close = ")" if nxt == "(" else "}"
                j, level = i + 2, 1
                while j < len(text) and level:
                    level += (text[j] == nxt) - (text[j] == close)
                    j += 1
                out.append(self._reference(text[i + 2:j - 1], depth))
                i = j
            else:  # $@, $<, $^, $X
                out.append("" if nxt in "@<^?*+|%" else self._value(nxt, depth))
                i += 2
        return "".join(out)

    def _reference(self, inner: str, depth: int) -> str:
        name = self.expand(inner, depth + 1)
        m = re.match(r"^([\w.-]+):([^=]*)=(.*)$", name)
        if m:                                        # $(VAR:.cu=.o)
            words = self._value(m.group(1), depth).split()
            return " ".join(w[:-len(m.group(2))] + m.group(3) if m.group(2) and w.endswith(m.group(2)) else w
                            for w in words)
        if re.match(r"^[\w.-]+$", name):
            return self._value(name, depth)
        return self._function(name)

    def _function(self, text: str) -> str:
        """The text functions a build's file lists and flags are made with (`$(patsubst src/%.cu,obj/%.o,$(SRCS))`,
        `$(wildcard *.cu)`); others (`$(shell ...)`, `$(foreach ...)`) expand to nothing: never run."""
        fn, _, rest = text.partition(" ")
        args = rest.split(",")

        def pattern(pat: str, word: str) -> str | None:      # the stem `%` matches, or None
            if "%" not in pat:
                return "" if pat == word else None
            pre, _, post = pat.partition("%")
            ok = word.startswith(pre) and word.endswith(post) and len(word) >= len(pre) + len(post)
            return word[len(pre):len(word) - len(post)] if ok else None

        if fn == "patsubst" and len(args) >= 3:
            pat, rep, words = args[0].strip(), args[1].strip(), ",".join(args[2:]).split()
            out = []
            for w in words:
                stem = pattern(pat, w)
                out.append(w if stem is None else rep.replace("%", stem, 1) if "%" in pat else rep)
            return " ".join(out)
        if fn == "subst" and len(args) >= 3:
            return ",".join(args[2:]).replace(args[0], args[1])
        if fn in ("addprefix", "addsuffix") and len(args) >= 2:
            words = ",".join(args[1:]).split()
            return " ".join(args[0] + w if fn == "addprefix" else w + args[0] for w in words)
        if fn in ("filter", "filter-out") and len(args) >= 2:
            pats, words = args[0].split(), ",".join(args[1:]).split()
            keep = lambda w: any(pattern(p, w) is not None for p in pats)      # noqa: E731
            return " ".join(w for w in words if keep(w) == (fn == "filter"))
        if fn in ("strip", "sort", "notdir", "basename", "dir", "firstword"):
            words = rest.split()
            if fn == "sort":
                words = sorted(set(words))
            elif fn == "notdir":
                words = [w.rsplit("/", 1)[-1] for w in words]
            elif fn == "basename":
                words = [w[:w.rfind(".")] if "." in w.rsplit("/", 1)[-1] else w for w in words]
            elif fn == "dir":
                words = [w[:w.rfind("/") + 1] if "/" in w else "./" for w in words]
            elif fn == "firstword":
                words = words[:1]
            return " ".join(words)
        if fn == "wildcard" and self.top is not None:
            found = []
            for pat in rest.split():
                if _UNDEFINED in pat:
                    continue
                base = self.top if not os.path.isabs(pat) else None
                hits = sorted(glob.glob(pat, root_dir=base) if base else glob.glob(pat))
                found += hits
            return " ".join(found)
        return ""                                    # a function: $(shell ...), $(foreach ...) ...

    def _value(self, name: str, depth: int) -> str:
        if name not in self.vars:
            return f"{_UNDEFINED}{name}{_UNDEFINED}"
        return self.expand(self.vars[name], depth + 1)

    def condition(self, line: str) -> bool | None:
        m = re.match(r"^(ifeq|ifneq)\s*(.*)$", line)
        if m:
            args = m.group(2).strip()
            if args.startswith("("):
                a, _, b = args[1:-1].partition(",")
            else:
                parts = re.findall(r"\"([^\"]*)\"|'([^']*)'", args)
                if len(parts) != 2:
                    return None
                a, b = (p[0] or p[1] for p in parts)
            a, b = (re.sub(f"{_UNDEFINED}.*?{_UNDEFINED}", "", self.expand(x)).strip() for x in (a, b))
            return (a == b) == (m.group(1) == "ifeq")
        m = re.match(r"^(ifdef|ifndef)\s+(\S+)$", line)
        if m:
            defined = bool(self.vars.get(self.expand(m.group(2)), "").strip())
            return defined == (m.group(1) == "ifdef")
        return None


def parse_makefile(path: Path) -> _Make:
    """The Makefile's variables and rules (targets, prerequisites, recipe lines as written), conditionals
    taken with the file's own values and included makefiles inlined."""
    make = _Make(path.resolve().parent)
    active: list[bool] = []          # one per open conditional: whether its current branch is taken
    taken: list[bool] = []           # whether any branch of it was taken
    rule = None
    top, seen = path.resolve().parent, {path.resolve()}
    pending = _logical_lines(path)
    pending.reverse()
    while pending:
        line = pending.pop()
        stripped = line.strip()
        head = stripped.split(None, 1)[0] if stripped else ""
        if not line.startswith("\t") and head in ("ifeq", "ifneq", "ifdef", "ifndef"):
            on = all(active) and bool(make.condition(stripped))
            active.append(on)
            taken.append(on)
            continue
        if not line.startswith("\t") and head == "else":
            if active:
                rest = stripped[4:].strip()
                parent_on = all(active[:-1])
                on = parent_on and not taken[-1] and (not rest or bool(make.condition(rest)))
                active[-1] = on
                taken[-1] = taken[-1] or on
            continue
        if not line.startswith("\t") and head == "endif":
            if active:
                active.pop()
                taken.pop()
            continue
        if not all(active):
            continue
        included = _included(line, make, top)
        if included is not None:
            for inc in reversed(included):       # their lines come next, in order, as if written here
                if inc not in seen:
                    seen.add(inc)
                    pending += reversed(_logical_lines(inc))
            rule = None
            continue
        if line.startswith("\t"):
            if rule is not None:
                rule[2].append(line.strip())
            continue
        if not stripped:
            continue
        m = _ASSIGN.match(stripped)
        if m:
            name, op, value = m.groups()
            if op == "+=":
                make.vars[name] = (make.vars.get(name, "") + " " + value).strip()
            elif op in (":=", "::="):
                make.vars[name] = make.expand(value)
            elif op == "?=":
                make.vars.setdefault(name, value)
            elif op == "!=":
                make.vars[name] = f"{_UNDEFINED}{name}{_UNDEFINED}"
            else:
                make.vars[name] = value
            rule = None
            continue
        m = _RULE.match(stripped)
        if m:
            recipe_inline = []
            prereqs = m.group(2)
            if ";" in prereqs:
                prereqs, _, cmd = prereqs.partition(";")
                recipe_inline.append(cmd.strip())
            rule = (make.expand(m.group(1)).split(), make.expand(prereqs).split(), recipe_inline)
            make.rules.append(rule)
    return make


def _makefile_words(path: Path) -> list[str]:
    make = parse_makefile(path)
    recipes = _default_goal_recipes(make.rules)
    words: list[str] = []
    for r in recipes:
        text = make.expand(r)
        if re.search(r"(^|[\s;&|])cmake\s", text):     # -D there sets a CMake cache variable, not a macro
            continue
        try:
            words += shlex.split(text, comments=False)
        except ValueError:
            words += text.split()
    return words


def _default_goal_recipes(rules) -> list[str]:
    """Recipes of the first ordinary target, of the targets it depends on (transitively), and of every
    pattern or suffix rule (they build the objects): not those of `clean`, `run` or another side target."""
    ordinary = [r for r in rules if r[0] and not r[0][0].startswith(".") and "%" not in r[0][0]]
    patterns = [r for r in rules if r[0] and ("%" in r[0][0] or re.match(r"^\.\w+(\.\w+)?$", r[0][0])
                                             and not r[0][0].startswith((".PHONY", ".SUFFIXES")))]
    by_target: dict[str, list] = {}
    for r in ordinary:
        for t in r[0]:
            by_target.setdefault(t, []).append(r)
    out: list[str] = []
    if ordinary:
        todo, seen = [ordinary[0][0][0]], set()
        while todo:
            t = todo.pop()
            if t in seen:
                continue
            seen.add(t)
            for r in by_target.get(t, []):
                out += r[2]
                todo += r[1]
    for r in patterns:
        out += r[2]
    return out


# --- CMake ------------------------------------------------------------------------------------------------

_CMAKE_CMD = re.compile(r"\b([A-Za-z_]\w*)\s*\(([^()]*(?:\([^()]*\)[^()]*)*)\)", re.S)
_SCOPES = {"PUBLIC", "PRIVATE", "INTERFACE", "SYSTEM", "BEFORE", "AFTER"}


def _cmake_words(path: Path) -> list[str]:
    text = re.sub(r"#[^\n]*", "", path.read_text(errors="replace"))
    base = str(path.parent)
    cvars = {n: base for n in ("CMAKE_CURRENT_SOURCE_DIR", "CMAKE_SOURCE_DIR", "PROJECT_SOURCE_DIR",
                               "CMAKE_CURRENT_LIST_DIR")}

    def expand(s: str) -> str:
        for _ in range(10):
            new = re.sub(r"\$\{(\w+)\}", lambda m: cvars.get(m.group(1), f"{_UNDEFINED}{m.group(1)}{_UNDEFINED}"), s)
            if new == s:
                break
            s = new
        return s

    words: list[str] = []
    for m in _CMAKE_CMD.finditer(text):
        cmd = m.group(1).lower()
        try:
            args = [expand(a) for a in shlex.split(m.group(2))]
        except ValueError:
            args = [expand(a) for a in m.group(2).split()]
        args = [a for a in args if not a.startswith("$<")]      # generator expressions
        if cmd == "set" and args:
            cvars[args[0]] = " ".join(a for a in args[1:] if a not in ("CACHE", "PARENT_SCOPE"))
            if args[0] in ("CMAKE_CUDA_STANDARD", "CMAKE_CXX_STANDARD") and len(args) > 1 and args[1].isdigit():
                words.append(f"-std=c++{args[1]}")
        elif cmd == "include_directories":
            words += [f"-I{a}" for a in args if a not in _SCOPES]
        elif cmd == "target_include_directories":
            words += [f"-I{a}" for a in args[1:] if a not in _SCOPES]
        elif cmd in ("add_definitions", "add_compile_options"):
            words += args
        elif cmd == "target_compile_options":
            words += [a for a in args[1:] if a not in _SCOPES]
        elif cmd == "add_compile_definitions":
            words += [f"-D{a}" for a in args]
        elif cmd == "target_compile_definitions":
            words += [f"-D{a.removeprefix('-D')}" for a in args[1:] if a not in _SCOPES]
        else:   # a project's own function with keyword arguments: INCLUDE_DIRS a b, COMPILE_DEFINITIONS X
            words += _keyword_words(args)
    return words


_KEYWORDS = {"INCLUDE_DIRS": "-I", "INCLUDE_DIRECTORIES": "-I", "COMPILE_DEFINITIONS": "-D", "DEFINITIONS": "-D",
             "COMPILE_OPTIONS": ""}


def _keyword_words(args: list[str]) -> list[str]:
    """`f(NAME x INCLUDE_DIRS a b COMPILE_DEFINITIONS N=4 SOURCES ...)` -> ['-Ia', '-Ib', '-DN=4']: the
    keyword-argument idiom of projects that wrap add_executable in their own function."""
    out, prefix = [], None
    for a in args:
        if re.fullmatch(r"[A-Z][A-Z0-9_]+", a):
            prefix = _KEYWORDS.get(a)
        elif prefix is not None:
            out.append(prefix + a.removeprefix(prefix) if prefix else a)
    return out
