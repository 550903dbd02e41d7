"""What a kernel file declares outside its device code, as libclang sees it (after the preprocessor).

rules.py compares a candidate's declarations with the original kernel.cu's: a candidate may rewrite device
code freely, but host code is an addition to the original, whatever its spelling. Every namespace-scope
declaration (and static data member) becomes one `Decl`:

- a host function (no `__device__`/`__global__`), its signature and its body's tokens: new or changed ones
  are code that can run in the harness (at load time, through a constructor attribute, or by taking a
  name the harness or the CUDA runtime uses);
- a function declared without a body (`syscall`, `dlsym`, any hand-written prototype) that the file does not
  define in device code: an external function made callable;
- a variable: in host memory unless made without running code (`constexpr`, or a scalar or pointer
  initialized with literals) it is an object whose initializer runs at load time (a constructor, a lambda,
  a function's address such as `auto f = cudaStreamCreate;`); in device
  memory (`__device__`, `__constant__`, `__managed__`, `__shared__`) it is state that outlives a launch;
- anything else libclang cannot name (file-scope `asm`, ...), by its tokens.
References to CUDA host API functions (a call, or its address: `auto f = cudaStreamCreate;`) are listed
by name, wherever they appear.
"""
from __future__ import annotations

import atexit
import functools
import hashlib
import shutil
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from ..parsing import clang

_SCALARS = {"BOOL", "CHAR_U", "UCHAR", "CHAR16", "CHAR32", "USHORT", "UINT", "ULONG", "ULONGLONG", "UINT128",
            "CHAR_S", "SCHAR", "WCHAR", "SHORT", "INT", "LONG", "LONGLONG", "INT128", "FLOAT", "DOUBLE",
            "LONGDOUBLE", "HALF", "FLOAT16", "ENUM"}
#: declarations that only name types or constants: nothing runs, nothing is stored
_TYPE_KINDS = {"STRUCT_DECL", "CLASS_DECL", "UNION_DECL", "ENUM_DECL", "TYPEDEF_DECL", "TYPE_ALIAS_DECL",
               "TYPE_ALIAS_TEMPLATE_DECL", "USING_DIRECTIVE", "USING_DECLARATION", "NAMESPACE_ALIAS",
               "STATIC_ASSERT", "CLASS_TEMPLATE", "CLASS_TEMPLATE_PARTIAL_SPECIALIZATION", "INCLUSION_DIRECTIVE",
               "MACRO_DEFINITION", "MACRO_INSTANTIATION", "FRIEND_DECL", "FIELD_DECL", "CXX_ACCESS_SPEC_DECL",
               "ENUM_CONSTANT_DECL", "TEMPLATE_TYPE_PARAMETER", "TEMPLATE_NON_TYPE_PARAMETER"}
_FUNCTIONS = {"FUNCTION_DECL", "FUNCTION_TEMPLATE", "CXX_METHOD", "CONSTRUCTOR", "DESTRUCTOR", "CONVERSION_FUNCTION"}
_SPACES = {"CUDADEVICE_ATTR": "__device__", "CUDACONSTANT_ATTR": "__constant__", "CUDASHARED_ATTR": "__shared__",
           "CUDAGLOBAL_ATTR": "__global__", "CUDAHOST_ATTR": "__host__"}


@dataclass(frozen=True)
class Decl:
    what: str          # host function | function declaration | host variable | device variable | other
    name: str          # qualified name (and signature for functions)
    body: str          # the tokens that must match the original's (a definition's text, a type)
    line: int
    text: str          # the first line, as written


@dataclass
class Facts:
    decls: list[Decl]
    cuda_refs: dict[str, int]      # CUDA host API function -> first line that names it
    parsed: bool                   # False when libclang could not read the file at all


def _kind(c) -> str:
    try:
        return c.kind.name
    except ValueError:              # a cursor kind this libclang's Python binding does not know
        return "UNKNOWN"


def _qualified(c) -> str:
    parts, p = [], c
    while p is not None and _kind(p) != "TRANSLATION_UNIT":
        if p.spelling:
            parts.append(p.spelling)
        elif _kind(p) == "NAMESPACE":
            parts.append("(anonymous)")
        p = p.semantic_parent
    return "::".join(reversed(parts))


_SOURCE: dict[str, bytes] = {}      # main file name -> its bytes, while it is analysed
_MANAGED: dict[str, list[tuple[int, int]]] = {}    # main file name -> offsets of macros that mean __managed__


def _tokens(c) -> str:
    """The declaration's text as written, whitespace-normalized (libclang's token list is empty when a
    declaration starts inside a macro expansion, `__device__ int x;` say, so the bytes are read instead)."""
    f = c.extent.start.file
    data = _SOURCE.get(f.name) if f is not None else None
    if data is None:
        return " ".join(t.spelling for t in c.get_tokens())
    return " ".join(data[c.extent.start.offset:c.extent.end.offset].decode("utf-8", "replace").split())


