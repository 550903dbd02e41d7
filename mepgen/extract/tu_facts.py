"""Everything extraction learns from one translation unit, as plain data (so workers can return it)."""
from __future__ import annotations

import re
import tempfile
import time
from pathlib import Path

from ..budget import BudgetExceeded, time_budget
from ..parsing import clang
from .closure import ClosureBuilder, add_global_spaces, external_device_definitions, global_spaces
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
            elif c.kind.name == "VAR_DECL" and c.location.file is not None and src.in_app(c.location.file.name) \
                    and (c.type.is_const_qualified() or "constexpr" in
                                                 [t.spelling for t in list(c.get_tokens())[:3]]):
                init = local_init(c, src)
                if init is not None:
                    out[qualified_name(c)] = {"init": init, "type": c.type.spelling,
                                              "file": src.rel(c.location.file.name), "line": c.location.line}
    visit(tops)
    return out


_NOT_FOUND = re.compile(r"^'([^']+)' file not found")
_STUB_ROUNDS = 16


def _parse_stubbing_missing(path: Path, parse_args: list[str], stub_dir: Path):
    """Parse; while an #include names a header that is on no include path (<mpi.h> without the MPI
    compiler wrapper's flags, a generated header, a library that is not installed here), give it an empty
    stub and parse again. A missing header stops clang's template instantiation for the rest of the file
    (without stubs, an error inside a kernel could go unseen); with them, whatever the header should have
    declared shows up as ordinary errors, which `_diagnostics` places inside or outside the kernels."""
    tu = clang.parse(path, parse_args)
    stubbed: list[str] = []
    for _ in range(_STUB_ROUNDS):
        # an error, not fatal, since the parse keeps going past it (parsing/clang.py)
        new = [m.group(1) for d in tu.diagnostics if d.severity >= 3 and (m := _NOT_FOUND.match(d.spelling))]
        new = [n for n in dict.fromkeys(new) if n not in stubbed and not Path(n).is_absolute() and ".." not in Path(n).parts]
        if not new:
            break
        for name in new:
            stub = stub_dir / name
            stub.parent.mkdir(parents=True, exist_ok=True)
            stub.write_text(f"/* mepgen: empty stand-in for {name}, which no include path holds */\n")
        stubbed += new
        tu = clang.parse(path, [*parse_args, "-I", str(stub_dir)])
    return tu, stubbed


def _mark_missing(kernels: list[dict], stubbed: set[str]) -> None:
    """Flag the #includes that named a header on no include path: an MEP must not include them (they
    would not be found there either), and the kernel parsed without them."""
    for k in kernels:
        c = k["closure"]
        for inc in [*c.get("includes", []), *c.get("context_includes", []),
                    *(i for incs in c.get("header_includes", {}).values() for i in incs)]:
            if inc["spelling"] in stubbed and inc.get("resolved") is None:
                inc["missing"] = True


def _kernel_spans(kernels: list[dict]) -> dict[str, list[tuple[int, int]]]:
    """file -> line ranges of the kernels and of everything in their closures (device functions, types,
    typedefs, enums, globals): an error there makes a kernel's facts untrustworthy."""
    spans: dict[str, list[tuple[int, int]]] = {}
    for k in kernels:
        items = [k] + [m for key in ("device_functions", "types", "typedefs", "enums", "globals")
                       for m in k["closure"].get(key, [])]
        for m in items:
            spans.setdefault(m["file"], []).append((m["start_line"], m["end_line"]))
    return spans


def _own_spans(kernels: list[dict]) -> dict[str, dict[str, list[tuple[int, int]]]]:
    """Per kernel (by usr): its own file -> line ranges of it and its closure."""
    return {k["usr"]: _kernel_spans([k]) for k in kernels}


