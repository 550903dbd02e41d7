"""Host helpers that compute a value from their arguments alone, inlined as C++ lambdas.

`size_t roundDown(size_t v) { v--; v |= v >> 1; ...; return v >> 1; }` is neither one `return` nor guarded
returns (resolve.py inlines those as expressions), yet its result is a function of its arguments only. Such a
helper is written into the value as an immediately invoked lambda of its own text,
`[](size_t v) -> size_t { ... }(ARG)`, so the compiler evaluates it with C++'s semantics (cppeval, the harness),
never a re-implementation. A helper qualifies only when everything it names is its own (parameters and locals
of built-in arithmetic types), it calls nothing, uses no macro, and its text lies in one file outside any macro.
"""
from __future__ import annotations
from ..cppeval import evaluate
from ..cexpr import names

_ARITH = {"BOOL", "CHAR_U", "UCHAR", "CHAR16", "CHAR32", "USHORT", "UINT", "ULONG", "ULONGLONG", "UINT128",
          "CHAR_S", "SCHAR", "WCHAR", "SHORT", "INT", "LONG", "LONGLONG", "INT128", "FLOAT", "DOUBLE", "LONGDOUBLE"}
_REFUSED = {"CALL_EXPR", "CXX_NEW_EXPR", "CXX_DELETE_EXPR", "CXX_THROW_EXPR", "GOTO_STMT", "ASM_STMT",
            "GCC_ASM_STMT", "MS_ASM_STMT", "LAMBDA_EXPR", "CXX_TRY_STMT", "STMT_EXPR", "MEMBER_REF_EXPR",
            "ARRAY_SUBSCRIPT_EXPR", "CXX_THIS_EXPR", "STRING_LITERAL", "ADDR_LABEL_EXPR"}


def _arith(t) -> bool:
    return t.get_canonical().kind.name in _ARITH


def _walk(c):
    yield c
    for k in c.get_children():
        yield from _walk(k)


def lambda_text(project, fn) -> str | None:
    """`[](params) -> result { body }` of a self-contained helper `fn` (a FUNCTION_DECL with a body), or None."""
    body = next((c for c in fn.get_children() if c.kind.name == "COMPOUND_STMT"), None)
    if body is None or fn.kind.name != "FUNCTION_DECL" or not _arith(fn.result_type):
        return None
    params = [c for c in fn.get_children() if c.kind.name == "PARM_DECL"]
    if any(not _arith(p.type) or not p.spelling for p in params):
        return None
    start, end = body.extent.start, body.extent.end
    if start.file is None or end.file is None or start.file.name != end.file.name or end.offset <= start.offset:
        return None        # the body comes from a macro
    own = {p.get_usr() for p in params}
    for c in _walk(body):
        kind = c.kind.name
        if kind in _REFUSED or kind.endswith("_LITERAL") and kind not in ("INTEGER_LITERAL", "FLOATING_LITERAL",
                                                                          "CXX_BOOL_LITERAL_EXPR"):
            return None
        if kind == "VAR_DECL":
            if not _arith(c.type) or c.storage_class.name == "STATIC":
                return None
            own.add(c.get_usr())
        elif kind == "DECL_REF_EXPR":
            ref = c.referenced
            if ref is None or ref.get_usr() not in own:
                return None      # a global, a function, an enumerator: not the helper's own
    text = project.text(body)
    if not text or len(text) > 4000 or "#" in text:
        return None
    # a macro used in the body: its tokens would name something other than what the AST shows; a type of the
    # application's own (`typedef float REAL`) is not known where the value is compiled
    toks = [t for t in body.get_tokens() if t.kind.name == "IDENTIFIER"]
    names = {n.spelling for n in _walk(body) if n.kind.name in ("VAR_DECL", "DECL_REF_EXPR")}
    names |= {p.spelling for p in params}
    for n in _walk(body):
        if n.kind.name == "TYPE_REF":
            if n.referenced is None or project.in_app(n.referenced):
                return None
            names.add(n.spelling.split("::")[-1].split()[-1])
    if any(t.spelling not in names for t in toks):
        return None
    sig = ", ".join(f"{p.type.get_canonical().spelling} {p.spelling}" for p in params)
    return f"[]({sig}) -> {fn.result_type.get_canonical().spelling} {text}"


def helper_value(r, call, fn, args) -> str | None:
    """The value of `call` of the self-contained helper `fn` as an integer literal, computed by the compiler
    from its arguments' values (macros, the run command's values), with a note that says so; None when `fn`
    is not self-contained or an argument is not known."""
    helper = lambda_text(r.p, fn)
    if helper is None:
        return None
    vals = [r.expr(a) for a in args]
    if None in vals:
        return None
    used = sorted(set().union(*(names(v) for v in vals)) & set(r.symbols.from_run)) if vals else []
    unknown = set().union(*(names(v) for v in vals)) & set(r.symbols.reasons) - set(used) if vals else set()
    if unknown:
        return None      # a placeholder symbol: its value says nothing
    value = evaluate(f"{helper}(" + ", ".join(vals) + ")", {**r.p.macros, **r.symbols.from_run})
    if value is None:
        return None
    shown = " ".join(r.p.text(call).split())
    note = f"`{shown}` at {r.where(call)} = {value}: {fn.spelling}() computed by the compiler"
    if used:
        note += f" with {', '.join(f'{n} = {r.symbols.from_run[n]}' for n in used)} (a new value of " \
                f"{' or '.join(used)} does not change it in the MEP)"
    if note not in r.choices:
        r.choices.append(note)
    return str(value)
