"""One kernel's mep.yaml, assembled from the inventory, the parsed application and the inference modules."""
from __future__ import annotations

import re

from .. import cexpr, cppeval
from ..errors import MepgenError
from ..spec import KernelRef, Launch, Param, Spec, Timing, Todo, Verify, Work, itemsize
from . import counts, infer
from .access import analyze
from .buildcfg import build_config
from .constants import device_constants
from .launch import LaunchCursors, dims, find_launches
from .limits import launch_beyond_limits
from .project import Project
from .records import record_of, scaled
from .resolve import Resolver, Symbols
from .reach import keep_reached
from .targs import settle, site_template_args
from .tolerances import summing_loops, tolerances
from .work_bytes import work_bytes, written_only
from .syntax import strip, struct_field

_FIELD_ORDER = ["sizes", "params", "constants", "launch"]   # todos in the order mep.yaml shows the fields


def choose_launch(project: Project, kernel: dict, only: dict | None = None) -> tuple[dict, LaunchCursors]:
    """The first launch site mepgen can read (the inventory lists them in source order) that the run reaches:
    of `if (t <= 2) k<2><<<..>>>(..); else if (t <= 32) k<32><<<..>>>(..);` the one whose condition holds when
    mepgen decides them (reach.py); `only`: that site."""
    readable = []
    for site in [only] if only is not None else kernel["launch_sites"]:
        found = find_launches(project, kernel["usr"], site["enclosing_usr"], site.get("file"))
        if found:
            readable.append((site, next((f for f in found if f.line == site["line"]), found[0])))
    if len(readable) > 1:
        resolver = Resolver(project, Symbols(), set(project.macros))
        pairs = [(lc.callee or lc.grid, project.find_function(site["enclosing_usr"], site.get("file")), site, lc)
                 for site, lc in readable]
        if all(p[0] is not None for p in pairs):
            kept, _ = keep_reached(resolver, pairs)
            readable = [(site, lc) for _, _, site, lc in kept]
    if readable:
        return readable[0]
    where = ", ".join(f"{s['file']}:{s['line']}" for s in kernel["launch_sites"]) or "none in the sources"
    raise MepgenError(f"{kernel['qualified_name']}: no launch site mepgen can read (sites: {where}); an MEP "
                      f"reproduces a kernel as the application launches it")


