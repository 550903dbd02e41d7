"""The application's plain C and C++ sources: files without CUDA code, kept for value tracing.

A launch's sizes often come from code that has no CUDA in it: `main.c` reads `n = atoi(argv[1])` and calls
`run_gpu(n)` defined in a `.cu` file. Extraction parses only the CUDA sources (kernels and launches); the files
listed here (`.c` in C, `.cpp`/`.cc`/`.cxx` in C++, each with the application's include folders and defines) are
what the mep stage reads, lazily, when a value leads out of the CUDA sources (mep/hostsrc.py). Nothing is parsed
here: listing them costs a directory walk.
"""
from __future__ import annotations

import os
from pathlib import Path

from .flags import CompileFlags, parse_command
from .buildfiles import read_build_files

C_SUFFIXES = (".c",)
CXX_SUFFIXES = (".cpp", ".cc", ".cxx", ".c++", ".C")
_SKIP = {".mepgen", ".git", ".svn", ".hg", "CMakeFiles", "__pycache__", "node_modules"}


def language_of(path: Path) -> str | None:
    """`c`, `c++`, or None for a file that is neither."""
    return "c" if path.suffix in C_SUFFIXES else "c++" if path.suffix in CXX_SUFFIXES else None


def _std(flags: CompileFlags, language: str) -> str:
    """The language standard to parse with: the file's own; a C file given a C++ standard (the defaults are
    for CUDA) gets GNU C17, the C compilers' default."""
    if language == "c" and ("++" in flags.std or flags.std.startswith("c++")):
        return "gnu17"
    return flags.std


def host_sources(app: Path, cuda_units: list[Path], default: CompileFlags | None,
                 entries: list | None = None) -> list[dict]:
    """The plain C/C++ sources of the application (not among `cuda_units`): with compile_commands.json the
    files its `entries` list, with their own flags; otherwise every such file under `app`, with `default`."""
    taken = {Path(p).resolve() for p in cuda_units}
    found: list[tuple[Path, CompileFlags]] = []
    if entries is not None:
        found = [(e.file, e.flags) for e in entries if e.file.resolve() not in taken and language_of(e.file)]
    elif default is not None:
        for dirpath, dirnames, filenames in os.walk(app):
            dirnames[:] = sorted(d for d in dirnames if d not in _SKIP and not d.startswith("."))
            for f in sorted(filenames):
                p = Path(dirpath) / f
                if language_of(p) and p.resolve() not in taken:
                    found.append((p, default))
    out, folders = [], {}
    for p, flags in found:
        lang = language_of(p)
        include_dirs, defines = list(flags.include_dirs), list(flags.defines)
        if entries is None:     # a program in a sub-folder with its own Makefile (`CC_FLAGS = -I../lib`)
            own = _folder_flags(p.parent, Path(app), folders)
            include_dirs += [d for d in own[0] if d not in include_dirs]
            defines += [d for d in own[1] if d not in defines]
        out.append({"file": str(p.relative_to(app)), "language": lang, "include_dirs": include_dirs,
                    "defines": defines, "std": _std(flags, lang)})
    return out


def with_folder_flags(flags: CompileFlags, path: Path, app: Path, cache: dict) -> CompileFlags:
    """`flags` plus the include folders and defines of the build file of the source's own sub-folder (a
    program in `cuda/` whose Makefile says `-I../common`), when it has one."""
    inc, defs = _folder_flags(Path(path).parent, Path(app), cache)
    inc = [d for d in inc if d not in flags.include_dirs]
    defs = [d for d in defs if d not in flags.defines]
    if not inc and not defs:
        return flags
    args = ["nvcc", *[x for d in [*flags.include_dirs, *inc] for x in ("-I", d)],
            *[x for d in [*flags.defines, *defs] for x in ("-D", d)], f"-std={flags.std}"]
    return parse_command(args, Path(app))


def _folder_flags(folder: Path, app: Path, cache: dict) -> tuple[list[str], list[str]]:
    """Include folders and defines of the build file nearest to `folder` below the application's root (the
    root's own are in the default flags already)."""
    d = folder
    while d != app and app in d.parents:
        if d not in cache:
            build = read_build_files(d)
            cache[d] = (build.include_dirs, build.defines) if build is not None else None
        if cache[d] is not None:
            return cache[d]
        d = d.parent
    return [], []
