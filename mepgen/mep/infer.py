"""Parameters of an MEP: role, dtype, element count, value and input generator of each kernel parameter.

Evidence, strongest first: the host values at the launch site (followed by :mod:`.resolve`), the size of
the allocation a pointer argument comes from, then the kernel's own accesses (:mod:`.access`). What no
evidence settles becomes a `todo` with the reason, and gets a named default a person can change.
"""
from __future__ import annotations

import math
import re

from .. import cexpr
from ..spec import C_TYPES, Init, Param, Todo
from . import counts
from .access import KernelFacts, only_upper_bounds
from .allocs import allocation, explain
from .readers import kind_of
from .resolve import Resolver
from ..cexpr import integer, names

DEFAULT_SIZE = 1 << 20          # default of a size symbol nothing traces (always paired with a todo)


def dtype_of(type_spelling: str, targs: dict[str, str]) -> str | None:
    t = re.sub(r"\b(const|volatile|__restrict__|__restrict|struct)\b|\*|&", " ", type_spelling)
    t = " ".join(t.split())
    t = targs.get(t, t)
    return C_TYPES.get(t)


_NUMERIC = re.compile(r"[\s\d.eE+\-*/()xXfFlLuU]*\d[\s\d.eE+\-*/()xXfFlLuU]*")


def inline_constants(text: str, macros: dict[str, str]) -> str:
    """A scalar's value with the application's non-integer numeric macros written out (`#define MAX_PD (3.0e6)`,
    physical constants of the host code): the MEP defines the macros its kernel uses and the integer ones
    become sizes, so `PRECISION / MAX_PD` left as written did not compile in the MEP. Other names stay."""
    for _ in range(10):
        found = [n for n in names(text) if n in macros and _NUMERIC.fullmatch(str(macros[n]))
                 and integer(n, macros) is None]
        if not found:
            break
        for n in found:
            text = re.sub(rf"(?<![\w.]){re.escape(n)}(?!\w)", f"({str(macros[n]).strip()})", text)
    return text


def scalar_values(kernel_params, cursors, args, resolver: Resolver, targs) -> tuple[dict, list[Todo], dict]:
    """Values of the by-value parameters at the launch site; returns (values, todos, notes)."""
    values, todo, notes = {}, [], {}
    for i, (prm, cur, arg) in enumerate(zip(kernel_params, cursors, args)):
        if prm["is_pointer"]:
            continue
        mark = len(resolver.unsure)
        value = resolver.expr(arg) if arg is not None else None
        if value is not None:
            values[prm["name"]] = counts.unparen(inline_constants(value, resolver.p.macros))
            notes[prm["name"]] = f"launch argument `{resolver.p.text(arg) or '?'}`"
            continue
        ctype = cur.type.get_canonical().spelling
        values[prm["name"]] = f"{ctype}{{}}"         # never runs: the todo blocks `mepgen run`
        why = resolver.unsure[-1] if resolver.unsure else None
        known = next((w for w in reversed(resolver.unsure[mark:]) if kind_of(w) is not None), None)
        why = known or why           # a reason that says where the value comes from (a file, the run) first
        unsure = f" ({why})" if why else ""
        todo.append(Todo(f"params[{i}].value", f"`{prm['name']}` ({ctype}) gets "
                         f"`{resolver.p.text(arg) if arg is not None else '?'}` at the launch, which mepgen "
                         f"could not trace to a value{unsure}; write a C++ expression, or record it from a run "
                         f"(`mepgen capture KERNEL -- ./app ARGS`)", kind_of(known)))
    return values, todo, notes


def role_of(name: str, facts: KernelFacts, is_const: bool) -> tuple[str, str]:
    """(role, reasoning) of a pointer parameter from how the kernel uses it."""
    accs = sorted(facts.accesses.get(name, []), key=lambda a: a.offset)
    kinds = {a.kind for a in accs}
    writes = kinds & {"write", "rmw", "atomic", "call_write", "alias"}
    reads = kinds & {"read", "rmw", "atomic", "call_read"}
    if "atomic" in kinds:
        return "inout", "accumulated with atomics: starts from zeros, as the application clears it before the launch"
    if not writes or (is_const and writes <= {"alias", "call_write"}):
        return "in", "only read" + ("" if is_const else " (not declared const)")
    if kinds & {"alias", "call_write"}:
        how = "aliased by a local pointer or reference" if "alias" in kinds else "passed to a function that may write it"
        return "inout", f"written and {how}: treated as read and written"
    plain = [a for a in accs if a.kind == "write"]
    full = all(only_upper_bounds(a.guards) and a.via is None for a in plain + [a for a in accs if a.kind == "rmw"])
    if not reads:
        if full:
            return "out", "only written, under upper-bound checks only: every element is written"
        return "inout", ("written only where " + "; ".join(sorted({g.text for a in plain for g in a.guards}))
                         + ": the other elements keep their input values")
    same_index = len({a.index for a in accs}) == 1
    if accs[0].kind == "write" and same_index and full:
        return "out", f"first access writes {name}[{accs[0].index}] and every later read is of that element"
    return "inout", "read and written"


