"""The application's translation units, parsed once, with the indexes the MEP inference walks.

Tracing a launch argument back to a value needs to cross files: `heat_step()` in stencil.cu launches with
its parameter `g`, and only main.cu's call `heat_step(d_u, d_u_new, grid, ...)` says what `grid` is. So
every translation unit of the inventory is parsed (libclang, with the flags `mepgen extract` used) and
indexed by USR: function definitions, the calls to each function, and the macros the sources define.
"""
from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

from .. import cexpr
from ..parsing import clang
from ..parsing.vartemplates import space_of
from . import fnmacro
from .fnmacro import FunctionMacro
from .hostsrc import HostSources, tu_parse_args
from ..extract.launches import _overloaded

FUNCTION_KINDS = ("FUNCTION_DECL", "FUNCTION_TEMPLATE", "CXX_METHOD", "CONSTRUCTOR")
LAUNCH_APIS = ("cudaLaunchKernel", "cudaLaunchCooperativeKernel", "cudaLaunchKernelExC")


def walk(cursor):
    return clang.walk(cursor)


#: what every unwrap below looks through: libclang's implicit-conversion nodes and parentheses
WRAPPERS = ("UNEXPOSED_EXPR", "PAREN_EXPR")


def unwrap(c, also: tuple[str, ...] = (), skip_type_refs: bool = False):
    """The expression inside `c`'s wrappers (WRAPPERS plus the cursor kinds `also` names, casts say), down to the
    first node with not exactly one child; with `skip_type_refs`, a cast's TYPE_REF child does not count."""
    kinds = WRAPPERS + tuple(also)
    while c is not None and c.kind.name in kinds:
        kids = [k for k in c.get_children() if not (skip_type_refs and k.kind.name == "TYPE_REF")]
        if len(kids) != 1:
            break
        c = kids[0]
    return c


