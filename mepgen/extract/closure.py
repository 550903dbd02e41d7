"""A kernel's dependency closure: everything it needs to compile away from its application.

Walks the kernel's AST and, transitively, the AST of what it references: `__device__` functions,
struct/class/union types, typedefs and aliases, enums, templates, `__constant__`/`__device__`/`__managed__`
globals and namespace-scope constants, the macros used by any of these (and by those macros), and the
headers all of this lives in. Only declarations in the application's files are members; what comes from
system or toolkit headers is reached through the kernel file's own `#include`s, which are recorded.
"""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from ..parsing import clang
from ..parsing.clang import specialized_template
from .include_graph import context_includes, included_file
from .global_writes import written_variables
from .kernels import FUNCTION_KINDS, is_device_function, is_kernel
from .source import SourceFiles, extent_json, qualified_name
from ..parsing.vartemplates import template_usr, variable_templates

TYPE_KINDS = {"STRUCT_DECL": "type", "CLASS_DECL": "type", "UNION_DECL": "type", "CLASS_TEMPLATE": "type",
              "CLASS_TEMPLATE_PARTIAL_SPECIALIZATION": "type", "ENUM_DECL": "enum",
              "TYPEDEF_DECL": "typedef", "TYPE_ALIAS_DECL": "typedef", "TYPE_ALIAS_TEMPLATE_DECL": "typedef"}
SCOPE_KINDS = ("NAMESPACE", "STRUCT_DECL", "CLASS_DECL", "CLASS_TEMPLATE", "UNION_DECL")


def _walk(cursor):
    return clang.walk(cursor)


def _namespaces(cursor) -> list[str]:
    out, c = [], cursor.semantic_parent
    while c is not None and c.kind.name != "TRANSLATION_UNIT":
        if c.kind.name == "NAMESPACE":
            out.append(c.spelling)  # '' for an anonymous namespace
        c = c.semantic_parent
    return list(reversed(out))


def _top_entity(decl):
    """Members of a class or enum belong to their enclosing top-level declaration."""
    c = decl
    while c.semantic_parent is not None and c.semantic_parent.kind.name in (
            "STRUCT_DECL", "CLASS_DECL", "CLASS_TEMPLATE", "UNION_DECL", "ENUM_DECL"):
        c = c.semantic_parent
    return c


def _local(decl) -> bool:
    """Whether `decl` is declared inside a function (a local struct, a lambda's closure type): it comes with that
    function's own text, and copying it out alone would cut the function apart (a lambda's type spans `[...]`)."""
    c = decl.semantic_parent
    while c is not None and c.kind.name != "TRANSLATION_UNIT":
        if c.kind.name in FUNCTION_KINDS or c.kind.name == "LAMBDA_EXPR":
            return True
        c = c.semantic_parent
    return False


def _definition(decl):
    if decl.kind.name == "NAMESPACE_ALIAS":      # its "definition" is the namespace it names
        return decl
    if decl.kind.name == "FUNCTION_DECL" and specialized_template(decl) is not None:
        decl = specialized_template(decl)
    elif decl.kind.name in ("STRUCT_DECL", "CLASS_DECL") and specialized_template(decl) is not None:
        decl = specialized_template(decl)
    d = decl.get_definition()
    return d if d is not None else decl


def _global_space(decl) -> str | None:
    for c in decl.get_children():
        if c.kind.name == "CUDACONSTANT_ATTR":
            return "constant"
        if c.kind.name == "CUDADEVICE_ATTR":
            return "device"
        if c.kind.name == "CUDASHARED_ATTR":        # `extern __shared__ float tile[];` at file scope
            return "shared"
    if any(c.kind.name == "UNEXPOSED_ATTR" and "managed" in (c.spelling or "") for c in decl.get_children()):
        return "managed"
    if decl.type.is_const_qualified() or "constexpr" in _first_tokens(decl):
        return "host_const"
    return None


def _first_tokens(decl, n: int = 4) -> list[str]:
    out = []
    for t in decl.get_tokens():
        out.append(t.spelling)
        if len(out) >= n:
            break
    return out


