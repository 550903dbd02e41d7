"""Compile flags for parsing: from compile_commands.json when there is one, stated defaults otherwise.

nvcc command lines carry many options clang rejects (-gencode, -rdc, -Xcompiler, -ccbin, --expt-*, ...).
Rather than chase nvcc's option list, parsing keeps only what changes how the source reads: include
paths, macro definitions and the language standard. The original nvcc options are kept apart, so the
MEP can be built with the application's own flags.
"""
from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import MepgenError

#: flags (exact or prefix) that take the next argument as their value and matter for parsing
_KEEP_WITH_VALUE = ("-I", "-isystem", "-iquote", "-idirafter", "-D", "-U", "-include")
_PATH_FLAGS = ("-I", "-isystem", "-iquote", "-idirafter", "-include")
#: nvcc options whose value is a separate argument (dropped for parsing, kept for the MEP)
_NVCC_WITH_VALUE = {
    "-gencode", "--generate-code", "-arch", "--gpu-architecture", "-code", "--gpu-code", "-Xcompiler",
    "--compiler-options", "-Xptxas", "--ptxas-options", "-Xlinker", "--linker-options", "-Xcudafe",
    "-ccbin", "--compiler-bindir", "-maxrregcount", "--maxrregcount", "-o", "--output-file", "-MF", "-MT",
    "-MQ", "-t", "--threads", "--default-stream", "-x", "--diag-suppress", "-rdc", "--std", "-std",
    "-Xnvlink", "-Xarchive", "--keep-dir", "-odir",
}
#: nvcc options that say nothing about the code and need not be passed to the MEP build
_NOT_FOR_MEP = {"-c", "-dc", "-o", "--output-file", "-MD", "-MMD", "-MF", "-MT", "-MQ", "-M", "-MM"}

DEFAULT_STD = "c++17"
CUDA_SUFFIXES = (".cu",)
SOURCE_SUFFIXES = (".cu", ".cpp", ".cc", ".cxx", ".c++", ".C")
HEADER_SUFFIXES = (".cuh", ".h", ".hpp", ".hh", ".hxx", ".inl")


@dataclass
class CompileFlags:
    """The flags of one translation unit, split by use."""

    parse_args: list[str] = field(default_factory=list)  # for libclang (paths made absolute)
    defines: list[str] = field(default_factory=list)  # NAME or NAME=VALUE, in order
    include_dirs: list[str] = field(default_factory=list)  # absolute
    std: str = DEFAULT_STD
    nvcc_args: list[str] = field(default_factory=list)  # the application's nvcc options for the MEP build

    def to_json(self) -> dict:
        return {"defines": self.defines, "include_dirs": self.include_dirs, "std": self.std,
                "nvcc_args": self.nvcc_args}


def _split_joined(arg: str, flag: str) -> str | None:
    """'-Ifoo' -> 'foo' for flag '-I'; None when arg is not that flag with a joined value."""
    if arg.startswith(flag) and len(arg) > len(flag):
        rest = arg[len(flag):]
        return rest[1:] if rest.startswith("=") and flag != "-D" else rest
    return None