class Project:
    """Parsed translation units of one application and what they define and call."""

    def __init__(self, app_root: Path, translation_units: list[dict], only: list[str] | None = None,
                 host_sources: list[dict] | None = None):
        self.app_root = Path(app_root).resolve()
        # the plain C/C++ sources, parsed when a value leads there (mep/hostsrc.py)
        self.host = HostSources(self.app_root, host_sources or [])
        self._bytes: dict[str, bytes] = {}
        self._in_app: dict[str, bool] = {}
        self.tus = []
        self.functions: dict[str, object] = {}            # usr -> definition cursor
        self.definitions: dict[str, list] = defaultdict(list)  # usr -> its definitions in different files
        self.calls: dict[str, list] = defaultdict(list)   # callee usr -> [(call, caller), ...] in source order
        self.macros: dict[str, str] = {}                  # object-like macro -> replacement text
        self.macro_param_names: dict[str, set] = {}        # function-like macro -> its parameters' names
        self.function_macros: dict[str, FunctionMacro] = {}   # function-like macro -> parameters and body
        self.globals: dict[str, object] = {}              # usr -> namespace-scope VAR_DECL (definition)
        self.var_templates: dict[str, object] = {}        # usr -> namespace-scope variable template (mep/vartmpl.py)
        for tu in translation_units:
            if only is not None and tu["file"] not in only:
                continue
            for d in tu.get("defines", []):
                name, _, value = d.partition("=")
                self.macros.setdefault(name, value or "1")
            unit = clang.parse(self.app_root / tu["file"], tu_parse_args(tu))
            self.tus.append(unit)
            self._index(unit)

    # --- source text ---------------------------------------------------------------------------------
    def in_app(self, cursor) -> bool:
        f = cursor.location.file
        if f is None:
            return False
        hit = self._in_app.get(f.name)
        if hit is None:
            hit = self._in_app[f.name] = Path(f.name).resolve().is_relative_to(self.app_root)
        return hit

    def text(self, cursor) -> str:
        """The cursor's text as written (macro names stay macro names)."""
        ext = cursor.extent
        if ext.start.file is None:
            return ""
        start, end = ext.start.offset, ext.end.offset
        if end <= start:
            toks = list(cursor.get_tokens())
            if not toks or toks[0].extent.start.file is None:
                return ""
            start, end = toks[0].extent.start.offset, toks[-1].extent.end.offset
        return self._file(ext.start.file.name)[start:end].decode("utf-8", errors="replace")

    def _file(self, name: str) -> bytes:
        """A source file's bytes, read once."""
        if name not in self._bytes:
            self._bytes[name] = Path(name).read_bytes()
        return self._bytes[name]

    def rel(self, cursor) -> str:
        path = Path(cursor.location.file.name).resolve()
        return str(path.relative_to(self.app_root)) if path.is_relative_to(self.app_root) else str(path)

    def spelled_as_macro_parameter(self, cursor, tokens: list[str]) -> bool:
        """Whether `tokens`, what libclang gives for a cursor inside a macro invocation, are the name of the
        invoked macro's parameter (`v` of `#define RUN(v) run(v, d, len)` for the argument of `RUN(2.0f)`)
        rather than the code at the call."""
        if len(tokens) != 1 or cursor.extent.start.file is None:
            return False
        start = cursor.extent.start.offset
        text = self._file(cursor.extent.start.file.name)[start:start + 200].decode("utf-8", errors="replace")
        head = re.match(r"\s*([A-Za-z_]\w*)\s*\(", text)
        return bool(head) and tokens[0] in self.macro_param_names.get(head.group(1), ())

    # --- indexing ------------------------------------------------------------------------------------
    def _index(self, unit) -> None:
        for top in unit.cursor.get_children():
            if not self.in_app(top):
                continue
            if top.kind.name == "MACRO_DEFINITION":
                toks = list(top.get_tokens())
                function_like = len(toks) > 1 and toks[1].spelling == "(" and \
                    toks[1].extent.start.offset == toks[0].extent.end.offset
                if function_like:           # its parameters' names (spelled_as_macro_parameter)
                    close = next((i for i, t in enumerate(toks) if t.spelling == ")"), len(toks))
                    self.macro_param_names.setdefault(
                        top.spelling, {t.spelling for t in toks[2:close] if t.spelling not in (",", "...")})
                if not function_like:
                    self.macros.setdefault(top.spelling, " ".join(t.spelling for t in toks[1:]))
                elif top.spelling not in self.function_macros:
                    m = fnmacro.definition([t.spelling for t in toks])
                    if m is not None:
                        self.function_macros[top.spelling] = m
                continue
            self._index_decl(top)

    def _index_decl(self, c) -> None:
        k = c.kind.name
        if k in ("NAMESPACE", "LINKAGE_SPEC", "STRUCT_DECL", "CLASS_DECL", "CLASS_TEMPLATE"):
            for ch in c.get_children():
                self._index_decl(ch)
        elif k == "VAR_DECL":
            if c.is_definition() or c.get_usr() not in self.globals:
                self.globals[c.get_usr()] = c
        elif k == "UNEXPOSED_DECL" and space_of(c) is not None:
            self.var_templates.setdefault(c.get_usr(), c)
        elif k in FUNCTION_KINDS and c.is_definition():
            self.functions.setdefault(c.get_usr(), c)
            same = self.definitions[c.get_usr()]
            if not any(_file_of(x) == _file_of(c) for x in same):   # one per file: several programs' `main`
                same.append(c)
            for node in walk(c):
                if node.kind.name == "CALL_EXPR" and node.referenced is None:
                    for tmpl in _dependent_callees(node):   # `f<T>(x)` inside a template: an unresolved lookup
                        self.calls[tmpl.get_usr()].append((node, c))
                elif node.kind.name == "CALL_EXPR" and node.referenced is not None:
                    self.calls[node.referenced.get_usr()].append((node, c))
                    ref = node.referenced
                    if ref.kind.name in ("FUNCTION_DECL", "CXX_METHOD", "CONSTRUCTOR"):
                        # a function template's specialisation, or a method of a class template's instantiation
                        # (`t.put(x)` on a `Table<int>`): indexed under the template's own function too
                        tmpl = clang.specialized_template(ref)
                        if tmpl is not None and tmpl.get_usr() != ref.get_usr():
                            self.calls[tmpl.get_usr()].append((node, c))

    def read_host_files(self, name: str, writes: bool = False) -> None:
        """Parse and index the plain C/C++ sources that spell `name` (once per name; `writes`: only those whose
        text may change it, mep/hostsrc.py): the callers of a function or the writes of a global may be there.
        What was derived from the index before stays valid; the project-wide caches built from it are dropped."""
        for entry in self.host.mentioning(name, writes):
            unit = self.host.parse(entry)
            if unit is not None:
                self.tus.append(unit)
                self._index(unit)
                for cache in ("_global_writes", "_reader_calls", "_field_writes", "_read_into"):
                    self.__dict__.pop(cache, None)

    def callers(self, fn) -> list:
        """(call, caller) of every call to function `fn`, in any source of the application: the CUDA sources,
        then the plain C/C++ sources that name it. A C caller of a function the CUDA sources define (`extern
        "C"` or not) names it by a C symbol, without its parameters' types: matched by name and argument count."""
        self.read_host_files(fn.spelling)
        found = self.calls.get(fn.get_usr(), [])
        if not found and fn.kind.name == "FUNCTION_DECL":
            n = sum(1 for x in fn.get_children() if x.kind.name == "PARM_DECL")
            found = [(call, caller) for call, caller in self.calls.get(f"c:@F@{fn.spelling}", [])
                     if len(list(call.get_arguments())) == n]
        return found

    def definition(self, ref):
        """The definition of the function a call refers to, in the CUDA sources or else in a plain C/C++ source
        that names it (read now); a C definition of a function declared in C++ is found by name."""
        if ref is None:
            return None
        fn = self.functions.get(ref.get_usr())
        if fn is None and self.in_app(ref):     # declared by the application (not `printf`)
            self.read_host_files(ref.spelling)
            fn = self.functions.get(ref.get_usr()) or self.functions.get(f"c:@F@{ref.spelling}")
        return fn

    def calls_named(self, name: str) -> list:
        """(call, caller) of every call to a function with this name (runtime API calls have no definition)."""
        return [pair for usr, pairs in self.calls.items() for pair in pairs if call_name(pair[0]) == name]

    def find_global(self, qualified: str):
        for usr, c in self.globals.items():
            if qualified_name(c) == qualified:
                return c
        return None

    def find_function(self, usr: str, file: str | None = None):
        """The definition of function `usr`; `file` (relative to the application's root, or absolute): the one
        in that file, when several programs of one folder define a function of the same name (`main`)."""
        if file is not None and len(self.definitions.get(usr, ())) > 1:
            for c in self.definitions[usr]:
                if _file_of(c) in (file, str(self.app_root / file)) or self.rel(c) == file:
                    return c
        return self.functions.get(usr)

    def macro_value(self, name: str) -> int | None:
        """Integer value of an object-like macro, its references to other macros resolved; None for a macro
        whose type is not an integer (`#define DT 0.1f` is no size)."""
        return cexpr.integer(name, self.macros)