def assemble(project: Project, inventory: dict, kernel: dict, sizes_override: dict[str, int],
             detect_gpu: bool = True, site: dict | None = None,
             symbols: Symbols | None = None) -> tuple[Spec, list[str]]:
    """The spec of one kernel and the notes worth telling the user (other instantiations, ...).
    `site`: the launch site to reproduce (default: the first mepgen can read); `symbols`: size symbols shared
    with another kernel's spec (a chain's feeders name the same host values as the target does)."""
    notes: list[str] = []
    cursor = project.find_function(kernel["usr"], kernel.get("file"))
    if cursor is None:
        raise MepgenError(f"{kernel['qualified_name']}: its definition is not in the parsed sources; "
                          f"rerun `mepgen extract`")
    site, lc = choose_launch(project, kernel, site)
    enclosing = project.find_function(site["enclosing_usr"], site.get("file"))
    symbols = symbols if symbols is not None else Symbols()
    resolver = Resolver(project, symbols, set(project.macros))
    targs_list, targ_notes, exact = site_template_args(project, kernel, cursor, site, lc, enclosing, resolver)
    notes += targ_notes
    param_cursors = [c for c in cursor.get_children() if c.kind.name == "PARM_DECL"]
    args = list(lc.args) + [None] * (len(kernel["params"]) - len(lc.args))
    for prm, arg in zip(kernel["params"], args):
        a = strip(arg) if arg is not None else None
        if not prm["is_pointer"] and a is not None and a.kind.name == "DECL_REF_EXPR" and a.referenced is not None:
            symbols.preferred[a.referenced.get_usr()] = prm["name"]
    at = next((c.extent.start.offset for c in (lc.grid, lc.block) if c is not None and c.extent.start.file is not None
               and project.text(c)), None)
    unsettled = None
    if not exact:
        with resolver.inside(enclosing, at):
            targs_list, unsettled = settle(targs_list, kernel, project, resolver)
    targs = {tp["name"]: a for tp, a in zip(kernel["template_params"], targs_list)}
    why = unsettled or ("not written, not deducible from the arguments' types, or from an enclosing template the "
                        "application does not instantiate in a source mepgen read")
    targ_todo = [] if len(targs_list) == len(kernel["template_params"]) else [Todo(
        "launch", f"the launch at {site['file']}:{site['line']} instantiates {kernel['qualified_name']} with template "
        f"argument(s) {', '.join(tp['name'] for tp in kernel['template_params'][len(targs_list):])} that mepgen "
        f"could not derive ({why}); write them into launch.callee")]
    if len(kernel["instantiations"]) > 1:
        notes.append(f"instantiated as {', '.join('<' + ', '.join(i) + '>' for i in kernel['instantiations'])}; "
                     f"this MEP uses <{', '.join(targs_list)}> from {site['file']}:{site['line']}")
    with resolver.inside(enclosing, at):
        values, todo, scalar_notes = infer.scalar_values(kernel["params"], param_cursors, args, resolver, targs)
        mark = len(resolver.unsure)
        grid = dims(resolver, lc.grid)
        block = dims(resolver, lc.block)
        launch_unsure = resolver.unsure[mark:]
        smem = resolver.expr(lc.shared_mem) if lc.shared_mem is not None else "0"
    facts = analyze(cursor, project.text)
    broken = body_errors(project, cursor)

    struct_fields = _struct_fields(values, param_cursors)
    macros = {m for m in project.macros if project.macro_value(m) is not None}
    known = lambda: macros | set(symbols.reasons) | set(sizes_override)
    to_sizes = lambda e: counts.to_sizes(e, values, struct_fields, facts.locals, known())

    nnz = None
    if facts.csr:
        nnz = symbols.get("csr:nnz", "NNZ", "number of nonzeros of the CSR matrix (the last row pointer); "
                          "mepgen cannot know it from the sources", set(project.macros))
    params: list[Param] = []
    counts_by_name: dict[str, str] = {}
    count_symbols: set[str] = set()       # made up for a count: its todo is at the parameter
    for i, (prm, cur, arg) in enumerate(zip(kernel["params"], param_cursors, args)):
        dtype = infer.dtype_of(prm["type"], targs)
        if dtype is None and cur is not None:      # a typedef of a numeric type (`typedef float real;`)
            dtype = infer.dtype_of(cur.type.get_canonical().spelling, targs)
        ctype = prm["type"]
        if dtype is None and prm["is_pointer"] and cur.type.get_canonical().kind.name == "POINTER":
            # a typedef of a number (`typedef unsigned char uchar;`): its canonical type says which
            pointee = cur.type.get_canonical().get_pointee()
            if pointee.kind.name != "RECORD" and pointee.kind.name != "ELABORATED":
                dtype = infer.dtype_of(pointee.spelling, targs)
        if not prm["is_pointer"]:
            pointers = infer.pointer_fields(cur.type)
            if pointers and any(t.field == f"params[{i}].value" for t in todo):
                for t in todo:
                    if t.field == f"params[{i}].value":
                        t.reason = (f"`{prm['name']}` ({ctype}) is a struct passed by value that holds device "
                                    f"pointers ({', '.join(pointers)}): their buffers exist only in a run of the "
                                    f"application; complete it from one: `mepgen capture {kernel['qualified_name']} "
                                    "-- ./app ARGS`")
            params.append(Param(prm["name"], "scalar", ctype, dtype, value=values[prm["name"]],
                                note=scalar_notes.get(prm["name"])))
            continue
        role, why = infer.role_of(prm["name"], facts, infer.pointer_is_const(cur))
        if broken and not (role == "in" and infer.pointer_is_const(cur)):
            # accesses read from a body that did not parse are no evidence: `u[i] += v` may have vanished
            role, why = "inout", f"the kernel did not parse cleanly ({broken[0]}): treated as read and written"
            todo.append(Todo(f"params[{i}].role", f"the kernel's body did not parse cleanly ({broken[0]}"
                             f"{f' and {len(broken) - 1} more' if len(broken) > 1 else ''}), so mepgen cannot be "
                             f"sure how `{prm['name']}` is used: check its role (in, out or inout; inout until "
                             "then) and fix the build flags that hid a header or macro"))
        pointee = cur.type.get_canonical().get_pointee().get_declaration()
        if dtype is not None and pointee is not None and pointee.kind.name != "NO_DECL_FOUND" \
                and project.in_app(pointee):
            dtype = None          # the application's own type spelled like a numeric one (a legacy `half`)
        record = record_of(cur.type) if dtype is None else None
        if record is not None:
            dtype = record.dtype
        elem_size = record.size if record is not None else itemsize(dtype)
        with resolver.inside(enclosing, at):
            count, how = infer.buffer_count(prm["name"], arg, resolver, facts, elem_size, to_sizes)
        if count is None and nnz and infer.indexed_by_nonzero(prm["name"], facts):
            count, how = nnz, "indexed by the nonzero counter of a CSR row loop"
        if count is None:
            sym = symbols.get(f"count:{prm['name']}", f"{prm['name']}_count", f"no allocation or bounded index "
                              f"tells how many elements `{prm['name']}` has", set(project.macros))
            count_symbols.add(sym)
            if sym in sizes_override:               # `--size A_COUNT=...`: the person has set it
                count, how = sym, f"sizes.{sym} given with --size"
            else:
                said = f"{how}; " if how else ""
                count, how = sym, "unknown"
                todo.append(Todo(f"params[{i}].count", f"{_access_summary(prm['name'], facts)}; {said}mepgen could "
                                 f"not bound it: set sizes.{sym} or write the count"))
        if dtype is None:
            size = cur.type.get_canonical().get_pointee().get_size()
            of = f" ({size}-byte elements)" if size > 0 else ""
            inner = infer.pointer_fields(cur.type.get_canonical().get_pointee())
            held = f", records holding device pointers ({', '.join(inner)})" if inner else ""
            open_targs = [tp["name"] for tp in kernel["template_params"][len(targs_list):]
                          if re.search(rf"\b{re.escape(tp['name'])}\b", prm["type"])]
            if open_targs:
                todo.append(Todo(f"params[{i}].dtype", f"`{prm['type']}`: its element type is the kernel's template "
                                 f"parameter {open_targs[0]}, which mepgen could not derive at the launch (see the "
                                 "launch todo); write the element's numpy dtype", kind="launch"))
                dtype = "uint8"
        if dtype is None:
            todo.append(Todo(f"params[{i}].dtype", f"`{prm['type']}`{of}{held} is not a numeric element type mepgen "
                             f"can generate; use a numpy dtype of the same size or an init of kind file, or complete "
                             f"it from a run of the application: `mepgen capture {kernel['qualified_name']} -- "
                             "./app ARGS`"))
            dtype = "uint8"
        if record is not None:
            count = scaled(count, record.lanes)
            how += f"; {record.type_name} records of {record.lanes} x {record.dtype}, kept as {record.dtype} elements"
        if role == "out":
            short = _short_write(prm["name"], count, facts, to_sizes, lambda e: _numeric(e, project, symbols, sizes_override))
            if short:
                role, why = "inout", short
        counts_by_name[prm["name"]] = count
        params.append(Param(prm["name"], role, ctype, dtype, count=count, note=f"{role}: {why}; count: {how}",
                            lanes=record.lanes if record is not None else None))
    for p in params:
        if p.role in ("in", "inout"):
            p.init, why = infer.default_init(p, facts, counts_by_name, nnz)
            if why:
                p.note = f"{p.note}; init: {why}"

    constants = device_constants(project, kernel, resolver, todo, cursor, targs)
    for c in constants:            # an output is named by its name alone: a parameter's would be another one
        if c.role == "inout" and any(p.name == c.name for p in params):
            c.role, c.note = None, c.note.replace("the kernel writes it: compared as an output", "the kernel writes "
                                                  "it, but a parameter of the kernel has its name: not compared")
    launch_todo = []
    written = [project.text(c) or "?" for c, v in ((lc.grid, grid), (lc.block, block)) if c is not None and v is None]
    grid, block, why = _checked_launch(grid, block, project, symbols, sizes_override, written)
    if why is not None:
        unsure = "; ".join(dict.fromkeys(launch_unsure))
        launch_todo.append(Todo("launch", f"the launch configuration at {site['file']}:{site['line']} "
                                f"{unsure + ': ' if unsure else ''}{why}; mepgen writes no launch it did not "
                                "derive: write grid and block as expressions"))
    notes += list(dict.fromkeys(resolver.choices))
    exprs = [*grid, *block, smem or "0", *(p.count for p in params if p.count), *values.values(),
             *(c.value or "" for c in constants), *(str(c.count) for c in constants if c.count)]
    for p in params:
        if p.init:
            exprs += [str(v) for v in p.init.args.values()]
    nnz_rows = next((p.init.args["rows"] for p in params if p.init and p.init.kind == "csr_row_ptr"), None)
    sizes = _sizes(project, exprs, symbols, sizes_override, nnz, nnz_rows, count_symbols, todo)
    for p in params:
        banded = infer.csr_columns_band(p, facts, nnz, sizes)
        if banded is not None:
            p.init.args["band"] = banded[0]
            p.note = re.sub(r"init: [^;]*$", f"init: {banded[1]}", p.note)
    # (with placeholder sizes a launch beyond the limits says nothing: those sizes are todos already)
    beyond = launch_beyond_limits(grid, block, sizes, project.macros) \
        if grid and block and not launch_todo and not any(t.field.startswith("sizes.") for t in todo) else None
    if beyond is not None:
        launch_todo.append(Todo("launch", f"the launch at {site['file']}:{site['line']} cannot run: {beyond}; the "
                                "application's own launch fails at this size too: set sizes the launch can take"))
    todo = sorted(targ_todo + launch_todo + todo, key=lambda t: _FIELD_ORDER.index(re.split(r"[.\[]", t.field)[0]))
    spec = Spec(
        kernel=KernelRef(kernel["qualified_name"], kernel["id"], kernel["file"],
                         inventory["files"].get(kernel["file"], ""), kernel["start_byte"], kernel["end_byte"],
                         list(targs_list)),
        sizes=sizes, params=params, constants=constants,
        launch=Launch(grid, block, counts.unparen(smem or "0"), _callee(kernel, targs_list),
                      varies={k: v for k, v in (site.get("varies") or {}).items() if k in ("grid", "block")}),
        build=build_config(inventory, kernel, set(sizes), detect_gpu),
        verify=Verify(input_sets=3, seed=1, tolerance=tolerances(params, facts, summing_loops(project, cursor, kernel),
                                                                  constants, project.text(cursor))),
        timing=Timing(), work=Work(bytes=work_bytes(params, grid, block, kernel.get("loop_depth", 0),
                                                    written_only(params, facts))),
        todo=todo)
    return spec, notes