def parse_command(args: list[str], directory: Path) -> CompileFlags:
    """Split one compiler command line (argv[0] included) into parsing and MEP flags."""
    flags = CompileFlags()
    directory = Path(directory)

    def absolute(p: str) -> str:
        return str((directory / p).resolve()) if not Path(p).is_absolute() else p

    i, n = 1, len(args)
    while i < n:
        a = args[i]
        matched = False
        for flag in _KEEP_WITH_VALUE:
            if a == flag and i + 1 < n:
                value, step = args[i + 1], 2
            else:
                value, step = _split_joined(a, flag), 1
                if value is None:
                    continue
            matched = True
            if flag in _PATH_FLAGS:
                value = absolute(value)
            flags.parse_args += [flag, value]
            if flag == "-D":
                flags.defines.append(value)
                flags.nvcc_args.append(f"-D{value}")
            elif flag == "-U":
                flags.nvcc_args.append(f"-U{value}")
            elif flag == "-include":
                flags.nvcc_args += ["-include", value]
            else:
                flags.include_dirs.append(value)
            i += step
            break
        if matched:
            continue
        if a.startswith(("-std=", "--std=")):
            flags.std = a.split("=", 1)[1]
        elif a in ("-std", "--std") and i + 1 < n:
            flags.std = args[i + 1]
            i += 1
        elif a in _NVCC_WITH_VALUE and i + 1 < n:
            if a not in _NOT_FOR_MEP:
                flags.nvcc_args += [a, args[i + 1]]
            i += 1
        elif a.startswith("-") and a not in _NOT_FOR_MEP and not a.startswith(("-M", "-o")):
            flags.nvcc_args.append(a)
        # plain arguments (the source file, objects) are dropped
        i += 1
    flags.parse_args.append(f"-std={flags.std}")
    return flags


@dataclass
class CompileEntry:
    file: Path  # absolute
    flags: CompileFlags


def find_compile_commands(app: Path, given: Path | None) -> Path | None:
    """compile_commands.json given with -p (file or folder), else in APP/ or one of its build folders."""
    if given is not None:
        given = Path(given)
        path = given / "compile_commands.json" if given.is_dir() else given
        if not path.is_file():
            raise MepgenError(f"compile_commands.json not found at {path}")
        return path
    candidates = [app / "compile_commands.json"]
    candidates += sorted(app.glob("build*/compile_commands.json"))
    candidates += sorted(app.glob("cmake-build-*/compile_commands.json"))
    candidates += sorted(app.glob("out/*/compile_commands.json"))
    return next((c for c in candidates if c.is_file()), None)


def load_compile_commands(path: Path, app: Path) -> list[CompileEntry]:
    """Entries of compile_commands.json for sources inside `app`; a clear error when the file is bad."""
    try:
        text = path.read_bytes().decode("utf-8")
    except OSError as e:
        raise MepgenError(f"cannot read {path}: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise MepgenError(f"cannot read {path}: not UTF-8 text (byte {e.start})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise MepgenError(f"{path} is not valid JSON (line {e.lineno}: {e.msg})") from None
    if not isinstance(data, list):
        raise MepgenError(f"{path} must hold a JSON list of compile commands")
    entries: dict[Path, CompileEntry] = {}
    for k, item in enumerate(data):
        if not isinstance(item, dict) or "file" not in item or "directory" not in item:
            raise MepgenError(f"{path}: entry {k} lacks 'file' or 'directory'")
        directory = Path(item["directory"])
        if "arguments" in item:
            args = item["arguments"]
            if not isinstance(args, list) or not all(isinstance(x, str) for x in args):
                raise MepgenError(f"{path}: entry {k}: 'arguments' must be a list of strings")
        elif "command" in item:
            try:
                args = shlex.split(item["command"])
            except ValueError as e:
                raise MepgenError(f"{path}: entry {k}: cannot split 'command' ({e})") from None
        else:
            raise MepgenError(f"{path}: entry {k} has neither 'arguments' nor 'command'")
        file = (directory / item["file"]).resolve()
        if file.suffix not in SOURCE_SUFFIXES or not file.is_relative_to(app):
            continue
        entries.setdefault(file, CompileEntry(file, parse_command(args, directory)))
    return list(entries.values())


def default_flags(app: Path, include_dirs: list[str], defines: list[str], std: str = DEFAULT_STD) -> CompileFlags:
    """The stated defaults for scanning without compile_commands.json: -I APP, -I APP/include, then -I/-D given."""
    args = ["nvcc"]
    for d in [str(app), *([str(app / "include")] if (app / "include").is_dir() else []), *include_dirs]:
        args += ["-I", d]
    for d in defines:
        args += ["-D", d]
    args.append(f"-std={std}")
    return parse_command(args, app)
