"""The kernel of an MEP as libclang sees it: the one place the library's analyses get cursors and text from.

Every transformation works on exact source extents (byte offsets into kernel.cu), never on regular
expressions over the whole file: what it matches is what the compiler sees. Parsing uses the spec's size
symbols as -D flags, so a `__shared__ float s[BLOCK_SIZE]` has its real size.
"""
from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ...mepbuild import build_flags
from ...parsing.clang import parse
from ...spec import Spec
from . import macros
from .cursors import Refused, kind, walk
from .normalize import ROUNDS, normalized


_COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)


def binop(c) -> str | None:
    """The operator spelling of a binary/compound operator cursor."""
    try:
        return c.binary_operator.name if hasattr(c, "binary_operator") else None
    except Exception:    # older libclang bindings: read the token between the operands
        return None


@dataclass
class Param:
    name: str
    type: str            # as written: `const float*`
    pointer: bool
    start: int           # extent of the whole parameter declaration
    end: int


#: translation units by (text, parse flags), oldest first: a parse costs about 0.3 s and a proposal makes several;
#: a few are kept (each holds the CUDA headers, tens of MB)
_PARSED: dict[tuple, tuple] = {}
_PARSED_KEEP = 8
_MACROS: dict[tuple, dict] = {}         # the macros of each kept translation unit (KernelSource.macros)
#: the included headers' macros by kernel.cu's preprocessor lines and defines: a candidate that changes code only
#: includes the same headers the same way (their scan over the translation unit took 80 ms a text)
_HEADER_MACROS: dict[tuple, dict] = {}


def _directives(text: str) -> tuple[str, ...]:
    """kernel.cu's preprocessor lines (continuations joined): what decides which headers' macros are active."""
    return tuple(ln.strip() for ln in text.replace("\\\r\n", " ").replace("\\\n", " ").splitlines()
                 if ln.lstrip().startswith("#"))


