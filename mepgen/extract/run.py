"""`mepgen extract APP/`: parse the application, merge what each translation unit found, rank, write."""
from __future__ import annotations

import contextlib
import ctypes
import datetime
import os
import signal
import threading
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field, replace
from pathlib import Path

from .. import __version__
from ..errors import MepgenError
from ..inventory import SCHEMA, VERSION
from ..workspace import Workspace, write_json
from ..parsing import clang
from ..progress import progress
from .cache import ExtractCache, FileHashes, flags_key
from .appbuild import read_app_build
from .buildfiles import read_build_files
from .definitions import built_files, mark_definitions
from .flags import DEFAULT_STD, HEADER_SUFFIXES, SOURCE_SUFFIXES, CompileFlags, default_flags, \
    find_compile_commands, load_compile_commands
from .profile import load_profile
from .ranking import STATIC_BASIS, assign_ranks, profile_scores, static_scores
from .hostfiles import host_sources, with_folder_flags
from .tu_facts import tu_facts

SKIP_DIRS = {".mepgen", ".git", ".svn", ".hg", "CMakeFiles", "__pycache__", "node_modules"}


@dataclass
class ExtractOptions:
    compile_commands: Path | None = None
    include_dirs: list[str] = field(default_factory=list)
    defines: list[str] = field(default_factory=list)
    profile: Path | None = None
    jobs: int = 0  # 0: all cores
    use_cache: bool = True
    write: bool = True  # False: return the inventory without writing .mepgen/ (e.g. to check a patch)


def _scan(app: Path) -> tuple[list[Path], list[Path]]:
    sources, headers = [], []
    for dirpath, dirnames, filenames in os.walk(app):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not d.startswith("."))
        for f in sorted(filenames):
            p = Path(dirpath) / f
            if p.suffix in HEADER_SUFFIXES:
                headers.append(p)
            elif p.suffix in SOURCE_SUFFIXES:
                sources.append(p)
    return sources, headers


def _mentions_cuda(path: Path) -> bool:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return False
    return "__global__" in text or "<<<" in text or "cudaLaunch" in text


def check_text(path: Path) -> None:
    """A source file must be text: a binary file named .cu (NUL bytes: no source has them) would fail deep
    inside the parse; say which file it is and what to do instead. (Text in another encoding than UTF-8,
    Latin-1 comments say, is source code and parses.)"""
    try:
        data = path.read_bytes()
    except OSError as e:
        raise MepgenError(f"{path}: cannot be read ({e.strerror})") from None
    bad = data.find(b"\0")
    if bad >= 0:
        raise MepgenError(f"{path}: not a text file (byte {bad} is NUL: a binary named {path.suffix or 'like a source'}"
                          "?): remove or rename it, or keep it out of compile_commands.json")


def _plan(app: Path, opts: ExtractOptions) -> tuple[list[tuple[Path, CompileFlags]], str, list[Path], list[dict]]:
    """The translation units to parse with their flags, where the flags came from, the headers, and the plain
    C/C++ sources (not parsed here: the mep stage reads them for value tracing, extract/hostfiles.py)."""
    sources, headers = _scan(app)
    db = find_compile_commands(app, opts.compile_commands)
    if db is not None:
        entries = load_compile_commands(db, app)
        if not entries:
            raise MepgenError(f"{db} lists no source file inside {app}")
        units = []
        for e in entries:
            if opts.include_dirs or opts.defines:
                extra = default_flags(app, opts.include_dirs, opts.defines)
                e.flags.parse_args = e.flags.parse_args[:-1] + extra.parse_args
            if e.file.suffix == ".cu" or _mentions_cuda(e.file):
                check_text(e.file)
                units.append((e.file, e.flags))
        return units, str(db), headers, host_sources(app, [p for p, _ in units], None, entries)
    flags, source = plan_default_flags(app, opts)
    folders: dict = {}      # a program in a sub-folder parses with its own Makefile's -I/-D as well
    units = [(p, with_folder_flags(flags, p, app, folders)) for p in sources if p.suffix == ".cu" or _mentions_cuda(p)]
    build = read_app_build(app)
    if build is not None:   # the nvcc options the build compiles CUDA with (-use_fast_math, -Xptxas ...)
        units = [(p, _with_options(f, build.options_for(str(p.relative_to(app))))) for p, f in units]
        if build.nvcc_options or build.per_file:
            shown = " ".join(build.nvcc_options) or "per file"
            source += f"; nvcc options from {build.source}: {shown}"
    own = sorted(str(d.relative_to(app)) for d, f in folders.items() if f and (f[0] or f[1]))
    if own:
        source += f"; plus the -I/-D of the build files in {', '.join(own)} for the sources below them"
    for p, _ in units:
        check_text(p)
    return units, source, headers, host_sources(app, [p for p, _ in units], flags)


