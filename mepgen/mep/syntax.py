"""Facts of the syntax tree that every value resolver reads: implicit wrappers skipped, a variable's
initializer, an operator's token, a helper's returns, tokens joined back to C++.

The bottom layer of mep/ (facts, then values, then assembly): it imports nothing of mep/, so every module may."""
from __future__ import annotations

import re

from ..cexpr import is_one_group, split_top_level
from ..parsing import clang

LITERALS = ("INTEGER_LITERAL", "FLOATING_LITERAL", "CXX_BOOL_LITERAL_EXPR", "CHARACTER_LITERAL",
             "CXX_NULL_PTR_LITERAL_EXPR")
SPLICE = ("BINARY_OPERATOR", "UNARY_OPERATOR", "PAREN_EXPR", "CSTYLE_CAST_EXPR", "CXX_STATIC_CAST_EXPR",
           "CXX_FUNCTIONAL_CAST_EXPR", "CONDITIONAL_OPERATOR", "UNEXPOSED_EXPR")
KEEP = ("TYPE_REF", "NAMESPACE_REF", "TEMPLATE_REF")
INTEGRAL = {"INT", "UINT", "LONG", "ULONG", "LONGLONG", "ULONGLONG", "SHORT", "USHORT", "CHAR_S", "UCHAR",
             "SCHAR", "CHAR_U", "BOOL"}
MINMAX = ("max", "min")
#: functions of the C/C++ standard library whose value depends only on their arguments (launch arithmetic)
PURE_FUNCTIONS = {f + sfx for f in ("ceil", "floor", "round", "trunc", "sqrt", "cbrt", "pow", "log2", "log10", "log",
                                    "exp2", "exp", "fabs", "fmin", "fmax", "fmod", "lround", "llround", "sin", "cos",
                                    "tan", "asin", "acos", "atan", "atan2", "sinh", "cosh", "tanh", "hypot")
                  for sfx in ("", "f", "l")} | {"abs", "labs", "llabs"}


def strip(c):
    """Skip implicit-conversion wrappers that libclang reports as UNEXPOSED_EXPR with one child."""
    while c is not None and c.kind.name == "UNEXPOSED_EXPR":
        kids = list(c.get_children())
        if len(kids) != 1:
            break
        c = kids[0]
    return c


def is_integral(t) -> bool:
    return t.get_canonical().kind.name in INTEGRAL or t.get_canonical().kind.name == "ENUM"


def parens(text: str) -> str:
    """Wrap a substituted expression unless it is a single token or already one group."""
    t = text.strip()
    if re.fullmatch(r"[\w:.]+|\d[\w.]*|-?\d[\w.]*", t) or is_one_group(t):
        return t
    return f"({t})"


def init_expr(var):
    """The initializer of a VAR_DECL, or None: skips array bounds (`float coef[5]` has none)."""
    toks = list(var.get_tokens())
    names = [i for i, t in enumerate(toks) if t.spelling == var.spelling]
    if not toks:
        # no tokens: libclang gives none for a declaration that starts with a macro expanding to its type
        # (`real_vec_t *p = (real_vec_t*) q;`): its last expression child is the initializer (an array's
        # bound is not one)
        kids = [c for c in var.get_children() if c.kind.name not in KEEP and not c.kind.name.endswith("_ATTR")]
        array = var.type.get_canonical().kind.name in ("CONSTANTARRAY", "VARIABLEARRAY", "INCOMPLETEARRAY")
        return kids[-1] if kids and not (array and len(kids) == 1) else None
    if not names:
        return None
    i, depth = names[0] + 1, 0
    while i < len(toks) and (toks[i].spelling == "[" or depth):
        depth += toks[i].spelling == "["
        depth -= toks[i].spelling == "]"
        i += 1
    if i >= len(toks) or toks[i].spelling not in ("=", "{", "("):
        return None
    kids = [c for c in var.get_children() if c.kind.name not in KEEP and not c.kind.name.endswith("_ATTR")]
    return kids[-1] if kids else None


def operator_of(node, kids) -> str:
    """The operator token of a unary/binary operator cursor."""
    known = clang.operator_spelling(node)   # without tokenizing the expression (quadratic when nested)
    if known is not None:
        return known
    toks = [t.spelling for t in node.get_tokens()]
    if node.kind.name == "UNARY_OPERATOR":
        return toks[0] if toks and toks[0] in ("&", "*", "++", "--", "-", "!", "~", "+") else \
            (toks[-1] if toks else "")
    lhs_end = kids[0].extent.end.offset
    for t in node.get_tokens():
        if t.extent.start.offset >= lhs_end:
            return t.spelling
    return ""