def _spaces(c) -> set[str]:
    out = {_SPACES[_kind(ch)] for ch in c.get_children() if _kind(ch) in _SPACES}
    f = c.extent.start.file
    if f is not None and any(c.extent.start.offset <= a and b <= c.extent.end.offset for a, b in _MANAGED.get(f.name, [])):
        out.add("__managed__")          # this libclang drops the `managed` attribute: find the macro that said it
    return out


def _in_main(tu, main: str) -> list:
    """The translation unit's top-level cursors that the main file holds (the headers' are many)."""
    if main not in _TOPS:
        in_main = clang.cindex().conf.lib.clang_Location_isFromMainFile
        _TOPS[main] = [c for c in tu.cursor.get_children() if in_main(c.location)]
    return _TOPS[main]


_TOPS: dict[str, list] = {}      # main file name -> its top-level cursors, while it is analysed


def _managed_macros(tu, main: str) -> list[tuple[int, int]]:
    """Offsets of macro uses in `main` that expand to `__managed__` (directly or through the file's own macros)."""
    defs: dict[str, list[str]] = {}
    uses = []
    for c in _in_main(tu, main):
        if _kind(c) == "MACRO_DEFINITION":
            defs[c.spelling] = [t.spelling for t in c.get_tokens()][1:]
        elif _kind(c) == "MACRO_INSTANTIATION":
            uses.append((c.spelling, c.extent.start.offset, c.extent.end.offset))

    @functools.lru_cache(maxsize=None)
    def means(name: str, depth: int = 0) -> bool:
        if name == "__managed__":
            return True
        return depth < 8 and any(means(t, depth + 1) for t in defs.get(name, []) if t != name)
    return [(a, b) for name, a, b in uses if means(name)]


def _has(c, kinds: set[str]) -> bool:
    return any(_kind(n) in kinds for n in c.walk_preorder() if n != c)


def _compile_time(c) -> bool:
    """A host variable made without running code: `constexpr`, or a scalar, pointer or array of them whose
    initializer is only literals and other such constants (no call, no lambda, no constructor)."""
    head = _tokens(c).split("=")[0].split()
    if "constexpr" in head:
        return True
    t = c.type.get_canonical()
    while t.kind.name.endswith("ARRAY"):
        t = t.element_type.get_canonical()
    if t.kind.name not in _SCALARS and t.kind.name != "POINTER":
        return False
    return not _has(c, {"CALL_EXPR", "LAMBDA_EXPR", "CXX_NEW_EXPR"}) and _only_constants(c)


def _only_constants(c) -> bool:
    """Every name the initializer uses is itself an enumerator or a compile-time constant variable."""
    for n in c.walk_preorder():
        if _kind(n) == "DECL_REF_EXPR" and n.referenced is not None:
            ref = n.referenced
            if _kind(ref) == "ENUM_CONSTANT_DECL" or _kind(ref) == "NON_TYPE_TEMPLATE_PARAMETER":
                continue
            if _kind(ref) == "VAR_DECL" and ref != c and _compile_time(ref):
                continue
            return False
    return True


def _first_line(c, lines: list[str]) -> str:
    n = c.extent.start.line
    return lines[n - 1].strip()[:200] if 0 < n <= len(lines) else c.spelling


def _is_cuda_api(ref, shim: str) -> bool:
    f = ref.location.file
    name = ref.spelling
    in_cuda_header = f is not None and (f.name.startswith(shim) or "cuda" in Path(f.name).name.lower())
    return in_cuda_header and (name.startswith("cuda") or name.startswith("cu") and name[2:3].isupper()) \
        and "__host__" in _spaces(ref) | ({"__host__"} if not _spaces(ref) else set())


def facts(text: str, args: tuple[str, ...] = ()) -> Facts:
    return _facts(hashlib.sha256(text.encode()).hexdigest(), text, tuple(args))


_PARSERS: dict[tuple[str, ...], object] = {}     # args -> a translation unit kept for reparsing
_LOCK = threading.Lock()
_FOLDER = None


def _parse(text: str, args: tuple[str, ...]):
    """The translation unit of `text`. One per set of flags is kept and reparsed: libclang then reuses the
    precompiled preamble (the headers every candidate includes alike), 5x faster than a fresh parse."""
    global _FOLDER
    if _FOLDER is None:
        _FOLDER = Path(tempfile.mkdtemp(prefix="mepgen-rules-"))
        atexit.register(shutil.rmtree, _FOLDER, True)
        atexit.register(_PARSERS.clear)     # free the kept units while libclang is still loaded
    path = _FOLDER / "kernel.cu"
    unsaved = [(str(path), text)]
    tu = _PARSERS.get(args)
    if tu is None:
        path.write_text(text)          # (with an empty file on disk, every reparse rebuilt the preamble)
        ci = clang.cindex()
        options = (ci.TranslationUnit.PARSE_DETAILED_PROCESSING_RECORD | ci.TranslationUnit.PARSE_PRECOMPILED_PREAMBLE
                   | _CREATE_PREAMBLE_ON_FIRST_PARSE)
        tu = ci.Index.create().parse(str(path), args=clang.parse_args(list(args)), unsaved_files=unsaved,
                                     options=options)
        _PARSERS[args] = tu
    else:
        tu.reparse(unsaved_files=unsaved, options=0)
    return tu, str(path)