def body_errors(project: Project, cursor) -> list[str]:
    """`file:line: message` of each error libclang reported inside the kernel's definition."""
    f = cursor.extent.start.file
    if f is None:
        return []
    lo, hi = cursor.extent.start.offset, cursor.extent.end.offset
    out = []
    units = [cursor.translation_unit] if getattr(cursor, "translation_unit", None) is not None else project.tus
    for unit in units:      # the unit the kernel was read from (a file #included into another parses alone too)
        for d in unit.diagnostics:
            loc = d.location
            if d.severity >= 3 and loc.file is not None and loc.file.name == f.name and lo <= loc.offset <= hi:
                text = f"{project.rel(cursor)}:{loc.line}: {d.spelling}"
                if text not in out:
                    out.append(text)
    return out


def _checked_launch(grid, block, project: Project, symbols: Symbols, override: dict[str, int],
                   written: list[str] = ()):
    """(grid, block, None) when every dimension is an expression C++ evaluates from sizes and macros, else
    (placeholder dims, placeholder dims, why): a launch mepgen did not derive is never written as if it were.
    `written`: the launch's grid/block as the source writes them, where they were not traced (for the reason)."""
    why = None
    _prefetch([*(grid or []), *(block or [])], project, symbols, override)
    if grid is None or block is None:
        shown = ", ".join(f"`{' '.join(w.split())[:120]}`" for w in written)
        why = f"could not be traced to sizes{f' ({shown})' if shown else ''}"
    for e in [*(grid or []), *(block or [])]:
        if why is None and _numeric(e, project, symbols, override) is None:
            why = f"gives `{e}`, which does not evaluate to an integer from sizes and macros"
    ok = lambda dims: dims is not None and all(_numeric(e, project, symbols, override) is not None for e in dims)
    return (grid if ok(grid) else ["1"]), (block if ok(block) else ["1"]), why


