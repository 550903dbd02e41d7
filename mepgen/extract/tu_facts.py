"""Everything extraction learns from one translation unit, as plain data (so workers can return it)."""
from __future__ import annotations

import time
from pathlib import Path

from ..parsing import clang
from .closure import ClosureBuilder, add_global_spaces, global_spaces
from .kernels import is_kernel, kernel_json
from .launches import find_launch_sites, local_init
from .source import SourceFiles, qualified_name


def _app_tops(tu, src: SourceFiles) -> list:
    """The translation unit's top-level cursors in the application's files. Most top-level cursors come
    from system headers (the C++ library, the shim): asking libclang whether a location is in a system
    header is much cheaper than fetching its file name, so those are dropped first."""
    out = []
    for c in tu.cursor.get_children():
        loc = c.location
        if loc.is_in_system_header:
            continue
        f = loc.file
        if f is not None and src.in_app(f.name):
            out.append(c)
    return out


def _kernels_in(tops: list):
    """Kernel definitions among the application's declarations (namespaces and extern "C" searched)."""
    for c in tops:
        if c.kind.name in ("NAMESPACE", "LINKAGE_SPEC"):
            yield from _kernels_in(list(c.get_children()))
        elif is_kernel(c) and c.is_definition():
            yield c


def _host_constants(tops: list, src: SourceFiles) -> dict[str, dict]:
    """Namespace-scope `const`/`constexpr` variables with their initializers, e.g. `kAlpha = 0.1f`:
    launch arguments often name them."""
    out = {}

    def visit(cursors):
        for c in cursors:
            if c.kind.name in ("NAMESPACE", "LINKAGE_SPEC"):
                visit(c.get_children())
            elif c.kind.name == "VAR_DECL" and (c.type.is_const_qualified() or "constexpr" in
                                                 [t.spelling for t in list(c.get_tokens())[:3]]):
                init = local_init(c, src)
                if init is not None:
                    out[qualified_name(c)] = {"init": init, "type": c.type.spelling,
                                              "file": src.rel(c.location.file.name), "line": c.location.line}
    visit(tops)
    return out


def _diagnostics(tu, src: SourceFiles) -> list[dict]:
    out = []
    for d in tu.diagnostics:
        if d.severity < 3:  # notes and warnings
            continue
        loc = d.location
        where = src.rel(loc.file.name) if loc.file is not None and src.in_app(loc.file.name) else (
            loc.file.name if loc.file is not None else "")
        out.append({"severity": "fatal" if d.severity == 4 else "error", "file": where, "line": loc.line,
                    "message": d.spelling})
    return out


def tu_facts(path: str, parse_args: list[str], app_root: str) -> dict:
    """Parse one translation unit and return its kernels (with closures), launch sites and included files."""
    t0 = time.perf_counter()
    src = SourceFiles(Path(app_root))
    tu = clang.parse(Path(path), parse_args)
    includes = [path] + [inc.include.name for inc in tu.get_includes()]
    file_order: dict[str, int] = {}
    for name in includes:
        file_order.setdefault(name, len(file_order))
    tops = _app_tops(tu, src)
    builder = ClosureBuilder(tops, src, file_order)
    spaces = global_spaces(tops)
    kernels = []
    for k in _kernels_in(tops):
        entry = kernel_json(k, src)
        entry["closure"] = builder.closure(k)
        add_global_spaces(entry["closure"], spaces)
        kernels.append(entry)
    sites, calls = find_launch_sites(tops, src)
    host_constants = _host_constants(tops, src)
    macros = {}
    for c in tops:
        if c.kind.name == "MACRO_DEFINITION":
            text = src.cursor_text(c)
            if not text[len(c.spelling):].startswith("("):  # object-like
                macros[c.spelling] = text[len(c.spelling):].strip()
    app_files = sorted({src.rel(n) for n in file_order if src.in_app(n)})
    return {
        "file": src.rel(path),
        "files": app_files,
        "kernels": kernels,
        "launch_sites": sites,
        "calls": calls,
        "object_macros": macros,
        "host_constants": host_constants,
        "diagnostics": _diagnostics(tu, src),
        "parse_seconds": round(time.perf_counter() - t0, 4),
    }