def _with_options(flags: CompileFlags, options: list[str]) -> CompileFlags:
    """A copy of `flags` with the build's nvcc options added (the default flags are shared by every unit)."""
    extra = [o for o in options if o not in flags.nvcc_args]
    return replace(flags, nvcc_args=[*flags.nvcc_args, *extra]) if extra else flags


def _built_sources(app: Path, units, db_path) -> tuple[set[str] | None, str]:
    """The sources the application's build compiles (relative), and where that was read."""
    if db_path is not None:
        return {str(p.relative_to(app)) for p, _ in units}, f"{Path(db_path).name} lists it"
    build = read_app_build(app)
    if build is None or not build.sources:
        return None, "no build file naming the sources"
    return set(build.sources), f"{build.source}'s default goal" if build.source != "CMakeLists.txt" else \
        "CMakeLists.txt's targets"


def build_files_json(app: Path) -> dict | None:
    """What the application's Makefile/CMakeLists.txt gave the parse, for the inventory."""
    build = read_build_files(app)
    return build.to_json() if build is not None else None


def plan_default_flags(app: Path, opts: ExtractOptions) -> tuple[CompileFlags, str]:
    """Without compile_commands.json: -I APP (-I APP/include), what the application's Makefile/CMakeLists.txt
    pass (include folders, defines, the C++ standard), then -I/-D from the command line; and where they came
    from, in words."""
    build = read_build_files(app)
    include_dirs = [*(build.include_dirs if build else []), *opts.include_dirs]
    defines = [*(build.defines if build else []), *opts.defines]
    std = (build.std if build else None) or DEFAULT_STD
    flags = default_flags(app, include_dirs, defines, std=std)
    text = f"defaults (no compile_commands.json): -I APP -I APP/include -std={std}"
    if build is not None:
        text += f"; from {build.source}: {build.flags_text() or 'no include folder or define'}"
        if build.not_used:
            text += f" (not used: {'; '.join(build.not_used)})"
    if opts.include_dirs or opts.defines:
        text += "; plus -I/-D given"
    return flags, text


def _worker_start() -> None:
    """In each parser process: Ctrl-C (sent to the whole process group) is the parent's to handle, and the
    process ends with its parent however the parent ends (Linux's parent-death signal)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)   # not the parent's handler: SIGTERM ends a parser
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)   # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass            # no prctl (not Linux): the parent's SIGTERM handler stops the workers instead


def _parse_all(jobs: list[tuple[str, list[str]]], app: Path, workers: int) -> list[dict]:
    if not jobs:
        return []
    with progress(f"parsing {len(jobs)} file(s)", total=len(jobs)) as bar:
        if workers <= 1 or len(jobs) == 1:
            out = []
            for path, args in jobs:
                bar.note(f"parsing {Path(path).name}")
                out.append(tu_facts(path, args, str(app)))
                bar.advance()
            return out
        pool = ProcessPoolExecutor(max_workers=min(workers, len(jobs)), initializer=_worker_start)
        with _sigterm_interrupts():
            try:
                futures = [pool.submit(tu_facts, path, args, str(app)) for path, args in jobs]
                for _ in as_completed(futures):
                    bar.advance()
                results = [f.result() for f in futures]
            except BaseException:
                # interrupted (Ctrl-C, SIGTERM) or failed: stop the parsers now, not after the whole parse
                procs = list((getattr(pool, "_processes", None) or {}).values())
                for p in procs:
                    with contextlib.suppress(Exception):
                        p.terminate()
                pool.shutdown(wait=False, cancel_futures=True)
                for p in procs:
                    with contextlib.suppress(Exception):
                        p.join(1)
                raise
        pool.shutdown()
        return results


@contextlib.contextmanager
def _sigterm_interrupts():
    """SIGTERM ends the parse as Ctrl-C does (the workers are stopped, nothing is written)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum, frame):
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def _kernel_id(qualified: str) -> str:
    return qualified.replace("::", ".").replace("(anonymous)", "anon")