def buffer_count(name, arg, resolver: Resolver, facts: KernelFacts, elem_size, to_sizes) -> tuple[str | None, str]:
    """(count expression over sizes, how it was found) of a pointer parameter."""
    alloc = allocation(resolver, arg) if arg is not None else None
    if alloc is not None:
        count = counts.count_from_bytes(alloc[0], elem_size)
        checked = to_sizes(count)
        if checked is not None:
            how = f"allocated with {alloc[1]}({resolver.p.text(arg) if arg is not None else name}, {alloc[0]})"
            return checked, how
        unsized = (f"the launch passes `{resolver.p.text(arg)}`, allocated with `{alloc[0]}` bytes, which is not "
                   "an expression over sizes mepgen knows")
    else:
        unsized = None
    for var, (rp, row) in facts.csr.items():
        if rp == name:
            bound = next((counts.index_count(a, facts.locals, facts.thread_locals) for a in facts.accesses[name]
                          if a.index and re.sub(r"\s", "", a.index) == f"{row}+1"), None)
            if bound is not None and to_sizes(bound) is not None:
                return to_sizes(bound), f"CSR row pointers: `{rp}[{row} + 1]` with the bound of `{row}`"
    accs = facts.accesses.get(name, [])
    if accs and all(a.index is None and a.via is None and a.kind in ("read", "write", "rmw", "atomic") for a in accs):
        return "1", f"only its first element is used (`*{name}`, an atomic on `{name}`)"
    found = []
    for a in facts.accesses.get(name, []):
        c = counts.index_count(a, facts.locals, facts.thread_locals)
        if c is not None and to_sizes(c) is not None:
            found.append((to_sizes(c), a))
    if found:
        best = max(found, key=lambda x: (len(x[0]), x[0]))
        return best[0], f"index `{best[1].index}` under `{'; '.join(g.text for g in best[1].guards)}`"
    if arg is None:
        return None, "mepgen could not read the launch's argument for it"
    return None, unsized or explain(resolver, arg)


def default_init(p: Param, facts: KernelFacts, counts_by_name: dict[str, str], nnz: str | None) -> tuple[Init, str]:
    """How inputs of an in/inout buffer are made, and why."""
    if p.role == "inout" and any(a.kind == "atomic" for a in facts.accesses.get(p.name, [])):
        return Init("zeros"), "atomic accumulation target"
    for var, (rp, row) in facts.csr.items():
        if rp == p.name and nnz:
            rows = counts.unparen(p.count[:-len("+ 1")].strip()) if p.count.replace(" ", "").endswith("+1") \
                else f"{p.count} - 1"
            return Init("csr_row_ptr", {"rows": rows, "nnz": nnz}), "CSR row pointers (monotone, 0 .. nnz)"
    gathered = [other for other, accs in facts.accesses.items() for a in accs if a.via == p.name]
    if gathered and p.dtype and p.dtype.startswith(("int", "uint")):
        target = gathered[0]
        return Init("index", {"low": 0, "high": counts_by_name.get(target, "1")}), \
            f"its values index {target}: kept in [0, count of {target})"
    if p.dtype and p.dtype.startswith("float"):
        return Init("uniform", {"low": -1.0, "high": 1.0}), ""
    if p.dtype == "bool":
        return Init("uniform", {"low": 0, "high": 1}), ""
    return Init("uniform", {"low": 0, "high": 15}), "small integers"


def csr_columns_band(p: Param, facts: KernelFacts, nnz: str | None, sizes: dict) -> tuple[int, str] | None:
    """For CSR column indices (an `index` input walked by a CSR row loop's nonzero counter): the half-width of
    the band around each row's diagonal their generator keeps to, and why; None for any other input. Uniform
    columns over all of x make every read of x a random gather, which no PDE or FEM matrix does (heatcg's MEP
    ran its spmv 2.8x slower than the application on them); about sqrt(columns) is the band of a matrix on a 2D
    mesh in its natural ordering."""
    if not (nnz and p.init is not None and p.init.kind == "index" and indexed_by_nonzero(p.name, facts)):
        return None
    high = cexpr.evaluate(p.init.args.get("high"), sizes)
    if not high or high < 4:
        return None
    band = math.isqrt(high)
    return band, (f"CSR column indices: within +-{band} of each row's diagonal, about sqrt({high}) (a banded "
                  f"matrix, as a PDE matrix on a 2D mesh); delete `band` for uniform columns, or capture the "
                  f"application's matrix")


def indexed_by_nonzero(name: str, facts: KernelFacts) -> bool:
    return any(a.index is not None and a.index.strip() in facts.csr for a in facts.accesses.get(name, []))


def pointer_is_const(cursor) -> bool:
    t = cursor.type.get_canonical()
    pointee = t.get_pointee() if t.kind.name == "POINTER" else t.element_type
    return pointee.is_const_qualified()


def pointer_fields(t) -> list[str]:
    """Names of the pointer fields of a struct type (`struct Planes { float* r; float* g; int n; }` -> [r, g]),
    nested structs included (`a.b`); empty for any other type."""
    out: list[str] = []

    def visit(ty, prefix: str, depth: int) -> None:
        decl = ty.get_canonical().get_declaration()
        if depth > 4 or decl is None or decl.kind.name not in ("STRUCT_DECL", "CLASS_DECL", "UNION_DECL"):
            return
        for f in decl.get_children():
            if f.kind.name != "FIELD_DECL":
                continue
            ft = f.type.get_canonical()
            if ft.kind.name == "POINTER":
                out.append(prefix + f.spelling)
            elif ft.kind.name == "RECORD":
                visit(ft, f"{prefix}{f.spelling}.", depth + 1)
    visit(t, "", 0)
    return out