def _diagnostics(tu, src: SourceFiles, spans: dict[str, list[tuple[int, int]]],
                 own: dict[str, dict[str, list[tuple[int, int]]]] | None = None) -> list[dict]:
    """Errors, each marked `in_kernel` when it lies inside a kernel or its closure (or nowhere in a file:
    a command-line error), else it is in host code or in declarations no kernel uses. `kernels`: the usrs of the
    kernels whose own text or closure holds it (absent for an error in no file: every kernel's)."""
    out = []
    for d in tu.diagnostics:
        if d.severity < 3:  # notes and warnings
            continue
        loc = d.location
        where = src.rel(loc.file.name) if loc.file is not None and src.in_app(loc.file.name) else (
            loc.file.name if loc.file is not None else "")
        inside = not where or any(a <= loc.line <= b for a, b in spans.get(where, []))
        entry = {"severity": "fatal" if d.severity == 4 else "error", "file": where, "line": loc.line,
                 "message": d.spelling, "in_kernel": inside}
        if where and inside and own is not None:
            entry["kernels"] = [usr for usr, sp in own.items() if any(a <= loc.line <= b for a, b in sp.get(where, []))]
        out.append(entry)
    return out


def text_positions(tu, path: str) -> dict[str, tuple[int, ...]]:
    """Where each file's text lies in the translation unit as the compiler reads it: the offsets of the #include
    directives that lead to it from the main file (a file included twice is read where it was first). A declaration
    at `offset` of file F comes at `(*positions[F], offset)`; tuples compare as the text reads: fparam.h's
    `typedef int_t tab3_t[NBASE]` after `#define NBASE` of fbase.h, which fparam.h includes before it (ordering
    files by when each was opened put the typedef first)."""
    positions: dict[str, tuple[int, ...]] = {path: ()}
    for inc in tu.get_includes():
        name, parent = inc.include.name, inc.source.name if inc.source is not None else path
        if name not in positions:
            positions[name] = (*positions.get(parent, (1 << 39,)), inc.location.offset)
    return positions


def tu_facts(path: str, parse_args: list[str], app_root: str) -> dict:
    """Parse one translation unit and return its kernels (with closures), launch sites and included files."""
    with tempfile.TemporaryDirectory(prefix="mepgen-stubs-") as stubs:
        return _tu_facts(path, parse_args, app_root, Path(stubs))


def _tu_facts(path: str, parse_args: list[str], app_root: str, stub_dir: Path) -> dict:
    t0 = time.perf_counter()
    src = SourceFiles(Path(app_root))
    tu, stubbed = _parse_stubbing_missing(Path(path), parse_args, stub_dir)
    file_order = text_positions(tu, path)
    tops = _app_tops(tu, src)
    builder = ClosureBuilder(tops, src, file_order)
    spaces = global_spaces(tops)
    sites, calls = find_launch_sites(tops, src)
    launched_with: dict[str, list] = {}       # kernel usr -> types its launches instantiate it with
    by_template: dict[str, list] = {}         # function template usr -> types its calls instantiate it with
    for call in calls:
        usr, types = call.pop("_template_usr", None), call.pop("_instantiation_types", [])
        if usr is not None:
            by_template.setdefault(usr, []).extend(types)
    for site in sites:
        types = site.pop("_instantiation_types", [])
        if not types:         # a dependent launch in a function template: the types the template is called with
            types = by_template.get(site["enclosing_usr"], [])
        launched_with.setdefault(site["kernel_usr"], []).extend(types)
    kernels, over_budget = [], []
    for k in _kernels_in(tops):
        try:
            with time_budget(f"extract: reading kernel {qualified_name(k)}"):
                entry = kernel_json(k, src)
                entry["closure"] = builder.closure(k, launched_with.get(k.get_usr(), []))
        except BudgetExceeded as e:
            over_budget.append({"kernel": qualified_name(k), "file": src.rel(k.location.file.name),
                                "line": k.location.line, "reason": str(e)})
            continue
        add_global_spaces(entry["closure"], spaces)
        kernels.append(entry)
    if stubbed:
        _mark_missing(kernels, set(stubbed))
    device_definitions = external_device_definitions(tops, src, builder, str(Path(path)))
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
        "diagnostics": _diagnostics(tu, src, _kernel_spans(kernels), _own_spans(kernels)),
        "stubbed_includes": stubbed,
        "over_budget": over_budget,
        "device_definitions": device_definitions,
        "parse_seconds": round(time.perf_counter() - t0, 4),
    }
