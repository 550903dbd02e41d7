"""Values of members and calls: fields of structs and class templates, one-line and guarded helper functions
inlined, pure library functions, `min`/`max`, and a call's arguments as tokens (`sizeof` of the function's
variables included). A mixin of the Resolver (resolve.py): it calls back only through `self`."""
from __future__ import annotations

from ..parsing import clang
from .argtests import string_compare
from .classtmpl import member_value
from .dim3 import DIM3_TYPES, dim3_component
from .fields import field_value
from .members import changing_member
from .project import walk
from .selfcontained import helper_value
from .syntax import (MINMAX, PURE_FUNCTIONS, group_end, guarded_returns, join_tokens, parens, single_return,
                     sizeof_tokens, strip, struct_field)
from .tmplcast import template_cast


class CallValues:
    """The values of members and calls (helpers inlined, fields read)."""

    def _member(self, c) -> str | None:
        kids = list(c.get_children())
        field_decl = c.referenced
        if field_decl is None or field_decl.kind.name != "FIELD_DECL":
            return None
        mark = len(self.unsure)
        base = self.expr(kids[0]) if kids else None       # no child: `count` inside a method (this->count)
        this = not kids or strip(kids[0]) is not None and strip(kids[0]).kind.name == "CXX_THIS_EXPR"
        if base is None and this and self.scope:     # set by the constructor of the object (mep/classtmpl.py)
            method = self.scope[-1]
            value = member_value(self, c, method) if method is not None else None
            if value is not None:
                del self.unsure[mark:]
                return value
        if base is None:
            said = len(self.unsure)
            if kids:            # `net->n` of a struct a create function made (mep/fields.py)
                value = field_value(self, c)
                if value is not None:
                    del self.unsure[mark:]
                    return value
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
        compared = string_compare(self.p, c, c.location.file.name if c.location.file is not None else None)
        if compared is not None:
            self.choices.append(compared[1])
            return compared[0]
        if ref is None:
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
            const = None if t in decls or prev in (".", "->", "::") else self._const_global(t)
            if (t in decls or const is not None) and prev not in (".", "->", "::"):
                d = decls[t] if t in decls else const
                value = self._var(d) if t in decls and d.kind.name == "VAR_DECL" else \
                    self._param(d) if t in decls else self._const_value(d)
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

    def _const_global(self, name: str):
        """The namespace-scope const variable a token names (a launch inside a function-like macro gives its grid
        as tokens: `call_kernel(k, n_blocks, n_threads)`), preferring the current function's file; None for a
        macro, a name no global const has, or one several files define differently."""
        if name in self.p.macros:
            return None
        found = [c for c in self.p.globals.values() if c.spelling == name and c.type.is_const_qualified()
                 and c.semantic_parent is not None and c.semantic_parent.kind.name == "TRANSLATION_UNIT"]
        fn = self.scope[-1] if self.scope else None
        here = [c for c in found if fn is not None and c.location.file is not None and fn.location.file is not None
                and c.location.file.name == fn.location.file.name]
        return (here or found)[0] if len(here or found) == 1 else None

    def _const_value(self, d) -> str | None:
        """A namespace-scope const's value, once per resolver; None while it is being resolved (a macro whose
        parameter has the const's name would otherwise expand it into itself)."""
        cache = self.__dict__.setdefault("_const_values", {})
        usr = d.get_usr()
        if usr not in cache:
            cache[usr] = None
            cache[usr] = self._var(d)
        return cache[usr]

    def _scope_decls(self, fn) -> dict:
        """The variables and parameters a name may mean inside `fn`; at namespace scope (a global's initializer)
        only the namespace's own variables, never a local or a parameter of some function in the file (each such
        parameter would be followed through all its callers)."""
        if fn is None:
            return {}
        key = fn.get_usr() or f"{fn.kind.name}:{fn.spelling}"
        if key not in self._decls:
            if fn.kind.name in ("TRANSLATION_UNIT", "NAMESPACE", "LINKAGE_SPEC"):
                self._decls[key] = {n.spelling: n for n in _namespace_vars(fn)}
            else:
                self._decls[key] = {n.spelling: n for n in walk(fn) if n.kind.name in ("VAR_DECL", "PARM_DECL")}
        return self._decls[key]


def _namespace_vars(scope):
    """The variables declared directly in a namespace scope (and the namespaces and extern blocks inside it)."""
    for c in scope.get_children():
        if c.kind.name == "VAR_DECL":
            yield c
        elif c.kind.name in ("NAMESPACE", "LINKAGE_SPEC"):
            yield from _namespace_vars(c)