def qualified_name(cursor) -> str:
    """heat::c_grid, cg::axpy (namespaces and classes; no template arguments)."""
    parts, c = [], cursor
    while c is not None and c.kind.name != "TRANSLATION_UNIT":
        if c is cursor or c.kind.name in ("NAMESPACE", "STRUCT_DECL", "CLASS_DECL"):
            parts.append(c.spelling)
        c = c.semantic_parent
    return "::".join(reversed(parts))


def _file_of(c) -> str:
    return c.location.file.name if c.location.file is not None else ""


def _dependent_callees(call) -> list:
    """The functions a dependent call (`f<T>(x)`, `cudaMalloc(&d, n * sizeof(T))` in a template's body) may
    call: libclang leaves its callee an unresolved lookup, exposed as a set of overloads."""
    kids = list(call.get_children())
    if not kids:
        return []
    head = kids[0]
    while head.kind.name == "UNEXPOSED_EXPR" and list(head.get_children()):
        head = next(head.get_children())
    if head.kind.name == "DECL_REF_EXPR":
        head = next((k for k in head.get_children() if k.kind.name == "OVERLOADED_DECL_REF"), head)
    if head.kind.name != "OVERLOADED_DECL_REF":
        return []
    return [d for d in _overloaded(head) if d.kind.name in ("FUNCTION_TEMPLATE", "FUNCTION_DECL")]


def call_name(call) -> str:
    """The called function's name; a dependent call (in a template's body) has an empty spelling: the name
    its unresolved callee is written with."""
    if call.spelling:
        return call.spelling
    for n in call.get_children():
        for m in walk(n):
            if m.kind.name == "OVERLOADED_DECL_REF":
                return m.spelling
        break
    return ""