class ClosureBuilder:
    """Closures for the kernels of one translation unit (shares what it learns between kernels)."""

    def __init__(self, tops: list, src: SourceFiles, file_order: dict[str, tuple[int, ...]]):
        self.tops = tops  # the translation unit's top-level cursors in the application's files
        self.src = src
        self.file_order = file_order
        self.macro_all: dict[str, list] = defaultdict(list)  # name -> every MACRO_DEFINITION in app files, in order
        self.expansions: dict[str, list[tuple[int, str]]] = defaultdict(list)  # file -> (offset, name)
        self.device_by_name: dict[str, list] = defaultdict(list)
        self.consts_by_name: dict[str, list] = defaultdict(list)   # namespace-scope `const`/`constexpr` variables
        self.includes: dict[str, list[dict]] = defaultdict(list)  # file -> its #include directives
        self.usings: list = []          # file-scope `using namespace X;` / `using X::name;`
        # (file, offset of a macro's use) -> the declarations its expansion makes (`DEFINE_TYPES(float, f);` making
        # vec3f and vec3fa): the closure copies the use's whole text, so it needs what each of them names
        self.by_expansion: dict[tuple[str, int], list] = defaultdict(list)
        # name -> the application's declarations a file-scope `using ns::name;` brings in: libclang shows a use of
        # `name` as the type it stands for (`geo::vec<float, 3>`), never as the alias the text spells
        self.using_names: dict[str, list] = defaultdict(list)
        self.var_templates = {usr: c for usr, (c, _) in variable_templates(tops).items()}
        self.var_templates_by_name: dict[str, list] = defaultdict(list)
        for c in self.var_templates.values():
            self.var_templates_by_name[c.spelling].append(c)
        self._index()

    def _index(self):
        for c in self.tops:
            f = c.location.file
            k = c.kind.name
            if k == "MACRO_DEFINITION":
                self.macro_all[c.spelling].append(c)
            elif k == "MACRO_INSTANTIATION":
                self.expansions[f.name].append((c.location.offset, c.spelling))
            elif k in ("USING_DIRECTIVE", "USING_DECLARATION"):
                self.usings.append(c)
            elif k == "INCLUSION_DIRECTIVE":
                text = " ".join(t.spelling for t in c.get_tokens())
                inc = included_file(c)
                entry = {
                    "spelling": c.spelling, "angled": "<" in text,
                    "resolved": self.src.rel(inc.name) if inc is not None and self.src.in_app(inc.name) else None,
                    "line": c.location.line,
                }
                if inc is not None and entry["resolved"] is None and self._outside(inc.name):
                    entry["external"] = str(Path(inc.name).resolve())
                self.includes[f.name].append(entry)
        expanded = {(f, off) for f, uses in self.expansions.items() for off, _ in uses}
        types: dict[str, list] = defaultdict(list)     # qualified name -> the application's types of that name

        def visit(cursors):
            for c in cursors:
                start = c.extent.start
                if start.file is not None and (start.file.name, start.offset) in expanded:
                    self.by_expansion[(start.file.name, start.offset)].append(c)
                if c.kind.name in TYPE_KINDS and start.file is not None and self.src.in_app(start.file.name):
                    types[qualified_name(c)].append(c)
                if c.kind.name in ("NAMESPACE", "LINKAGE_SPEC"):
                    visit(c.get_children())
                elif c.kind.name in FUNCTION_KINDS and c.is_definition() and is_device_function(c):
                    self.device_by_name[c.spelling].append(c)
                elif c.kind.name == "VAR_DECL" and _global_space(c) == "host_const":
                    self.consts_by_name[c.spelling].append(c)
        visit(self.tops)
        self._using_targets(types)

    def _attribute_names(self, kernel) -> list:
        """The namespace-scope constants the kernel's declaration names outside its body, where libclang shows
        no cursor (`__launch_bounds__(W, SHM_SIZE / sizeof(T))`): found by name in the kernel's namespaces."""
        body = next((c for c in kernel.get_children() if c.kind.name == "COMPOUND_STMT"), None)
        end = body.extent.start.offset if body is not None else kernel.extent.end.offset
        names = {t.spelling for t in clang.tokens(kernel) if t.kind.name == "IDENTIFIER"
                 and t.extent.start.offset < end}
        spaces = qualified_name(kernel).split("::")[:-1]
        scopes = {"::".join(spaces[:i]) for i in range(len(spaces) + 1)}
        return [c for n in sorted(names) for c in self.consts_by_name.get(n, ())
                if "::".join(qualified_name(c).split("::")[:-1]) in scopes]

    def _outside(self, path: str) -> bool:
        """A header of the application's that lies outside its folder (a sibling `../common`, a folder the
        build names with -I): neither the system's, nor the toolkit's, nor mepgen's parse shim or stubs."""
        p = Path(path).resolve()
        if p.parts[1:2] in (("usr",), ("opt",)) or any(part.startswith("mepgen-stubs-") for part in p.parts):
            return False
        return not any(p.is_relative_to(d) for d in (clang.SHIM_DIR.resolve(), clang.builtin_include_dir().resolve()))

    def _member(self, decl, kind: str) -> dict:
        ext = extent_json(decl, self.src)
        return {
            "kind": kind,
            "name": decl.spelling,
            "qualified_name": qualified_name(decl),
            "usr": decl.get_usr(),
            **ext,
            "namespaces": _namespaces(decl),
            "order": [*self.file_order.get(decl.extent.start.file.name, (1 << 39,)), decl.extent.start.offset],
        }

    def _macros_in(self, cursor) -> list[tuple[str, str, int]]:
        """(name, file, offset) of every use of an application macro inside `cursor`."""
        f = cursor.extent.start.file
        if f is None:
            return []
        lo, hi = cursor.extent.start.offset, cursor.extent.end.offset
        return [(name, f.name, off) for off, name in self.expansions.get(f.name, ())
                if lo <= off < hi and name in self.macro_all]

    def _definition_at(self, name: str, file: str, offset: int):
        """The definition of macro `name` in effect at `offset` of `file`: the last one before it in that file
        (a file that redefines a macro before each kernel, `#undef` between them), else the last one of
        the other files (a header included before; libclang reports only the branches the preprocessor took)."""
        defs = self.macro_all.get(name, [])
        same = [d for d in defs if d.location.file is not None and d.location.file.name == file
                and d.extent.start.offset < offset]
        if same:
            return max(same, key=lambda d: d.extent.start.offset)
        other = [d for d in defs if d.location.file is None or d.location.file.name != file]
        return other[-1] if other else None

    def closure(self, kernel, instantiated_with=()) -> dict:
        """`instantiated_with`: declarations a launch instantiates the (template) kernel with, e.g. the
        functor type of `apply<<<...>>>(x, n, Scale{2.0f})`; they and their own closures are members."""
        members: dict[str, dict] = {}  # usr -> member
        macros: list[tuple[str, str, int]] = []
        todo = [kernel]
        seen: set[str] = set()
        code = []                      # the kernel, and the functions and types it reaches: where globals are written
        for decl in self._attribute_names(kernel):
            f = decl.location.file
            if f is not None and self.src.in_app(f.name) and decl.get_usr() not in members:
                members[decl.get_usr()] = self._member(decl, "global")
                todo.append(decl)
        for decl in instantiated_with:
            decl = _top_entity(_definition(decl))
            f = decl.location.file
            kind = self._kind(decl) if f is not None and self.src.in_app(f.name) else None
            if kind is not None and decl.get_usr() not in members:
                members[decl.get_usr()] = self._member(decl, kind)
                todo.append(decl)
        while todo:
            node = todo.pop()
            key = node.get_usr() or f"{node.extent.start.file}:{node.extent.start.offset}"
            if key in seen:
                continue
            seen.add(key)
            if node.kind.name != "VAR_DECL":
                code.append(node)
            macros += self._macros_in(node)
            for sib in [*self._expanded_with(node), *self._named_through_usings(node)]:
                kind = self._kind(sib)
                if kind is not None and sib.get_usr() not in members:
                    members[sib.get_usr()] = self._member(sib, kind)
                    todo.append(sib)
            in_type = node.kind.name in TYPE_KINDS
            for c in _walk(node):
                for decl in self._references(c):
                    decl = _top_entity(_definition(decl))
                    f = decl.location.file
                    if f is None or not self.src.in_app(f.name) or decl == kernel or _local(decl):
                        continue
                    kind = self._kind(decl)
                    if kind is None and in_type and decl.kind.name in FUNCTION_KINDS and decl.is_definition():
                        kind = "device_function"    # a host function a copied type's own host code calls
                    if kind is None:
                        continue
                    usr = decl.get_usr()
                    if usr not in members:
                        members[usr] = self._member(decl, kind)
                        if kind == "device_function" and not decl.is_definition():
                            members[usr]["declaration_only"] = True   # defined in another file: see run._link
                        if usr in self.var_templates:
                            members[usr]["variable_template"] = True   # `taps<T>`: mep/vartmpl.py
                        todo.append(decl)
        _mark_written(members, code)
        macro_cursors = self._macro_closure(macros, kernel)
        for u in self._usings_for(kernel, members):
            members[f"using:{u.location.file.name}:{u.extent.start.offset}"] = self._member(u, "typedef")
        member_list = sorted(members.values(), key=lambda m: m["order"])
        by_kind = defaultdict(list)
        for m in member_list:
            by_kind[m["kind"]].append(m)
        macro_list = sorted((self._macro_json(d) for d in macro_cursors), key=lambda m: m["order"])
        kfile = kernel.extent.start.file.name
        headers = sorted(({m["file"] for m in member_list} | {m["file"] for m in macro_list})
                         - {self.src.rel(kfile)})
        return {
            "device_functions": by_kind["device_function"],
            "types": by_kind["type"],
            "typedefs": by_kind["typedef"],
            "enums": by_kind["enum"],
            "globals": by_kind["global"],
            "macros": macro_list,
            "headers": headers,
            "includes": self.includes.get(kfile, []),
            "context_includes": context_includes(self.includes, self.src.rel, kfile),
            "header_includes": {h: self.includes.get(str(self.src.app_root / h), []) for h in headers},
        }

    def _usings_for(self, kernel, members: dict[str, dict]) -> list:
        """The file-scope using-directives and using-declarations that the kernel's code may rely on:
        before the kernel in its file, or in a header a member comes from; naming a namespace outside the
        application (std, cooperative_groups), or one the MEP will have (a member's or the kernel's)."""
        kfile = kernel.extent.start.file.name
        files = {kfile} | {str(self.src.app_root / m["file"]) for m in members.values()}
        spaces = {"::".join(m["namespaces"][:i]) for m in members.values() for i in range(1, len(m["namespaces"]) + 1)}
        kspaces = qualified_name(kernel).split("::")[:-1]
        spaces |= {"::".join(kspaces[:i]) for i in range(1, len(kspaces) + 1)}
        names = {m["qualified_name"] for m in members.values()}
        out = []
        for u in self.usings:
            f = u.location.file.name
            if f not in files or (f == kfile and u.extent.start.offset > kernel.extent.start.offset):
                continue
            ns = next((c.referenced for c in u.get_children() if c.kind.name == "NAMESPACE_REF"), None)
            if ns is None:
                continue
            ns_file = ns.location.file
            if ns_file is None or not self.src.in_app(ns_file.name):
                out.append(u)
            elif u.kind.name == "USING_DIRECTIVE" and qualified_name(ns) in spaces:
                out.append(u)
            elif u.kind.name == "USING_DECLARATION" and f"{qualified_name(ns)}::{u.spelling}" in names:
                out.append(u)
        return out

    def _using_targets(self, types: dict[str, list]) -> None:
        """`using_names` from the file-scope using-declarations (by qualified name: libclang's Python binding does
        not resolve the OVERLOADED_DECL_REF a using-declaration holds)."""
        for u in self.usings:
            ns = next((c.referenced for c in u.get_children() if c.kind.name == "NAMESPACE_REF"), None)
            if u.kind.name == "USING_DECLARATION" and ns is not None:
                self.using_names[u.spelling] += types.get(f"{qualified_name(ns)}::{u.spelling}", [])

    def _named_through_usings(self, node) -> list:
        """The types `node`'s text names through a using-declaration (`using geo::vec3f;` then `vec3f v`)."""
        if not self.using_names:
            return []
        names = {t.spelling for t in clang.tokens(node) if t.kind.name == "IDENTIFIER"} & set(self.using_names)
        return [d for n in sorted(names) for d in self.using_names[n]]

    def _expanded_with(self, node) -> list:
        """The other declarations one macro use makes beside `node` (none where `node` is no macro's expansion)."""
        start = node.extent.start
        if start.file is None:
            return []
        return [c for c in self.by_expansion.get((start.file.name, start.offset), ()) if c != node and c.get_usr()]

    def _references(self, c):
        k = c.kind.name
        if k in ("DECL_REF_EXPR", "MEMBER_REF_EXPR", "TYPE_REF", "TEMPLATE_REF", "CALL_EXPR", "NAMESPACE_REF"):
            ref = c.referenced
            if ref is not None and ref.kind.name == "UNEXPOSED_DECL" and ref.get_usr():
                tmpl = self.var_templates.get(template_usr(ref.get_usr()))   # `taps<float>`: its template's
                yield tmpl if tmpl is not None else ref
            elif ref is not None:
                yield ref
            elif k == "CALL_EXPR" and c.spelling in self.device_by_name:
                yield from self.device_by_name[c.spelling]
        elif k == "OVERLOADED_DECL_REF":
            yield from self.device_by_name.get(c.spelling, ())
            yield from self.var_templates_by_name.get(c.spelling, ())    # `taps<T>` in a template
        elif k in ("VAR_DECL", "PARM_DECL", "FIELD_DECL"):
            decl = c.type.get_canonical().get_declaration()
            if decl is not None and decl.kind.name != "NO_DECL_FOUND":
                yield decl

    def _kind(self, decl) -> str | None:
        k = decl.kind.name
        if k in FUNCTION_KINDS:
            if is_kernel(decl):
                return "device_function"  # a kernel calling another kernel (dynamic parallelism)
            if is_device_function(decl):
                return "device_function"
            return None
        if k in TYPE_KINDS:
            return TYPE_KINDS[k]
        if k == "NAMESPACE_ALIAS":          # `namespace cg = cooperative_groups;`
            return "typedef"
        if k == "ENUM_CONSTANT_DECL":
            return "enum"
        if k == "UNEXPOSED_DECL" and decl.get_usr() in self.var_templates:
            return "global"
        if k == "VAR_DECL" and decl.semantic_parent is not None and \
                decl.semantic_parent.kind.name in ("NAMESPACE", "TRANSLATION_UNIT", "LINKAGE_SPEC"):
            space = _global_space(decl)
            return "global" if space else None
        return None

    def _macro_closure(self, uses: list[tuple[str, str, int]], kernel) -> list:
        """The definitions the uses need (each the one in effect where it is used), and the macros those
        definitions use, in turn. A definition inside the kernel's own text comes with its body: not listed,
        but followed (`#define package_id (PER_WG * blockIdx.y ...)` in the body needs PER_WG's). One
        definition per name: the first reached, the kernel's own uses first."""
        kfile = kernel.extent.start.file.name if kernel.extent.start.file is not None else None
        klo, khi = kernel.extent.start.offset, kernel.extent.end.offset
        todo, seen, out, named = list(uses), set(), [], set()
        while todo:
            name, file, offset = todo.pop(0)
            d = self._definition_at(name, file, offset)
            if d is None:
                continue
            dfile = d.location.file.name if d.location.file is not None else None
            key = (dfile, d.extent.start.offset)
            if key in seen:
                continue
            seen.add(key)
            if not (dfile == kfile and klo <= d.extent.start.offset < khi) and name not in named:
                named.add(name)
                out.append(d)
            for t in list(d.get_tokens())[1:]:
                if t.spelling in self.macro_all:
                    todo.append((t.spelling, dfile, d.extent.start.offset))
        return out

    def _macro_json(self, c) -> dict:
        tokens = [t.spelling for t in c.get_tokens()]
        return {
            "name": c.spelling,
            "file": self.src.rel(c.location.file.name),
            "line": c.location.line,
            "start_byte": c.extent.start.offset,
            "end_byte": c.extent.end.offset,
            "definition": self.src.cursor_text(c),
            "tokens": tokens,
            "order": [*self.file_order.get(c.location.file.name, (1 << 39,)), c.extent.start.offset],
        }