def _prefetch(exprs: list[str], project: Project, symbols: Symbols, override: dict[str, int]) -> None:
    """Evaluate the expressions plain integer arithmetic cannot in one compile (cppeval caches each)."""
    values, hard = {}, []
    for e in exprs:
        for n in cexpr.names(e):
            v = override.get(n, symbols.from_run.get(n, project.macro_value(n)))
            values[n] = infer.DEFAULT_SIZE if v is None and n in symbols.reasons else v
    known = {k: v for k, v in values.items() if v is not None}
    for e in exprs:
        if not cexpr.names(e) - set(known) and cexpr.evaluate(e, known, compiler=False) is None:
            hard.append(e)
    if len(hard) > 1:
        cppeval.evaluate_many(hard, known)


def _struct_fields(values: dict[str, str], param_cursors) -> dict[str, str]:
    out = {}
    for cur in param_cursors:
        v = values.get(cur.spelling)
        decl = cur.type.get_canonical().get_declaration()
        if v is None or decl is None or decl.kind.name not in ("STRUCT_DECL", "CLASS_DECL"):
            continue
        for f in decl.get_children():
            if f.kind.name == "FIELD_DECL":
                fv = struct_field(v, cur.type, f.spelling)
                if fv is not None:
                    out[f"{cur.spelling}.{f.spelling}"] = fv
    return out