class KernelSource:
    """kernel.cu text + the kernel's definition cursor (function or function template)."""

    def __init__(self, text: str, spec: Spec, normalize: bool = True):
        """`normalize`: analyse (and rewrite) the kernel in the library's one spelling (normalize.py): the
        application's `int k; for (k = 0; ...)`, early returns and nested guards are seen as the equivalent
        declared loop and single guard; the text is the application's otherwise."""
        if normalize:
            for _ in range(ROUNDS):
                src = KernelSource(text, spec, normalize=False)
                new = normalized(src)
                if new == text:
                    break
                text = new
        self.text = text
        self.spec = spec
        self.name = spec.kernel.name.split("::")[-1]
        # the build's own defines (mepbuild.build_flags): sizes as -DMEPGEN_SIZE_<SYM>, which kernel.cu maps onto
        # the application's macros; a bare -D<SYM> would also rename a parameter or local spelled like a size
        args = [f for f in build_flags(spec) if f.startswith("-D")]
        key = (text, tuple(args))
        self.defines = tuple(args)
        if key in _PARSED:               # the same text parsed again (each proposal round re-reads its parents)
            self.tu, self.path = _PARSED[key]
        else:
            with tempfile.TemporaryDirectory(prefix="mepgen-lib-") as tmp:
                path = Path(tmp) / "kernel.cu"
                path.write_text(text)
                self.tu = parse(path, args)
                self.path = str(path)
            _PARSED[key] = (self.tu, self.path)
            while len(_PARSED) > _PARSED_KEEP:
                _PARSED.pop(next(iter(_PARSED)))
        self.fn = self._find()
        if self.fn is None:
            raise Refused(f"no definition of {spec.kernel.name} found in kernel.cu")
        self.body = next((k for k in self.fn.get_children() if kind(k) == "COMPOUND_STMT"), None)
        if self.body is None:
            raise Refused(f"{spec.kernel.name} has no body")
        self.params = [Param(p.spelling, self.src(p).rsplit(p.spelling, 1)[0].strip() if p.spelling else self.src(p),
                             p.type.get_canonical().kind.name == "POINTER" or "*" in self.src(p),
                             p.extent.start.offset, p.extent.end.offset)
                       for p in self.fn.get_children() if kind(p) == "PARM_DECL"]

    def template_values(self) -> dict[str, str]:
        """The kernel's non-type template parameters with the arguments mep.yaml launches it with
        (`template <int R, int C>` launched as `k<512, 256>`: {"R": "512", "C": "256"}); a parameter without an
        argument in mep.yaml is left out."""
        args = [str(a) for a in self.spec.kernel.template_args]
        # type parameters take arguments too: pair by position over all template parameters
        every = [k for k in self.fn.get_children() if kind(k) in ("TEMPLATE_NON_TYPE_PARAMETER",
                                                                   "TEMPLATE_TYPE_PARAMETER",
                                                                   "TEMPLATE_TEMPLATE_PARAMETER")]
        return {k.spelling: args[i] for i, k in enumerate(every)
                if kind(k) == "TEMPLATE_NON_TYPE_PARAMETER" and i < len(args)}

    def invariants(self) -> set[str]:
        """Names whose value is the same for every thread of the launch: the kernel's parameters and its
        non-type template parameters."""
        return {p.name for p in self.params} | {k.spelling for k in self.fn.get_children()
                                                 if kind(k) == "TEMPLATE_NON_TYPE_PARAMETER"}

    def _find(self):
        """The kernel's definition in kernel.cu. Only declarations of kernel.cu itself are visited (and the
        namespaces and classes there), never the CUDA headers' hundreds of thousands of cursors: walking the
        whole translation unit took 1.1 s per proposal, most of the library's time (H100 profile of optimize)."""
        from clang.cindex import Cursor, SourceLocation     # libclang, heavy: loaded by parsing.clang on first use
        f = self.tu.get_file(self.path)
        for m in re.finditer(r"\b%s\b" % re.escape(self.name), self.text):   # the cursor at each use of the name
            c = Cursor.from_location(self.tu, SourceLocation.from_offset(self.tu, f, len(self.text[:m.start()].encode())))
            if c is not None and kind(c) in ("FUNCTION_DECL", "FUNCTION_TEMPLATE") and c.spelling == self.name \
                    and c.is_definition() and c.location.file is not None and c.location.file.name == self.path \
                    and (any(kind(k) == "CUDAGLOBAL_ATTR" for k in c.get_children()) or "__global__" in self.src(c)[:200]):
                return c
        todo = list(self.tu.cursor.get_children())        # (not found by location: look through the declarations)
        while todo:
            c = todo.pop(0)
            if c.location.file is None or c.location.file.name != self.path:
                continue
            if kind(c) in ("NAMESPACE", "LINKAGE_SPEC", "CLASS_DECL", "STRUCT_DECL", "CLASS_TEMPLATE",
                           "UNEXPOSED_DECL"):
                todo[:0] = list(c.get_children())
                continue
            if kind(c) not in ("FUNCTION_DECL", "FUNCTION_TEMPLATE") or c.spelling != self.name:
                continue
            if not c.is_definition():
                continue
            if any(kind(k) == "CUDAGLOBAL_ATTR" for k in c.get_children()) or "__global__" in self.src(c)[:200]:
                return c
        return None

    # --- text ---------------------------------------------------------------------------------------

    def src(self, c) -> str:
        return self.text[slice(*self.span(c))]

    def span(self, c) -> tuple[int, int]:
        """The cursor's extent; where libclang ends it at a macro use that the expression expands (`r < ROWS`
        with `#define ROWS BOUND(NR, nr)` ends before `ROWS`), through the whole use as written."""
        start, end = c.extent.start.offset, c.extent.end.offset
        return start, self._macro_end(end)

    def _macro_end(self, end: int) -> int:
        t = self.text
        if end >= len(t) or not (t[end].isalpha() or t[end] == "_") or (end > 0 and (t[end - 1].isalnum() or
                                                                                     t[end - 1] == "_")):
            return end
        j = end
        while j < len(t) and (t[j].isalnum() or t[j] == "_"):
            j += 1
        d = self.macros().get(t[end:j])
        if d is None:
            return end
        if d[0] is not None:                        # function-like: through its balanced argument list
            k = j
            while k < len(t) and t[k] in " \t":
                k += 1
            if k < len(t) and t[k] == "(":
                level = 0
                for m in range(k, len(t)):
                    level += {"(": 1, ")": -1}.get(t[m], 0)
                    if level == 0:
                        return m + 1
        return j

    @property
    def head(self) -> str:
        """The definition up to its body: attributes, name and parameter list (kept by every rewrite)."""
        return self.text[self.fn.extent.start.offset:self.body.extent.start.offset]

    def attribute_edit(self, attr: str) -> tuple[int, int, str] | None:
        """The edit that adds a kernel attribute (`__launch_bounds__(..)`, `__maxnreg__(..)`): right after
        `__global__` where the head spells it, else right before the kernel's name (`GLOBAL static void
        __launch_bounds__(..) k(`, where a macro spells `__global__`: nvcc takes the attribute among the
        declaration's specifiers); None when the head spells neither (a macro makes the name)."""
        head, start = self.head, self.fn.extent.start.offset
        i = head.find("__global__")
        if i >= 0:
            at = start + i + len("__global__")
            return at, at, f" {attr}"
        names = list(re.finditer(r"\b%s\s*\(" % re.escape(self.name), head))
        if not names:
            return None
        at = start + names[-1].start()
        return at, at, f"{attr} "

    def replace(self, edits: list[tuple[int, int, str]]) -> str:
        """The text with non-overlapping (start, end, new) edits applied."""
        out, pos = [], 0
        for start, end, new in sorted(edits):
            if start < pos:
                raise Refused("overlapping rewrites (a bug in a transformation)")
            out += [self.text[pos:start], new]
            pos = end
        return "".join(out + [self.text[pos:]])

    # --- queries ------------------------------------------------------------------------------------

    def nodes(self, *kinds: str):
        return [c for c in walk(self.body) if kind(c) in kinds]

    def has_pragma(self, c) -> bool:
        """Whether a `#pragma` precedes statement `c`: on the line above it or before it on its own line."""
        start = c.extent.start.offset
        line_start = self.text.rfind("\n", 0, start)
        prev = self.text[self.text.rfind("\n", 0, line_start) + 1:line_start]
        return "#pragma" in prev or "#pragma" in self.text[line_start:start]

    def calls(self) -> list[str]:
        return [c.spelling for c in self.nodes("CALL_EXPR")]

    def param(self, name: str) -> Param | None:
        return next((p for p in self.params if p.name == name), None)

    def writes(self, root=None) -> list:
        """Assignments and increments (cursors) in `root` (default: the body)."""
        out = []
        for c in walk(root if root is not None else self.body):
            if kind(c) in ("BINARY_OPERATOR", "COMPOUND_ASSIGNMENT_OPERATOR"):
                if kind(c) == "COMPOUND_ASSIGNMENT_OPERATOR" or self.operator(c) == "=":
                    out.append(c)
            elif kind(c) == "UNARY_OPERATOR" and any(t.spelling in ("++", "--") for t in c.get_tokens()):
                out.append(c)
        return out

    def operator(self, c) -> str:
        """The operator token of a binary or compound-assignment cursor, read between its operands (comments there,
        `a[i] /* note */ = v`, are no part of it)."""
        kids = list(c.get_children())
        between = self.text[kids[0].extent.end.offset:kids[1].extent.start.offset] if len(kids) == 2 else ""
        return _COMMENT.sub(" ", between).strip()

    def refs(self, c) -> set[str]:
        return {n.spelling for n in walk(c) if kind(n) in ("DECL_REF_EXPR", "MEMBER_REF_EXPR")}

    def expand(self, text: str) -> str:
        """`text` (source as written) with kernel.cu's macros expanded, the MEP's size symbols kept: what an
        analysis compares (`ROWS_B` -> `NR`); the rewrites keep writing `text` itself."""
        return macros.simplified(macros.expand(text, self.macros(), set(self.spec.sizes)))

    def macros(self) -> dict:
        """name -> (parameters, body) of the macros the kernel's text may use: kernel.cu's own `#define`s, and
        those of the application's headers it includes as the compiler took them (macros.py)."""
        if not hasattr(self, "_macros"):
            key = (self.text, self.path)
            if key not in _MACROS:
                headers = (_directives(self.text), self.defines)
                if headers not in _HEADER_MACROS:
                    _HEADER_MACROS[headers] = macros.active_definitions(self.tu, self.path)
                    while len(_HEADER_MACROS) > _PARSED_KEEP:
                        _HEADER_MACROS.pop(next(iter(_HEADER_MACROS)))
                _MACROS[key] = {**_HEADER_MACROS[headers], **macros.definitions(self.text)}
                while len(_MACROS) > _PARSED_KEEP:
                    _MACROS.pop(next(iter(_MACROS)))
            self._macros = _MACROS[key]
        return self._macros

    def has_launch_bounds(self) -> bool:
        return "__launch_bounds__" in self.head

    def shared_arrays(self) -> list:
        return [c for c in self.nodes("VAR_DECL") if "__shared__" in self.src(c) or
                any(kind(k) == "CUDASHARED_ATTR" for k in c.get_children())]