def external_device_definitions(tops: list, src: SourceFiles, builder: "ClosureBuilder", main_file: str) -> dict:
    """usr -> member (with its own closure) of each `__device__` function this file defines with external
    linkage and declares first in another file (a header): a kernel in another file that calls it through
    that declaration needs this body (nvcc -rdc links them; an MEP is one file)."""
    out = {}

    def visit(cursors):
        for c in cursors:
            if c.kind.name in ("NAMESPACE", "LINKAGE_SPEC"):
                visit(c.get_children())
            elif c.kind.name in ("FUNCTION_DECL", "CXX_METHOD") and c.is_definition() and is_device_function(c) \
                    and c.linkage.name == "EXTERNAL" and c.location.file is not None \
                    and c.location.file.name == main_file and c.canonical.location.file is not None \
                    and c.canonical.location.file.name != main_file:
                member = builder._member(c, "device_function")
                member["closure"] = builder.closure(c)
                out[c.get_usr()] = member

    visit(tops)
    return out


def _mark_written(members: dict[str, dict], code: list) -> None:
    """`written: true` on each global member the kernel, or code it reaches, writes (global_writes.py): the mep and
    capture stages make a written `__device__` variable an output of the MEP."""
    if not any(m["kind"] == "global" for m in members.values()):
        return
    written = set().union(*(written_variables(c) for c in code))
    for usr, m in members.items():
        if m["kind"] == "global" and usr in written:
            m["written"] = True


def add_global_spaces(closure: dict, tu_globals: dict[str, str]) -> None:
    for g in closure["globals"]:
        g["space"] = tu_globals.get(g["usr"])


def global_spaces(tops: list) -> dict[str, str]:
    """usr -> memory space for every namespace-scope variable among the application's declarations."""
    out = {}

    def visit(cursors):
        for c in cursors:
            if c.kind.name in ("NAMESPACE", "LINKAGE_SPEC"):
                visit(c.get_children())
            elif c.kind.name == "VAR_DECL":
                space = _global_space(c)
                if space:
                    out[c.get_usr()] = space

    visit(tops)
    out.update({usr: space for usr, (_, space) in variable_templates(tops).items()})
    return out


