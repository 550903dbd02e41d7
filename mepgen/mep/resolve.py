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

from ..parsing import clang
from .dim3 import DIM3_TYPES, apply_step, decl_name, dim3_component
from .flow import element_writes, modified_locals
from .project import Project, qualified_name, walk
from .readers import Why, kind_of, origin, stored_by
from .symbols import Symbols
from .syntax import (KEEP, LITERALS, MINMAX, PURE_FUNCTIONS, SPLICE, group_end, guarded_returns, init_expr,
                     is_integral, join_tokens, operator_of, parens, single_return, sizeof_tokens, strip, struct_field,
                     type_name)


class Resolver:
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
            from .targs import enclosing_instantiation, substitute
            mapping, _ = enclosing_instantiation(self.p, fn, resolver=self)
            m = re.fullmatch(r"\s*(sizeof|alignof)\s*\(\s*([A-Za-z_]\w*)\s*\)\s*", text)
            if m and m.group(2) in mapping:
                return substitute(f"{m.group(1)}({m.group(2)})", mapping)
        from .classtmpl import class_instantiation, class_of
        cls = class_of(fn)
        if cls is not None and cls.kind.name == "CLASS_TEMPLATE":
            # `sizeof(K)` in a method of `Table<K>`: K as the calls of the method instantiate the class
            from .targs import substitute
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
        from . import fnmacro
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
            from ..cexpr import evaluate
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
        from .reach import keep_reached
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
            from .targs import enclosing_instantiation
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

    def _point(self, fn) -> int | None:
        """The offset in `fn` where values are wanted, if a scope being resolved names one."""
        if fn is None:
            return None
        usr, file = fn.get_usr(), fn.location.file.name if fn.location.file is not None else None
        for f, at in zip(reversed(self.scope), reversed(self.points)):
            if f is not None and at is not None and f.get_usr() == usr and \
                    (f.location.file.name if f.location.file is not None else None) == file:
                return at
        return None

    def _followed(self, d, within=None) -> tuple[bool, str | None]:
        """(handled, value) of a local that changes after its declaration: its value at the point the resolver
        is asked about, following the assignments that certainly run before it (mep/flow.py). `within`: for a
        global that only that function changes, the function; the value it had on entry is unknown (an earlier
        call may have changed it), so only an assignment of the whole value that certainly runs before the
        point gives one: (False, None) otherwise."""
        from . import flow
        parent = d.semantic_parent if within is None else within
        at = self._point(parent)
        fn = parent if parent is not None and parent.is_definition() else \
            self.p.find_function(parent.get_usr()) if parent is not None else None
        if at is None or fn is None:
            return False, None
        argv: list = []
        cmark = len(self.cond_why)
        try:
            steps = flow.steps_before(fn, d.get_usr(), d.spelling, flow.path_to(fn, at), at, self.choices,
                                      self.where, argv, decide=lambda cond: self._decide(fn, cond),
                                      stored=lambda call: stored_by(self.p, call, d.spelling, self.where(call)))
        except flow.Unsure as e:
            why, inner = e.args[0], self.cond_why[-1] if len(self.cond_why) > cmark else None
            if "under a condition" in why and kind_of(why) is None and inner is not None:
                why = Why(f"{why}, which depends on this: {inner}", kind_of(inner))
            if kind_of(why) is None:        # what it is built from may come from the input (mep/inputs.py)
                from .inputs import read_into
                read = read_into(self.p, d, fn, self.where)
                why = Why(f"{why}; {read}", read.kind) if read is not None else why
            self.unsure.append(why)
            return True, None
        if within is not None and (argv or not steps or steps[0].op != "=" or steps[0].member is not None):
            return False, None
        if argv:
            default = None
            if all(conditional for _, conditional, _ in argv):
                handled, default = self._value_from(d, fn, steps)
            m, _, option = argv[-1]
            if option is not None and len({o for _, _, o in argv}) > 1:
                self.unsure.append(f"`{d.spelling}` is set by several command-line options")
                return True, None
            from .cstrings import expanded      # `pos = strchr(optarg, 'x'); h = atoi(pos + 1);`: through pos
            text = expanded(self.p, fn, m) if m.rhs is not None else self.p.text(m.call)   # `sscanf(argv[2], ..)`
            return True, self._argv_symbol(d, text, self.where(m.node), default, option)
        return self._value_from(d, fn, steps)

    def _stored_through(self, call, index: int, d) -> str | None:
        """The value a function stores through its pointer parameter `index` (`void init(float* dt) { *dt =
        0.01f; }`): one unconditional `*p = expr` in its body and no other use of `p`; else None."""
        ref = call.referenced
        fn = self.p.find_function(ref.get_usr()) if ref is not None else None
        parms = [x for x in fn.get_children() if x.kind.name == "PARM_DECL"] if fn is not None else []
        body = next((c for c in fn.get_children() if c.kind.name == "COMPOUND_STMT"), None) if fn else None
        if index < 0 or index >= len(parms) or body is None:
            return None
        pusr = parms[index].get_usr()
        uses = [n for n in walk(body) if n.kind.name == "DECL_REF_EXPR" and n.referenced is not None
                and n.referenced.get_usr() == pusr]
        stores = []
        for st in body.get_children():
            n = strip(st)
            kids = list(n.get_children()) if n is not None else []
            if n is not None and n.kind.name == "BINARY_OPERATOR" and len(kids) == 2 and operator_of(n, kids) == "=":
                lhs = strip(kids[0])
                inner = strip(next(iter(lhs.get_children()), None)) if lhs.kind.name == "UNARY_OPERATOR" else None
                if inner is not None and operator_of(lhs, list(lhs.get_children())) == "*" \
                        and inner.kind.name == "DECL_REF_EXPR" and inner.referenced is not None \
                        and inner.referenced.get_usr() == pusr:
                    stores.append((n, kids[1]))
        if len(stores) != 1 or len(uses) != 1:
            return None
        node, rhs = stores[0]
        args = list(call.get_arguments())
        self.bindings.append({x.get_usr(): (a, None) for x, a in zip(parms, args)})
        try:
            with self.inside(fn, node.extent.start.offset):
                value = self.expr(rhs)
        finally:
            self.bindings.pop()
        if value is not None:
            self.choices.append(f"`{d.spelling}` is set by {fn.spelling}() at {self.where(node)}: "
                                f"{self.p.text(rhs)}")
        return value

    def _decide(self, fn, cond) -> bool | None:
        """The value of an `if` condition when it depends on constants only (macros, traced values), by the
        compiler; None when it depends on a value mepgen did not trace."""
        from ..cexpr import evaluate, names
        mark = len(self.unsure)
        with self.inside(fn, cond.extent.start.offset):
            text = self.expr(cond)
        unknown = names(text) & set(self.symbols.reasons) - set(self.symbols.from_run) if text is not None else set()
        if text is None or unknown:
            # why it cannot be decided, when that is a value of the input or of the run
            inner = [w for w in self.unsure[mark:] if kind_of(w)] + \
                [self.symbols.reasons[n] for n in sorted(unknown) if n in self.symbols.kinds]
            self.cond_why.append(inner[-1] if inner else None)
            return None
        # a pointer left at its null default (`if (input_file)` when the run gives no `-i`) tests false
        text = re.sub(r"\b(NULL|nullptr)\b", "0", text)
        value = evaluate(text, {**self.p.macros, **self.symbols.from_run})    # run-command values: stated already
        return None if value is None else bool(value)

    def _value_from(self, d, fn, steps) -> tuple[bool, str | None]:
        """The declaration's value with the followed changes applied."""
        init = init_expr(d)
        value = None
        if init is not None:
            mark = len(self.unsure)
            with self.inside(fn, d.extent.start.offset):
                value = self.expr(init)
                if value is None and any(n.kind.name == "DECL_REF_EXPR" and n.spelling == "argv"
                                             for n in walk(init)):
                    # `int w = atoi(argv[1]); w = (w + 255) / 256 * 256;`: the run command's value, then changed
                    value = self._argv_init(d, init)
            if value is None and not (steps and steps[0].op == "=" and steps[0].member is None):
                said = f"`{d.spelling}` in {fn.spelling}() is `{self._written(d, init)}`"
                self.unsure.append(origin(self.p, init, d.spelling, self.where(d)) or self._depends(said, mark)
                                   or f"{said}, which mepgen could not trace to a value")
                return True, None
        elif decl_name(d.type) in DIM3_TYPES:
            value = "dim3(1, 1, 1)"        # `dim3 blocks;`: CUDA's default constructor
        for st in steps:
            if st.op == "&arg":                  # `init(&dt)`: what init() stores through its parameter
                value = self._stored_through(st.call, st.index, d)
                if value is None:
                    self.unsure.append(stored_by(self.p, st.call, d.spelling, self.where(st.call)) or
                                       f"`{d.spelling}` is set through a pointer by {st.call.spelling}() at "
                                       f"{self.where(st.call)} in a way mepgen does not follow")
                    return True, None
                continue
            rhs = None
            if st.rhs is not None:
                mark = len(self.unsure)
                with self.inside(fn, st.offset):
                    rhs = self.expr(st.rhs)
                if rhs is None:
                    said = f"`{d.spelling}` is assigned `{self.p.text(st.rhs)}` at {self.where(st.rhs)}"
                    self.unsure.append(origin(self.p, st.rhs, d.spelling, self.where(st.rhs)) or
                                       self._depends(said, mark) or f"{said}, which mepgen could not trace to a value")
                    return True, None
            value = apply_step(value, st, rhs, d.type)
            if value is None:
                self.unsure.append(f"`{d.spelling}` changes at {self.where(d)}.. in a way mepgen does not follow "
                                   f"(`{st.op}` on {st.member or 'the whole value'})")
                return True, None
        return True, value

    def _global(self, d) -> tuple[bool, str | None]:
        """(handled, value) of a namespace-scope variable that functions of the application assign: set once,
        to one value (an init function's `g_alpha = 0.25f;`), it holds that value; anything else is unsure."""
        from . import flow
        try:
            external = d.linkage.name == "EXTERNAL"
        except ValueError:
            external = True
        if external:        # a plain C/C++ source may set it (`layer_size = atoi(argv[1])` in main.c)
            self.p.read_host_files(d.spelling, writes=True)
        writes = flow.global_writes(self.p).get(d.get_usr(), [])
        if not writes:
            return False, None
        from .members import device_written
        gpu = device_written(self.p, d.spelling, writes, self.where)
        if gpu is not None:         # `atomicAdd(&N, 1)` in a kernel: the host reads what the GPU computed
            self.unsure.append(gpu)
            return True, None
        fn, m = writes[0]
        if all(f == fn for f, _ in writes) and self._point(fn) is not None:
            # `num_blocks = n / 16; k<<<num_blocks, 16>>>(...)` in the one function that sets the global
            mark = len(self.unsure)
            handled, value = self._followed(d, within=fn)
            if handled:
                return handled, value
            del self.unsure[mark:]
        if len(writes) == 1 and m.op == "=" and m.member is None and flow.argv_write(m):
            # `void init(int argc, char** argv) { if (argc == 4) cols = atoi(argv[1]); else exit(1); }`
            with self.inside(fn, m.node.extent.start.offset):
                return True, self._argv_symbol(d, self.p.text(m.rhs), self.where(m.node), None)
        texts = {self.p.text(w.rhs) if w.rhs is not None else None for _, w in writes}
        if any(w.op != "=" or w.member is not None or w.rhs is None for _, w in writes) or len(texts) != 1:
            read = next(filter(None, (self._input_write(d, w) for _, w in writes)), None)
            self.unsure.append(Why(f"{read}; it is changed in {len(writes)} place(s)", read.kind) if read else
                               f"`{d.spelling}` is changed in {len(writes)} place(s) ({self.where(m.node)} first) "
                               "and mepgen does not know which holds at the launch")
            return True, None
        if init_expr(d) is not None:
            self.unsure.append(f"`{d.spelling}` has an initializer and is set again at {self.where(m.node)}")
            return True, None
        if any(x.kind.name in flow.BRANCHES + flow.LOOPS for _, w in writes for x in w.path):
            self.unsure.append(f"`{d.spelling}` is set at {self.where(m.node)} under a condition or in a loop")
            return True, None
        mark = len(self.unsure)
        with self.inside(fn, m.node.extent.start.offset):
            value = self.expr(m.rhs)
        if value is None:
            said = f"`{d.spelling}` is set to `{self.p.text(m.rhs)}` at {self.where(m.node)}"
            self.unsure.append(origin(self.p, m.rhs, d.spelling, self.where(m.node)) or self._depends(said, mark)
                               or f"{said}, which mepgen could not trace to a value")
            return True, None
        self.choices.append(f"`{d.spelling}` is set once, in {fn.spelling}() at {self.where(m.node)}: "
                            f"{self.p.text(m.rhs)}")
        return True, value

    def _input_write(self, d, w) -> Why | None:
        """Why one change of `d` gives it a value of the application's input or of the run, else None."""
        if w.op in ("&arg", "?") and w.node.kind.name in ("CALL_EXPR", "BINARY_OPERATOR") or w.call is not None:
            return stored_by(self.p, w.call if w.call is not None else w.node, d.spelling, self.where(w.node))
        return origin(self.p, w.rhs, d.spelling, self.where(w.node))

    def _depends(self, said: str, mark: int) -> Why | None:
        """`said`, and that it depends on a value of the input or of the run, when one of the reasons given since
        `mark` says so (`nelr = 16 * (nel / 16 + 1)` after `file >> nel`): a derived value keeps its origin."""
        inner = next((w for w in reversed(self.unsure[mark:]) if kind_of(w) is not None), None) or \
            next((w for w in reversed(self.unsure[mark:]) if "which no source mepgen parsed calls" in w
                  or w.startswith("`->")), None)       # a field set in several places (mep/fields.py)
        return Why(f"{said}, which depends on this: {inner}", kind_of(inner)) if inner is not None else None

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

    def _param(self, d) -> str | None:
        for frame in reversed(self.bindings):
            if d.get_usr() in frame:
                arg, _ = frame[d.get_usr()]
                return self.expr(arg)
        from .argtests import argc_value
        argc = argc_value(self.p, d, d.location.file.name if d.location.file is not None else None)
        if argc is not None:
            self.choices.append(argc[1])
            return argc[0]
        index, fn = self.param_index(d)
        if fn is None:
            return None
        mark = len(self.unsure)
        if self._changed_param(d, fn):
            # `void run(char* f, unsigned n) { init(f, n); k<<<n, ..>>>(); }` with `init(.., unsigned& n)`: the
            # value at the point is the one the function gave it, not what its caller passed
            handled, value = self._followed(d)
            if value is not None or len(self.unsure) > mark:
                return value if value is not None else self._symbol_for(d, None, unsure=True)
        here = fn.location.file.name if fn.location.file is not None else None
        from .recursion import outer_calls, outermost_note
        callers, recursive = outer_calls(fn, self.p.callers(fn))    # plain C/C++ sources are read now (hostsrc.py)
        calls = sorted(callers,                                 # callers of the same file (program) first
                       key=lambda cc: (cc[1].location.file.name if cc[1].location.file is not None else None) != here)
        for call, caller in calls:
            with self.inside(caller, call.extent.start.offset):
                value = self.call_arg(call, index)
            if value is not None:
                if recursive:
                    self.choices.append(outermost_note(d.spelling, fn.spelling, self.where(call)))
                return value
            args = list(call.get_arguments())
            read = origin(self.p, args[index], self.p.text(args[index]), self.where(call)) \
                if 0 <= index < len(args) else None
            if read is not None:        # `step(t[k])`: the caller passes an element of its data
                self.unsure.append(read)
        why = next((w for w in reversed(self.unsure[mark:]) if kind_of(w) is not None), None)
        if why is not None:     # the callers pass a value read from input: say so at this parameter
            name = fn.spelling
            return self._symbol_for(d, None, why=Why(f"`{d.spelling}` in {name}() is what its caller passes: {why}",
                                                     kind_of(why)))
        if not callers:         # no source calls it: an entry point, or its caller is in a file that did not parse
            detail = self.p.host.why_not_found(fn.spelling)
            return self._symbol_for(d, None, why=Why(f"`{d.spelling}` is a parameter of {fn.spelling}(), which no "
                                                     f"source mepgen parsed calls{detail}"))
        return self._symbol_for(d, None)

    def _changed_param(self, d, fn) -> bool:
        """Whether the function whose parameter `d` is changes it before the point the value is wanted at."""
        from . import flow
        body = fn if fn.is_definition() else self.p.find_function(fn.get_usr())
        at = self._point(body) if body is not None else None
        # an address stored for a launch (`void* args[] = {&n, ..}; cudaLaunchKernel(..)`) changes nothing
        return at is not None and d.get_usr() in modified_locals(self.p, body) and any(
            m.node.extent.start.offset < at and (m.op != "?" or m.node.kind.name == "CALL_EXPR" or any(
                x.kind.name == "CALL_EXPR" for x in m.path)) for m in flow.modifications(body, d.get_usr()))

    def param_index(self, d):
        fn = d.semantic_parent
        if fn is None:
            return -1, None
        parms = [x for x in fn.get_children() if x.kind.name == "PARM_DECL"]
        for i, x in enumerate(parms):
            if x.get_usr() == d.get_usr() or (x.spelling == d.spelling and x.location.offset == d.location.offset):
                return i, fn
        return -1, None

    def _argv_symbol(self, d, text: str, where: str, default: str | None, option: str | None = None) -> str | None:
        """The value of a variable the command line sets: the argument of the application's own run command
        (a stated choice, in the notes), else a size symbol whose todo names the argument, the application's
        default (the value it runs with when the argument is not given) when the code has one, and why the
        run command did not give it (mep/argvalue.py)."""
        from ..cexpr import integer
        from .argvalue import flag, from_run
        integral = is_integral(d.type)
        value = integer(default, {**self.p.macros, **self.symbols.defaults, **self.symbols.from_run}) \
            if default is not None and integral else None
        fn = d.semantic_parent.spelling if d.semantic_parent is not None else "?"
        got = from_run(self.p, d.spelling, text, integral,
                       str(value) if value is not None else (default if not integral else None), option,
                       d.location.file.name if d.location.file is not None else None)
        name = self.symbols.preferred.get(d.get_usr(), d.spelling)
        if got.value is not None:
            self.choices.append(got.note)
            if not integral:
                return got.value
            reason = f"`{d.spelling}` in {fn}() comes from the command line at {where}; {got.note}"
            sym = self.symbols.get(f"argv:{d.get_usr()}", name, reason, self.taken)
            self.symbols.from_run[sym] = int(got.value)
            return sym
        if not integral:
            return None
        arg = re.search(r"argv\s*\[[^\]]*\]", text)
        shown = f"option {flag(option)}" if option else arg.group(0) if arg else text
        reason = (f"`{d.spelling}` in {fn}() comes from the command line (`{shown}` at "
                  f"{where})")
        reason += f"; the application's default without it is {value}, used here" if value is not None \
            else "; the code gives it no default"
        reason += f"; {got.note}"
        sym = self.symbols.get(f"argv:{d.get_usr()}", name, reason, self.taken)
        if value is not None:
            self.symbols.defaults[sym] = value
        return sym

    def _argv_init(self, d, init) -> str | None:
        """The symbol of a variable initialized from the command line: `argc > 1 ? atoi(argv[1]) : 1024`."""
        c = strip(init)
        while c is not None and c.kind.name in ("PAREN_EXPR", "UNEXPOSED_EXPR") and len(list(c.get_children())) == 1:
            c = strip(list(c.get_children())[0])
        default = None
        if c is not None and c.kind.name == "CONDITIONAL_OPERATOR":
            kids = list(c.get_children())
            if len(kids) == 3:
                other = [k for k in kids[1:] if not any(t.spelling == "argv" for t in k.get_tokens())]
                if len(other) == 1:
                    default = self.expr(other[0])
        return self._argv_symbol(d, self.p.text(init), self.where(d), default)

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

    def _member(self, c) -> str | None:
        kids = list(c.get_children())
        field_decl = c.referenced
        if field_decl is None or field_decl.kind.name != "FIELD_DECL":
            return None
        mark = len(self.unsure)
        base = self.expr(kids[0]) if kids else None       # no child: `count` inside a method (this->count)
        this = not kids or strip(kids[0]) is not None and strip(kids[0]).kind.name == "CXX_THIS_EXPR"
        if base is None and this and self.scope:     # set by the constructor of the object (mep/classtmpl.py)
            from .classtmpl import member_value
            method = self.scope[-1]
            value = member_value(self, c, method) if method is not None else None
            if value is not None:
                del self.unsure[mark:]
                return value
        if base is None:
            said = len(self.unsure)
            if kids:            # `net->n` of a struct a create function made (mep/fields.py)
                from .fields import field_value
                value = field_value(self, c)
                if value is not None:
                    del self.unsure[mark:]
                    return value
            from .members import changing_member
            why = changing_member(self.p, c, self.where(c)) if len(self.unsure) == said else None
            if why is not None:     # (a reason the create function's reading gave says more)
                self.unsure.append(why)
            return None
        if field_decl.semantic_parent is not None and field_decl.semantic_parent.spelling in DIM3_TYPES:
            return dim3_component(base, field_decl.spelling)
        return struct_field(base, field_decl.semantic_parent.type, field_decl.spelling)

    def _call(self, c) -> str | None:
        ref = c.referenced
        args = [a for a in c.get_arguments()]
        name = c.spelling
        from .argtests import string_compare
        compared = string_compare(self.p, c, c.location.file.name if c.location.file is not None else None)
        if compared is not None:
            self.choices.append(compared[1])
            return compared[0]
        if ref is None:
            from .tmplcast import template_cast
            cast = template_cast(self, c)      # `fp(2.0)` in `template <typename fp> void run()`
            if cast is not None:
                return cast
        if ref is not None and ref.kind.name == "CONSTRUCTOR" and name == "dim3":
            vals = [self.expr(a) for a in args if self.p.text(a)]
            return None if None in vals else "dim3(" + ", ".join(vals) + ")"
        if ref is not None and ref.kind.name == "CONSTRUCTOR" and len(args) == 1:
            return self.expr(args[0])   # an implicit conversion (int -> dim3, copy)
        if name in MINMAX:
            vals = [self.expr(a) for a in args]
            if None in vals:
                return None
            ns = "std::" if ref is not None and ref.semantic_parent is not None \
                and ref.semantic_parent.spelling == "std" else ""
            return f"{ns}{name}(" + ", ".join(vals) + ")"
        if name in PURE_FUNCTIONS and ref is not None and not self.p.in_app(ref):
            vals = [self.expr(a) for a in args]
            if None in vals:
                return None
            callee = self.p.text(c).split("(")[0].strip() or name     # `std::ceil` as written
            return f"{callee}(" + ", ".join(vals) + ")"
        fn = self.p.find_function(ref.get_usr()) if ref is not None else None
        if fn is None and ref is not None and ref.kind.name == "FUNCTION_DECL" and "<" not in \
                self.p.text(c).split("(")[0]:
            # `divUp(n, 4 * W)` of `template <typename T> T divUp(T a, T b)`: the template's body, its T deduced
            # from the arguments (so their arithmetic is T's); explicit template arguments are not inlined
            tmpl = clang.specialized_template(ref)
            fn = self.p.find_function(tmpl.get_usr()) if tmpl is not None else None
        ret = single_return(fn) if fn is not None else None
        arms = guarded_returns(fn) if fn is not None and ret is None else None
        if ret is None and not arms:
            from .selfcontained import helper_value
            return helper_value(self, c, fn, args) if fn is not None else None
        parms = [x for x in fn.get_children() if x.kind.name == "PARM_DECL"]
        self.bindings.append({p.get_usr(): (a, None) for p, a in zip(parms, args)})
        try:
            with self.inside(fn):
                if ret is not None:
                    return self.expr(ret)
                # `if (a % b == 0) return a / b; return a / b + 1;` as C++'s own conditional expression
                text = None
                for cond, value in reversed(arms):
                    v = self.expr(value)
                    if v is None:
                        return None
                    if cond is None:
                        text = v
                        continue
                    c = self.expr(cond)
                    if c is None or text is None:
                        return None
                    text = f"(({c}) ? ({v}) : ({text}))"
                return text
        finally:
            self.bindings.pop()

    # --- text inside macro arguments -------------------------------------------------------------------
    def call_arg(self, call, index: int) -> str | None:
        """Argument `index` of a call, from its cursor, or from its tokens when it sits in a macro argument."""
        args = list(call.get_arguments())
        if index < len(args) and args[index].extent.end.offset > args[index].extent.start.offset:
            return self.expr(args[index])
        toks = self.call_arg_tokens(call, index)
        if self.p.spelled_as_macro_parameter(call, toks):
            self.unsure.append(f"argument {index + 1} of the call at {self.where(call)} is a parameter of the macro "
                               "that makes the call: mepgen does not follow a value through a macro's parameter")
            return None
        return self.tokens_expr(toks)

    @staticmethod
    def call_arg_tokens(call, index: int) -> list[str]:
        """The tokens of argument `index` as written in the call."""
        toks = [t.spelling for t in call.get_tokens()]
        if "(" not in toks:
            return []
        groups, depth, cur = [], 0, []
        for t in toks[toks.index("(") + 1:]:
            if t in ("(", "[", "{"):
                depth += 1
            elif t in (")", "]", "}"):
                if depth == 0:
                    break
                depth -= 1
            if t == "," and depth == 0:
                groups.append(cur)
                cur = []
            else:
                cur.append(t)
        groups.append(cur)
        return groups[index] if index < len(groups) else []

    def tokens_expr(self, toks: list[str]) -> str | None:
        """Resolve an expression given as tokens: names of the current function's variables are replaced
        by their values, `var.field` by the field's initializer; macros and literals stay as written."""
        if not toks:
            return None
        decls = self._scope_decls(self.scope[-1]) if self.scope else {}
        out, i = [], 0
        while i < len(toks):
            t, prev = toks[i], toks[i - 1] if i else ""
            if t == "sizeof" and i + 1 < len(toks) and toks[i + 1] == "(":
                end = group_end(toks, i + 1)
                size = sizeof_tokens(toks[i + 2:end], decls)
                if size is False:
                    return None
                out += [str(size)] if size is not None else toks[i:end + 1]   # an operand is not evaluated
                i = end + 1
                continue
            if t in decls and prev not in (".", "->", "::"):
                d = decls[t]
                value = self._var(d) if d.kind.name == "VAR_DECL" else self._param(d)
                if value is not None and i + 2 < len(toks) and toks[i + 1] == ".":
                    value = struct_field(value, d.type, toks[i + 2])
                    i += 2
                if value is None:
                    return None
                out.append(parens(value))
            else:
                out.append(t)
            i += 1
        return join_tokens(out)

    def _scope_decls(self, fn) -> dict:
        if fn is None:
            return {}
        key = fn.get_usr()
        if key not in self._decls:
            self._decls[key] = {n.spelling: n for n in walk(fn) if n.kind.name in ("VAR_DECL", "PARM_DECL")}
        return self._decls[key]