def _access_summary(name: str, facts) -> str:
    idx = sorted({a.via or a.index or "*" for a in facts.accesses.get(name, [])})
    return f"`{name}` is accessed at {', '.join(f'[{i}]' for i in idx)}" if idx else f"`{name}` is never indexed"


def _sizes(project, exprs, symbols: Symbols, override: dict[str, int], nnz, nnz_rows, count_symbols,
           todo) -> dict[str, int]:
    names: list[str] = []
    for e in exprs:
        for n in sorted(cexpr.names(str(e))):
            if n not in names:
                names.append(n)
    sizes: dict[str, int] = {}
    for n in names:
        if n in override:
            sizes[n] = override[n]
        elif n in symbols.reasons:
            continue
        elif project.macro_value(n) is not None:
            sizes[n] = project.macro_value(n)
    for n, reason in symbols.reasons.items():
        if n not in names:
            continue
        if n in override:
            sizes[n] = override[n]
            continue
        if n in count_symbols:
            sizes[n] = infer.DEFAULT_SIZE
        elif n == nnz:
            rows = cexpr.evaluate(nnz_rows, {**sizes, **{s: infer.DEFAULT_SIZE for s in symbols.reasons}}) \
                if nnz_rows else None
            sizes[n] = 5 * (rows or infer.DEFAULT_SIZE)
            todo.append(Todo(f"sizes.{n}", f"{reason}; the default 5 x rows is a guess for a 5-point stencil"))
        elif n in symbols.from_run:          # the application's run command gives it: a stated choice
            sizes[n] = symbols.from_run[n]
        elif n in symbols.defaults:
            sizes[n] = symbols.defaults[n]
            todo.append(Todo(f"sizes.{n}", f"{reason} (keep it or `--size {n}=VALUE`, then remove this todo)"))
        else:
            sizes[n] = infer.DEFAULT_SIZE
            todo.append(Todo(f"sizes.{n}", f"{reason}; {infer.DEFAULT_SIZE} is a placeholder (`mepgen mep ... "
                             f"--size {n}=VALUE` sets it; nothing is allocated until it is set)", symbols.kinds.get(n)))
    return {k: sizes[k] for k in names if k in sizes}


def _numeric(expr: str, project: Project, symbols: Symbols, override: dict[str, int]) -> int | None:
    """An expression over sizes and macros evaluated at their defaults (placeholders included)."""
    values = {}
    for n in cexpr.names(expr):
        v = override.get(n, symbols.from_run.get(n, project.macro_value(n)))
        values[n] = infer.DEFAULT_SIZE if v is None and n in symbols.reasons else v
    return cexpr.evaluate(expr, {k: v for k, v in values.items() if v is not None})


def _short_write(name: str, count: str | None, facts, to_sizes, numeric) -> str | None:
    """Why an output is partly written (its bound checks cover fewer elements than it has), else None:
    `if (i < n - KW + 1) out[i] = ...` leaves the last KW - 1 elements as they were, so the buffer is inout."""
    total = numeric(count) if count else None
    if total is None:
        return None
    covered = []
    for a in facts.accesses.get(name, []):
        if a.kind != "write":
            continue
        c = counts.index_count(a, facts.locals, facts.thread_locals)
        c = to_sizes(c) if c is not None else None
        v = numeric(c) if c is not None else None
        if v is None:
            return None                  # a write whose extent is unknown: no claim either way
        covered.append((v, c))
    if covered and max(covered)[0] < total:
        v, c = max(covered)
        return (f"written only under bounds that cover {c} of its {count} elements ({v} of {total}): the others "
                "keep their input values")
    return None


def _callee(kernel: dict, targs: list[str]) -> str:
    return kernel["qualified_name"] + (f"<{', '.join(targs)}>" if targs else "")