def _merge(results: list[dict]) -> tuple[list[dict], list[dict], dict[str, str]]:
    kernels: dict[tuple, dict] = {}
    by_usr: dict[str, dict] = {}
    for r in results:
        for k in r["kernels"]:
            key = (k["file"], k["start_byte"])
            if key not in kernels:
                kernels[key] = {**k, "launch_sites": [], "instantiations": []}
                by_usr[k["usr"]] = kernels[key]
    sites: dict[tuple, dict] = {}
    calls: list[dict] = []
    macros: dict[str, str] = {}
    host_constants: dict[str, dict] = {}
    for r in results:
        calls += r["calls"]
        host_constants.update(r["host_constants"])
        for name, value in r["object_macros"].items():
            macros.setdefault(name, value)
        own = {k["usr"]: kernels[(k["file"], k["start_byte"])] for k in r["kernels"]}
        for s in r["launch_sites"]:
            # the kernel this unit defines under that name: two programs of one folder may both define `k`
            sites.setdefault((s["file"], s["start_byte"], s["kernel_usr"]), (s, own.get(s["kernel_usr"])))
    for s, mine in sorted(sites.values(), key=lambda sk: (sk[0]["file"], sk[0]["start_byte"])):
        k = mine or by_usr.get(s["kernel_usr"])
        if k is None:
            continue  # a launch of a kernel whose definition is outside the application
        k["launch_sites"].append({key: v for key, v in s.items() if key not in ("kernel_usr",)})
        if s["template_args"] and s["template_args"] not in k["instantiations"]:
            k["instantiations"].append(s["template_args"])
    out = sorted(kernels.values(), key=lambda k: (k["file"], k["start_byte"]))
    names = [k["qualified_name"] for k in out]
    for k in out:
        k["id"] = _kernel_id(k["qualified_name"])
        if names.count(k["qualified_name"]) > 1:  # overloads: make the id unique
            k["id"] += f"@{Path(k['file']).stem}.{k['start_line']}"
    return out, calls, {"macros": macros, "host_constants": host_constants}


def extract(app: Path, opts: ExtractOptions, log=lambda msg: None) -> dict:
    app = Path(app)
    if not app.exists():
        raise MepgenError(f"{app}: no such file or directory")
    if not app.is_dir():
        raise MepgenError(f"{app} is not a directory: give the application's source tree")
    app = app.resolve()
    clang.cindex()  # a clear error now rather than in every worker
    ws = Workspace(app)
    if not opts.write:
        return _extract(app, ws, opts, log)
    with ws.lock("extract"):     # no patch or other writer changes the sources or .mepgen/ meanwhile
        return _extract(app, ws, opts, log)