#: CXTranslationUnit_CreatePreambleOnFirstParse (clang-c/Index.h), which the Python binding does not name
_CREATE_PREAMBLE_ON_FIRST_PARSE = 0x100


@functools.lru_cache(maxsize=64)
def _facts(_digest: str, text: str, args: tuple[str, ...]) -> Facts:
    with _LOCK:
        try:
            tu, main = _parse(text, args)
        except Exception:      # noqa: BLE001 (libclang missing or the file unreadable: the caller says so)
            _PARSERS.pop(args, None)
            return Facts([], {}, False)
        _TOPS.pop(main, None)
        _SOURCE[main] = text.encode()
        _MANAGED[main] = _managed_macros(tu, main)
        try:
            return _analyse(tu, main, text)
        finally:
            _SOURCE.pop(main, None)
            _MANAGED.pop(main, None)
            _TOPS.pop(main, None)


def _analyse(tu, main: str, text: str) -> Facts:
    lines = text.splitlines()
    decls: list[Decl] = []
    defined_device: set[str] = set()
    shim = str(clang.SHIM_DIR)

    def visit(cursor, in_class: bool = False, children=None) -> None:
        for c in cursor.get_children() if children is None else children:
            if c.location.file is None or c.location.file.name != main:
                continue
            k = _kind(c)
            if k in ("NAMESPACE", "LINKAGE_SPEC", "UNEXPOSED_DECL") and (k != "UNEXPOSED_DECL" or
                                                                         not c.spelling and _is_linkage(c)):
                visit(c)
                continue
            if k in ("STRUCT_DECL", "CLASS_DECL", "UNION_DECL", "CLASS_TEMPLATE",
                     "CLASS_TEMPLATE_PARTIAL_SPECIALIZATION"):
                visit(c, in_class=True)          # static data members run initializers too
                continue
            if k in _TYPE_KINDS:
                continue
            if k in _FUNCTIONS:
                if in_class and not _defines(c):
                    continue
                sp = _spaces(c)
                device_only = bool(sp & {"__device__", "__global__"}) and "__host__" not in sp
                if device_only:
                    if _defines(c):
                        defined_device.add(_qualified(c))
                    continue
                if in_class and not c.is_static_method() and not _defines(c):
                    continue
                what = "host function" if _defines(c) else "function declaration"
                body = _tokens(c)
                if "__device__" in sp and "__host__" in sp and _defines(c):
                    what = "host-device function"
                qual = _qualified(c)
                decls.append(Decl(what, qual[:len(qual) - len(c.spelling)] + c.displayname, body,
                                  c.extent.start.line, _first_line(c, lines)))
                continue
            if k == "VAR_DECL":
                sp = _spaces(c)
                if sp & {"__device__", "__constant__", "__shared__", "__managed__"}:
                    decls.append(Decl("device variable", _qualified(c), f"{' '.join(sorted(sp))} "
                                      f"{c.type.spelling}", c.extent.start.line, _first_line(c, lines)))
                elif not _compile_time(c):
                    decls.append(Decl("host variable", _qualified(c), _tokens(c), c.extent.start.line,
                                      _first_line(c, lines)))
                continue
            if in_class:
                continue
            decls.append(Decl("other", k, _tokens(c), c.extent.start.line, _first_line(c, lines)))

    visit(tu.cursor, children=_in_main(tu, main))
    refs: dict[str, int] = {}
    for top in _in_main(tu, main):      # (the headers' own cursors are many: walk only the file's)
        for n in top.walk_preorder():
            if _kind(n) != "DECL_REF_EXPR" or n.location.file is None or n.location.file.name != main:
                continue
            ref = n.referenced
            if ref is not None and _kind(ref) in _FUNCTIONS and _is_cuda_api(ref, shim):
                refs.setdefault(ref.spelling, n.location.line)
    # a prototype of a device function the file defines is no external function
    decls = [d for d in decls if not (d.what == "function declaration" and d.name.split("(")[0] in defined_device)]
    return Facts(decls, refs, True)


def _defines(c) -> bool:
    return c.is_definition()


def _is_linkage(c) -> bool:
    toks = [t.spelling for t in c.get_tokens()][:2]
    return toks[:1] == ["extern"] and len(toks) > 1 and toks[1].startswith('"')