def group_end(toks: list[str], open_at: int) -> int:
    """Index of the `)` closing the `(` at `open_at` (the last token when unbalanced)."""
    depth = 0
    for j in range(open_at, len(toks)):
        depth += toks[j] == "("
        depth -= toks[j] == ")"
        if depth == 0:
            return j
    return len(toks) - 1


def sizeof_tokens(inner: list[str], decls: dict):
    """The byte size of `sizeof(x)`, `sizeof(*p)` or `sizeof(p[0])` over a variable of the function (from its
    declared type); None when the operand names no variable (a type: kept as written); False when it names one
    whose size mepgen cannot tell."""
    names = [t for t in inner if t in decls]
    if not names:
        return None
    t = decls[names[0]].type.get_canonical()
    if inner == [names[0]]:
        size = t.get_size()
    elif inner == ["*", names[0]] or (len(inner) >= 4 and inner[0] == names[0] and inner[1] == "[" and
                                      inner[-1] == "]"):
        pointee = t.get_pointee() if t.kind.name == "POINTER" else t.element_type
        size = pointee.get_size() if pointee is not None and pointee.kind.name != "INVALID" else -1
    else:
        return False
    return size if size > 0 else False


def single_return(fn):
    """The returned expression of a function whose body is one `return expr;` (inlinable helpers)."""
    body = next((c for c in fn.get_children() if c.kind.name == "COMPOUND_STMT"), None)
    stmts = list(body.get_children()) if body is not None else []
    if len(stmts) == 1 and stmts[0].kind.name == "RETURN_STMT":
        kids = list(stmts[0].get_children())
        return kids[0] if kids else None
    return None


def guarded_returns(fn) -> list[tuple] | None:
    """[(condition, returned), ..., (None, returned)] of a helper whose body is only `if (c) return a;` statements
    (an `else return b;` too) ending in `return z;`; None for any other body."""
    def single(stmt):
        if stmt.kind.name == "COMPOUND_STMT":
            inner = list(stmt.get_children())
            stmt = inner[0] if len(inner) == 1 else None
        if stmt is None or stmt.kind.name != "RETURN_STMT":
            return None
        kids = list(stmt.get_children())
        return kids[0] if kids else None
    body = next((c for c in fn.get_children() if c.kind.name == "COMPOUND_STMT"), None)
    stmts = list(body.get_children()) if body is not None else []
    arms: list[tuple] = []
    for i, st in enumerate(stmts):
        last = i == len(stmts) - 1
        if st.kind.name == "IF_STMT":
            kids = list(st.get_children())
            if len(kids) not in (2, 3) or single(kids[1]) is None:
                return None
            arms.append((kids[0], single(kids[1])))
            if len(kids) == 3:
                if not last or single(kids[2]) is None:
                    return None
                arms.append((None, single(kids[2])))
        elif last and single(st) is not None:
            arms.append((None, single(st)))
        else:
            return None
    return arms if len(arms) >= 2 and arms[-1][0] is None else None


def type_name(t) -> str:
    """The fully qualified type name, without cv-qualifiers: `const heat::Grid` -> `heat::Grid`."""
    return re.sub(r"\b(const|volatile)\s+", "", t.get_canonical().spelling).strip()


def struct_field(value: str, struct_type, name: str) -> str | None:
    """Field `name` of a brace-initialized struct value `T{a, b, ...}` (by declaration order)."""
    m = re.fullmatch(r"\s*[\w:<>, ]*\{(.*)\}\s*", value, re.S)
    decl = struct_type.get_canonical().get_declaration() if struct_type is not None else None
    if not m or decl is None:
        return None
    fields = [f.spelling for f in decl.get_children() if f.kind.name == "FIELD_DECL"]
    items = split_top_level(m.group(1))
    return items[fields.index(name)] if name in fields and fields.index(name) < len(items) else None


def join_tokens(tokens: list[str]) -> str:
    """Tokens back to readable C++: `dim3 ( a + 1 )` -> `dim3(a + 1)`."""
    text = " ".join(tokens)
    text = re.sub(r"\s*(::|\.|->)\s*", r"\1", text)
    text = re.sub(r"\(\s+", "(", text)
    text = re.sub(r"\s+\)", ")", text)
    text = re.sub(r"\s+,", ",", text)
    text = re.sub(r"(\w)\s+\(", lambda m: m.group(1) + "(", text)
    text = re.sub(r"<\s+", "<", text)
    text = re.sub(r"\s+>", ">", text)
    return text


def template_params(enclosing) -> list[str]:
    """The names of the template parameters a function or class template declares, in order."""
    return [c.spelling for c in enclosing.get_children()
            if c.kind.name in ("TEMPLATE_TYPE_PARAMETER", "TEMPLATE_NON_TYPE_PARAMETER")]