def _extract(app: Path, ws: Workspace, opts: ExtractOptions, log) -> dict:
    units, flags_source, headers, host = _plan(app, opts)
    db_path = find_compile_commands(app, opts.compile_commands)
    hashes = FileHashes(app)
    cache = ExtractCache(ws.cache_dir) if opts.use_cache else None
    results, todo, keys = [], [], {}
    for path, flags in units:
        rel = str(path.relative_to(app))
        keys[rel] = flags_key(flags.parse_args)
        hit = cache.get(rel, keys[rel], hashes) if cache else None
        if hit is not None:
            results.append(hit)
        else:
            todo.append((str(path), flags.parse_args))
    workers = opts.jobs or os.cpu_count() or 1
    log(f"{len(units)} translation units: {len(results)} unchanged, {len(todo)} to parse on {workers} cores")
    fresh = _parse_all(todo, app, workers)
    # headers with kernels that no translation unit includes are parsed on their own
    seen_files = {f for r in results + fresh for f in r["files"]}
    lone = [h for h in headers if str(h.relative_to(app)) not in seen_files and _mentions_cuda(h)]
    for h in lone:
        check_text(h)
    if lone:
        base = units[0][1] if units else plan_default_flags(app, opts)[0]
        for h in lone:
            keys[str(h.relative_to(app))] = flags_key(base.parse_args)
        fresh += _parse_all([(str(h), base.parse_args) for h in lone], app, workers)
    if cache is not None:
        for r in fresh:
            cache.put(r["file"], keys[r["file"]], r, hashes)
    results += fresh
    if not results:
        raise MepgenError(f"no CUDA sources (*.cu, or sources with __global__ or <<<) found in {app}")

    parsed, skipped, tolerated = [], [], []
    for r in results:
        errors = [d for d in r["diagnostics"] if d["severity"] in ("error", "fatal")]
        in_kernels = [d for d in errors if d.get("in_kernel", True)]
        if in_kernels and _mark_unreadable(r, in_kernels):
            parsed.append(r)            # its other kernels stand; the ones holding an error say so
            for k in r["kernels"]:
                if k.get("unreadable"):
                    log(f"could not read {k['qualified_name']} ({k['file']}:{k['start_line']}): {k['unreadable']}; "
                        "the other kernels of the file are kept")
            continue
        (skipped if in_kernels else parsed).append(r)
        if in_kernels:
            first = in_kernels[0]
            log(f"skipped {r['file']}: {len(errors)} parse errors, first in a kernel or what it uses "
                f"{first['file']}:{first['line']}: {first['message']}")
        elif errors or r.get("stubbed_includes"):
            tolerated.append(r)
            first = errors[0] if errors else None
            log(f"kept {r['file']}: " + (f"{len(errors)} errors outside its kernels, first {first['file']}:"
                                         f"{first['line']}: {first['message']}" if first else "no errors")
                + (f"; headers on no include path, stubbed empty: {', '.join(r['stubbed_includes'])}"
                   if r.get("stubbed_includes") else ""))
    over_budget = [o for r in parsed for o in r.get("over_budget", [])]
    for o in over_budget:
        log(f"left out {o['kernel']} ({o['file']}:{o['line']}): {o['reason']}")
    kernels, calls, values = _merge(parsed)
    _link(kernels, parsed)
    known = {(k["file"], k["start_byte"]) for k in kernels}
    for k in _unreadable_kernels(skipped):
        if (k["file"], k["start_byte"]) not in known:
            known.add((k["file"], k["start_byte"]))
            k["id"] = _kernel_id(k["qualified_name"])
            if any(x["qualified_name"] == k["qualified_name"] for x in kernels):
                k["id"] += f"@{Path(k['file']).stem}.{k['start_line']}"
            kernels.append(k)
    direct, how = _built_sources(app, units, db_path)
    for line in mark_definitions(kernels, built_files(direct, results), how, _kernel_id):
        log(line)
    macros = values["macros"]
    if not kernels:
        why = ""
        if skipped:
            first = next((d for d in skipped[0]["diagnostics"] if d.get("in_kernel", True)
                          and d["severity"] in ("error", "fatal")), None)
            why = f" ({len(skipped)} files skipped for parse errors" + (
                f"; first {first['file']}:{first['line']}: {first['message']}" if first else "") + ")"
        raise MepgenError(f"no __global__ kernels found in {app}{why}")
    for _, f in units:  # the build's -D: a source's unguarded #define comes after it and wins
        for d in f.defines:
            name, _, value = d.partition("=")
            macros.setdefault(name, value or "1")
    for d in opts.defines:  # -D values override the defaults written in the sources
        name, _, value = d.partition("=")
        macros[name] = value or "1"

    unmatched: list[str] = []
    if opts.profile is not None:
        fmt, prof = load_profile(opts.profile)
        unmatched = profile_scores(kernels, prof, fmt)
        basis = f"profile ({fmt}): {opts.profile}"
    else:
        static_scores(kernels, calls, macros)
        basis = STATIC_BASIS
    assign_ranks(kernels)

    files = sorted({f for r in parsed for f in r["files"]})
    reads = {r["file"]: r["files"] for r in parsed if "file" in r}   # the application files each unit read
    host_calls = _calls_reaching_launches(kernels, calls)
    inventory = {
        "schema": SCHEMA,
        "version": VERSION,
        "mepgen_version": __version__,
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "app_root": str(app),
        "flags_source": flags_source,
        "extract_options": {"compile_commands": str(opts.compile_commands) if opts.compile_commands else None,
                            "include_dirs": opts.include_dirs, "defines": opts.defines},
        "translation_units": [
            {"file": str(p.relative_to(app)), **f.to_json(), "reads": reads.get(str(p.relative_to(app)), [])}
            for p, f in units
        ],
        "host_sources": host,
        "ranking_basis": basis,
        "profile_unmatched": unmatched,
        "files": {f: hashes(f) for f in files},
        "skipped": [_file_report(r) for r in skipped],
        "tolerated": [{**_file_report(r), "stubbed_includes": r.get("stubbed_includes", [])} for r in tolerated],
        "over_budget": over_budget,
        "build_files": build_files_json(app) if db_path is None else None,
        "app_build": _app_build_json(app) if db_path is None else None,
        "kernels": [_finish(k, hashes) for k in sorted(kernels, key=lambda k: k["rank"])],
        "host_calls": host_calls,
        "host_constants": values["host_constants"],
        "macros": macros,
    }
    if opts.write:
        ws.ensure()
        write_json(ws.inventory_path, inventory)
        if cache is not None:
            cache.save(set(keys))
    return inventory


