"""Host-side values of launch arguments: C++ expressions over macros and size symbols.

A launch site writes `diffuse_step<<<grid, block, 0, s>>>(u, u_new, g, alpha, dt)`; the MEP needs what
those names hold. The resolver follows each name to its definition, through `const` locals, the enclosing
function's parameters to the arguments of its callers (in any file), fields of brace-initialized structs,
`constexpr` globals and one-line helper functions, and stops at anything that changes at run time. What it
cannot follow becomes a named *size symbol* (integers) with a stated reason, never a silent guess.
"""
from __future__ import annotations

import re
from contextlib import contextmanager

from ..cexpr import evaluate
from ..parsing import clang
from . import fnmacro
from .classtmpl import class_instantiation, class_of
from .flow import element_writes, modified_locals
from .project import Project, qualified_name, walk
from .reach import keep_reached
from .readers import Why, origin
from .symbols import Symbols
from .syntax import KEEP, LITERALS, SPLICE, init_expr, is_integral, operator_of, parens, strip, type_name
from .targs import enclosing_instantiation, substitute
from .values_call import CallValues
from .values_param import ParameterValues
from .values_var import VariableValues


class Resolver(VariableValues, ParameterValues, CallValues):
    """Turns host expressions into C++ text the harness can compile, or None when they are not constant."""

    def __init__(self, project: Project, symbols: Symbols, macros_taken: set[str]):
        self.p = project
        self.symbols = symbols
        self.taken = macros_taken
        self.bindings: list[dict[str, tuple]] = []     # inlined helper calls: param usr -> (arg, caller)
        self.scope: list = []                          # the host functions being looked into, innermost last
        self.points: list[int | None] = []             # where in each scope function the value is wanted
        self.choices: list[str] = []                   # stated choices (a loop's first iteration), for the notes
        self.unsure: list[str] = []                    # why a value was not followed (control flow)
        self.cond_why: list = []                       # why a condition was not decided (a Why), or None
        self._decls: dict[str, dict] = {}
        self._depth = 0

    @contextmanager
    def inside(self, fn, at: int | None = None):
        """Resolve names as seen from host function `fn` (needed for text inside macro arguments); `at`: the
        byte offset in `fn` where the values are wanted (a launch, a call), to follow assignments up to it."""
        self.scope.append(fn)
        self.points.append(at)
        try:
            yield
        finally:
            self.scope.pop()
            self.points.pop()

    def where(self, node) -> str:
        loc = node.location
        try:
            rel = self.p.rel(node)
        except (ValueError, AttributeError):
            rel = loc.file.name if loc.file is not None else "?"
        return f"{rel}:{loc.line}"

    # --- values --------------------------------------------------------------------------------------
    def expr(self, c) -> str | None:
        if c is None or self._depth > 40:
            return None
        self._depth += 1
        try:
            return self._expr(strip(c))
        finally:
            self._depth -= 1

    def _expr(self, c) -> str | None:
        k = c.kind.name
        if c.extent.start.file is not None and c.extent.end.offset <= c.extent.start.offset:
            return self.tokens_expr([t.spelling for t in c.get_tokens()])   # inside a macro argument
        expanded = self._macro_call(c)
        if expanded is not None:
            return self.tokens_expr(expanded)
        if k == "CXX_UNARY_EXPR":
            size = self._sizeof(c)
            if size is not None:
                return size
        if k in ("CXX_NEW_EXPR", "CXX_DELETE_EXPR"):
            return None         # a fresh host buffer (`new double[n]`): an address, and its elements are data
        if k in LITERALS or not self._has_refs(c):
            return self.p.text(c) or None
        if k == "DECL_REF_EXPR":
            return self._decl_ref(c)
        if k == "MEMBER_REF_EXPR":
            return self._member(c)
        if k == "CALL_EXPR":
            return self._call(c)
        if k == "INIT_LIST_EXPR":
            items = [self.expr(x) for x in c.get_children()]
            return None if None in items else "{" + ", ".join(items) + "}"
        if k == "ARRAY_SUBSCRIPT_EXPR":
            return self._element(c)
        if k == "BINARY_OPERATOR":
            kids = list(c.get_children())
            if len(kids) == 2 and operator_of(c, kids) == "=":      # `ce = cw = step / rx`: the value assigned
                return self.expr(kids[1])
        if k == "UNARY_OPERATOR":       # `*n` of a parameter given `&count`: the value, not `*(&COUNT)`
            kids = list(c.get_children())
            if len(kids) == 1 and operator_of(c, kids) == "*":
                inner = self.expr(kids[0])
                m = re.fullmatch(r"\(?\s*&\s*\(?([\w:.]+)\)?\s*\)?", inner or "")
                if m is not None:
                    return m.group(1)
        if k in SPLICE or k == "CXX_UNARY_EXPR":
            return self._splice(c)
        return None

    def _sizeof(self, c) -> str | None:
        """`sizeof(fr_t)` of a type the application declares or `sizeof(*d_x)` of an expression, as the number of
        bytes clang computes (the MEP's size arithmetic has neither); sizeof of a built-in type stays as written."""
        text = self.p.text(c)
        if not re.match(r"\s*(sizeof|alignof|__alignof__)\b", text):
            return None
        fn = self.scope[-1] if self.scope else None
        if fn is not None and fn.kind.name == "FUNCTION_TEMPLATE":
            # `sizeof(T)` in `template <typename T> void run()`: T as the application instantiates run
            mapping, _ = enclosing_instantiation(self.p, fn, resolver=self)
            m = re.fullmatch(r"\s*(sizeof|alignof)\s*\(\s*([A-Za-z_]\w*)\s*\)\s*", text)
            if m and m.group(2) in mapping:
                return substitute(f"{m.group(1)}({m.group(2)})", mapping)
        cls = class_of(fn)
        if cls is not None and cls.kind.name == "CLASS_TEMPLATE":
            # `sizeof(K)` in a method of `Table<K>`: K as the calls of the method instantiate the class
            mapping, _ = class_instantiation(self.p, fn)
            m = re.fullmatch(r"\s*(sizeof|alignof)\s*\(\s*([A-Za-z_]\w*)\s*\)\s*", text)
            if m and m.group(2) in mapping:
                return substitute(f"{m.group(1)}({m.group(2)})", mapping)
            if m and m.group(2) in {c.spelling for c in cls.get_children()}:
                return None         # a parameter of the class template mepgen did not derive: no text as written
        own = any(n.kind.name == "TYPE_REF" and n.referenced is not None and self.p.in_app(n.referenced)
                  or n.kind.name == "DECL_REF_EXPR" for n in walk(c))    # `sizeof(*d_x)`: of an expression
        value = clang.evaluate_int(c) if own else None
        return str(value) if value is not None else None

    def _macro_call(self, c) -> list[str] | None:
        """The expanded tokens of a cursor that is exactly one invocation of a function-like macro of the
        application (`NUM_BLOCKS(n, TPB)`, mep/fnmacro.py), else None."""
        macros = getattr(self.p, "function_macros", {})
        if not macros or c.extent.start.file is None:
            return None
        text = self.p.text(c)
        head = re.match(r"\s*([A-Za-z_]\w*)\s*\(", text)
        if head is None or head.group(1) not in macros:      # cheap test first: no tokenizing every operator
            return None
        toks = fnmacro.tokens(text)
        if not fnmacro.invocation(toks, macros):
            return None
        expanded = fnmacro.expand(toks, macros)
        # every cursor the macro's body makes shares the invocation's extent: only the one whose form is the
        # expansion's is the invocation (not `size` inside `#define RUN(i) run(i, data, size)`)
        inner = c
        while inner.kind.name in ("PAREN_EXPR", "UNEXPOSED_EXPR") and len(list(inner.get_children())) == 1:
            inner = next(iter(inner.get_children()))
        k = inner.kind.name
        form = f"ref:{inner.spelling}" if k == "DECL_REF_EXPR" else "literal" if k in LITERALS else \
            f"call:{inner.spelling}" if k == "CALL_EXPR" else "expr"
        if expanded is None or (fnmacro.shape(expanded) != form and not (k == "CALL_EXPR" and inner.spelling in
                                                                          ("dim3", "uint3"))):
            return None
        return expanded

    def _element(self, c) -> str | None:
        """`local[1]` of an array initialized with a brace list (`size_t ls[2] = {BX, BY}`): that item; an
        array whose elements are assigned (`ls[0] = ...`) is not followed."""
        kids = list(c.get_children())
        if len(kids) != 2:
            return None
        base = strip(kids[0])
        if base is not None and base.kind.name == "DECL_REF_EXPR" and base.referenced is not None \
                and base.referenced.kind.name == "VAR_DECL" and base.referenced.type.get_canonical().kind.name \
                == "CONSTANTARRAY":
            d = base.referenced
            if d.get_usr() in element_writes(self.p, d):
                self.unsure.append(f"elements of `{d.spelling}` are assigned after its declaration")
                return None
            init = init_expr(d)
            index = self.expr(kids[1])
            if init is None or index is None or strip(init).kind.name != "INIT_LIST_EXPR":
                return None
            i = evaluate(index, self.p.macros)
            items = list(strip(init).get_children())
            if i is None or not 0 <= i < len(items):
                return None
            with self.inside(d.semantic_parent):
                return self.expr(items[i])
        return self._splice(c)

    def _has_refs(self, c) -> bool:
        for n in walk(c):
            if n.kind.name == "CXX_UNARY_EXPR" and self._sizeof(n) is not None:
                return True
            if n.kind.name in ("DECL_REF_EXPR", "MEMBER_REF_EXPR", "CALL_EXPR", "INIT_LIST_EXPR"):
                ref = n.referenced
                if n.kind.name == "DECL_REF_EXPR" and ref is not None and ref.kind.name == "ENUM_CONSTANT_DECL" \
                        and "::" in self.p.text(n):
                    continue
                return True
        return False

    def _splice(self, c) -> str | None:
        """The cursor's text with each sub-expression replaced by its value."""
        text = self.p.text(c)
        base = c.extent.start.offset
        out, pos = [], 0
        kids = sorted(c.get_children(), key=lambda x: x.extent.start.offset)
        for kid in kids:
            s, e = kid.extent.start.offset - base, kid.extent.end.offset - base
            if s < pos or e > len(text.encode()) or e <= s:
                return None  # extents inside macro expansions: cannot splice safely
            if kid.kind.name in KEEP:
                continue
            value = self.expr(kid)
            if value is None:
                return None
            raw = text.encode()
            out.append(raw[pos:s].decode())
            leaf = strip(kid).kind.name in ("DECL_REF_EXPR", "MEMBER_REF_EXPR", "CALL_EXPR")
            out.append(parens(value) if leaf else value)
            pos = e
        out.append(text.encode()[pos:].decode())
        return "".join(out)

    def _decl_ref(self, c) -> str | None:
        d = c.referenced
        if d is None:
            return None
        k = d.kind.name
        if k == "ENUM_CONSTANT_DECL":
            return qualified_name(d)
        if k == "PARM_DECL":
            return self._param(d)
        if k == "VAR_DECL":
            return self._var(d)
        if k == "TEMPLATE_NON_TYPE_PARAMETER":
            return self._template_arg(d)
        return None

    def _template_arg(self, d) -> str | None:
        """A non-type template parameter of the function the value is wanted in (`template <int N> void run()
        { k<<<1, N>>>(...); }`): its argument in the first instantiation the application calls (a stated
        choice when there are several), None when nothing calls it."""
        tmpl = d.semantic_parent
        if tmpl is None or tmpl.kind.name != "FUNCTION_TEMPLATE":
            return None
        params = [x for x in tmpl.get_children() if x.kind.name.startswith("TEMPLATE_") and
                  x.kind.name.endswith("PARAMETER")]
        index = next((i for i, x in enumerate(params) if x.get_usr() == d.get_usr()), None)
        values: list[tuple[int, object]] = []
        calls, decided = keep_reached(self, self.p.calls.get(tmpl.get_usr(), []))
        for call, _ in calls:
            spec = call.referenced
            try:
                if index is None or spec is None or index >= spec.get_num_template_arguments() or \
                        spec.get_template_argument_kind(index).name != "INTEGRAL":
                    continue
                values.append((spec.get_template_argument_value(index), call))
            except (AttributeError, ValueError):
                continue
        if not values:      # called only from other templates' bodies (`f<T, 64>(..)`, maybe through a macro)
            mapping, note = enclosing_instantiation(self.p, tmpl, resolver=self)
            value = mapping.get(d.spelling)
            if value is None or not re.fullmatch(r"-?\d+", value.strip()):
                return None
            if note:
                self.choices.append(note)
            return value.strip()
        value, call = values[0]
        others = sorted({v for v, _ in values} - {value})
        if decided:
            self.choices.append(f"`{d.spelling}` is the template argument {value} of {tmpl.spelling}() as called at "
                                f"{self.where(call)}, the call the run reaches: the others are under conditions "
                                "that are false with the values mepgen derived"
                                + (f" (candidates left: {', '.join(map(str, others))})" if others else ""))
        elif others:
            self.choices.append(f"`{d.spelling}` is the template argument {value} of {tmpl.spelling}() as called at "
                                f"{self.where(call)}, the first of its instantiations (others: "
                                f"{', '.join(map(str, others))})")
        return str(value)

    def _var(self, d) -> str | None:
        value = None
        mark = len(self.unsure)
        if d.semantic_parent is not None and d.semantic_parent.kind.name in ("NAMESPACE", "TRANSLATION_UNIT") \
                and not d.type.is_const_qualified():
            handled, value = self._global(d)
            if handled:
                return value if value is not None else self._symbol_for(d, init_expr(d), unsure=True)
        if d.semantic_parent is not None and d.semantic_parent.kind.name not in ("NAMESPACE", "TRANSLATION_UNIT") \
                and self._modified(d):
            handled, value = self._followed(d)
            if handled:
                return value if value is not None else self._symbol_for(d, init_expr(d), unsure=True)
        if d.semantic_parent is not None and d.semantic_parent.kind.name in ("NAMESPACE", "TRANSLATION_UNIT") \
                or not self._modified(d):
            with self.inside(d.semantic_parent):
                value = self.expr(init_expr(d))
            if value is not None and init_expr(d) is not None and strip(init_expr(d)).kind.name == "INIT_LIST_EXPR" \
                    and d.type.get_canonical().kind.name == "RECORD":
                value = type_name(d.type) + value
        if value is None:
            init = init_expr(d)
            fn = d.semantic_parent.spelling if d.semantic_parent is not None else "?"
            why = self._depends(f"`{d.spelling}` in {fn}() is `{self._written(d, init)}`", mark) \
                if init is not None else None
            return self._symbol_for(d, init, why=why)
        return value

    def _symbol_for(self, d, init, unsure: bool = False, why: Why | None = None) -> str | None:
        """A size symbol for an integer that is not a compile-time value (None for other types, unless the
        application's run command gives it)."""
        read = origin(self.p, init, d.spelling, self.where(d)) if init is not None and not unsure else None
        if read is None and init is not None and not unsure and any(
                n.kind.name == "DECL_REF_EXPR" and n.spelling == "argv" for n in walk(init)):   # macros blur text
            return self._argv_init(d, init)      # `atoi(argv[1])`, not `count_lines(argv[1])` (a file it reads)
        if not is_integral(d.type):
            if why is not None or read is not None:     # a scalar's todo says where it comes from
                self.unsure.append(why or read)
            return None
        fn = d.semantic_parent.spelling if d.semantic_parent is not None else "?"
        if why is not None:
            key, reason = f"decl:{d.get_usr()}", why
        elif unsure and self.unsure:
            key = f"decl:{d.get_usr()}"
            reason = self.unsure[-1]
        elif read is not None:
            key, reason = f"decl:{d.get_usr()}", read
        elif self._modified(d) and d.semantic_parent is not None \
                and d.semantic_parent.kind.name not in ("NAMESPACE", "TRANSLATION_UNIT"):
            key = f"decl:{d.get_usr()}"     # one symbol per variable, whichever way it was reached
            reason = f"`{d.spelling}` in {fn}() changes after its declaration and mepgen does not follow it there"
        elif init is not None:
            key = f"init:{self.p.text(init)}"
            reason = f"`{d.spelling}` in {fn}() is `{self._written(d, init)}`, which mepgen could not trace to a value"
        else:
            key = f"decl:{d.get_usr()}"
            reason = f"`{d.spelling}` in {fn}() gets no traceable value from its callers"
        name = self.symbols.preferred.get(d.get_usr(), d.spelling)
        return self.symbols.get(key, name, reason, self.taken)

    def _written(self, d, init) -> str:
        """An initializer as the declaration's line writes it: an extent that starts inside a macro's definition
        (`int g = ceilDiv(b, 4);`) would otherwise show the text from that definition on."""
        text = self.p.text(init)
        if "\n" not in text:
            return text
        f = d.location.file
        try:
            line = open(f.name, errors="replace").read().splitlines()[d.location.line - 1] if f else ""
        except (OSError, IndexError):
            line = ""
        m = re.search(rf"\b{re.escape(d.spelling)}\b\s*=\s*([^;]*)", line)
        return m.group(1).strip() if m else " ".join(text.split())[:80]

    def _modified(self, var) -> bool:
        """Whether a local variable is assigned, incremented or has its address taken after its declaration."""
        if var.type.is_const_qualified():
            return False
        fn = var.semantic_parent
        if fn is None:
            return True
        return var.get_usr() in modified_locals(self.p, fn)