_CLOSURE_LISTS = ("device_functions", "types", "typedefs", "enums", "globals", "macros")
#: a definition brought from another file goes after every header member and before the kernel's own file
_LINKED_ORDER = 1 << 40      # after every member of the translation unit (orders start with file offsets)


def _app_build_json(app: Path) -> dict | None:
    build = read_app_build(app)
    return build.to_json() if build is not None else None


def _link(kernels: list[dict], results: list[dict]) -> None:
    """A kernel's file may only declare a device function (in a header) that another file defines: replace
    the declaration in its closure by that definition, and add what the definition needs, as a linker
    would (nvcc -rdc). A declaration no file defines stays, marked, and the MEP will not link."""
    defs: dict[str, dict] = {}
    for r in results:
        for usr, m in r.get("device_definitions", {}).items():
            defs.setdefault(usr, m)
    if not defs:
        return
    for k in kernels:
        c = k["closure"]
        for _ in range(8):   # definitions that call further declared-only functions
            pending = [m for m in c["device_functions"] if m.get("declaration_only") and m["usr"] in defs]
            if not pending:
                break
            for m in pending:
                d = defs[m["usr"]]
                c["device_functions"].remove(m)
                linked = {key: v for key, v in d.items() if key != "closure"}
                linked["order"] = [_LINKED_ORDER, d["start_byte"]]
                linked["linked_from"] = d["file"]
                c["device_functions"].append(linked)
                for key in _CLOSURE_LISTS:
                    have = {(x["file"], x.get("start_byte"), x.get("name")) for x in c[key]} | (
                        {x["usr"] for x in c[key] if "usr" in x} if key == "device_functions" else set())
                    for x in d["closure"].get(key, []):
                        if (x["file"], x.get("start_byte"), x.get("name")) in have or x.get("usr") in have:
                            continue
                        c[key].append(x)
                for h in d["closure"].get("headers", []) + [d["file"]]:
                    if h not in c["headers"] and h != k["file"]:
                        c["headers"].append(h)
                for h, incs in d["closure"].get("header_includes", {}).items():
                    c["header_includes"].setdefault(h, incs)
                c["header_includes"].setdefault(d["file"], d["closure"].get("includes", []))
        for key in _CLOSURE_LISTS:
            c[key].sort(key=lambda x: tuple(x.get("order", [0, x.get("start_byte", 0)])))


def _mark_unreadable(r: dict, in_kernels: list[dict]) -> bool:
    """Mark each kernel whose own text or closure holds a parse error `unreadable` (the first such error); True
    when the file's other kernels stand. False (the file is skipped) when an error lies in no one kernel's text
    (a command-line error, a record parsed before errors were attributed: nothing is marked) or every kernel
    holds one (each is marked: see _unreadable_kernels)."""
    hit: dict[str, dict] = {}
    for d in in_kernels:
        if not d.get("kernels"):
            return False
        for usr in d["kernels"]:
            hit.setdefault(usr, d)
    for k in r["kernels"]:
        d = hit.get(k["usr"])
        if d is not None:
            k["unreadable"] = f"{d['file']}:{d['line']}: {d['message']}"
    return bool(r["kernels"]) and not all(k["usr"] in hit for k in r["kernels"])


def _unreadable_kernels(skipped: list[dict]) -> list[dict]:
    """The kernels of skipped files (every kernel there holds a parse error), each marked `unreadable`: no MEP
    comes from them, but `mepgen capture` can record their launches (their launch sites, calls and macros are
    not used: the file did not parse)."""
    out = []
    for r in skipped:
        for k in r["kernels"]:
            if k.get("unreadable"):
                out.append({**k, "launch_sites": [], "instantiations": []})
    return out


def _file_report(r: dict) -> dict:
    """A parsed file with errors, for the inventory: its error count and first diagnostics, those inside a
    kernel or its closure (the reason a file is skipped) first."""
    first = sorted(r["diagnostics"], key=lambda d: not d.get("in_kernel", True))[:5]
    return {"file": r["file"], "diagnostics": first,
            "errors": sum(d["severity"] in ("error", "fatal") for d in r["diagnostics"])}


def _calls_reaching_launches(kernels: list[dict], calls: list[dict]) -> list[dict]:
    """The host calls on a path to a launch site (callers of launching functions, transitively), with
    their arguments as written: what a later stage follows to trace a launch argument to its value."""
    wanted = {s["enclosing_usr"] for k in kernels for s in k["launch_sites"]}
    keep: dict[tuple, dict] = {}
    frontier = set(wanted)
    while frontier:
        new = set()
        for c in calls:
            key = (c["file"], c["line"], c["callee_usr"])
            if c["callee_usr"] in frontier and key not in keep:
                keep[key] = c
                if c["caller_usr"] not in wanted:
                    wanted.add(c["caller_usr"])
                    new.add(c["caller_usr"])
        frontier = new
    return sorted(keep.values(), key=lambda c: (c["file"], c["line"]))


def _finish(k: dict, hashes: FileHashes) -> dict:
    used = [k["file"], *k["closure"]["headers"]]
    k["files"] = [{"path": f, "sha256": hashes(f)} for f in dict.fromkeys(used)]
    order = ["id", "name", "qualified_name", "rank", "score", "share", "file", "start_byte", "end_byte",
             "start_line", "end_line", "signature", "is_template", "template_params", "instantiations", "params",
             "attributes", "shared_memory", "features", "loop_depth", "launch_sites", "closure", "files",
             "rank_detail", "definition", "not_built", "unreadable", "usr"]
    return {key: k[key] for key in order if key in k}
