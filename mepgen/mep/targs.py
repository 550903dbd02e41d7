"""The template arguments a launch instantiates its kernel with, as C++ would pick them.

`k<<<g, b>>>(d_x, n)` with `template <typename T> __global__ void k(T *x, int n)` names no argument: C++
deduces `T` from `d_x`'s type. Outside a template, clang has already made the specialisation and its arguments
are read from it. Inside a function template (`template <typename T> void run() { T *d; ... k<<<...>>>(d); }`)
the call is dependent: `T` is deduced by matching the kernel's parameter types against the arguments' types,
and the enclosing template's own parameters are then replaced by the arguments it is instantiated with
where the application calls it (the first such call; the note says so when there are several).
Nothing is guessed: a parameter neither written, deduced nor substituted stays unknown and the caller makes a
todo of it.
"""
from __future__ import annotations

import re
from pathlib import Path

from ..parsing.clang import specialized_template
from .project import Project, walk
from .syntax import strip, template_params
from ..extract.launches import _template_args
from . import fnmacro
from .reach import keep_reached
from .classtmpl import class_instantiation, class_of
from .. import cexpr

_QUALS = re.compile(r"\b(const|volatile|__restrict__|__restrict|struct|class|typename)\b")


def _norm(t: str) -> str:
    return " ".join(_QUALS.sub(" ", t).replace("&", " ").split()).replace(" *", "*")


def _spelled_args(spec) -> list[str] | None:
    """The arguments of a function template specialisation (`k<float, 4>`), types by their canonical name."""
    try:
        n = spec.get_num_template_arguments()
    except Exception:  # an older binding
        return None
    if n <= 0:
        return None
    out = []
    tmpl = specialized_template(spec)
    params = [x for x in tmpl.get_children() if x.kind.name.startswith("TEMPLATE_") and
              x.kind.name.endswith("PARAMETER")] if tmpl is not None else []
    for i in range(n):
        try:
            kind = spec.get_template_argument_kind(i).name
        except ValueError:      # a kind the binding does not name (a pack expansion, say)
            return None
        if kind == "TYPE":
            out.append(spec.get_template_argument_type(i).get_canonical().spelling)
        elif kind in ("INTEGRAL", "DECLARATION", "NULLPTR"):
            # libclang gives a value sign-extended from its width: `true` of a `bool` parameter is -1
            ptype = params[i].type.get_canonical().kind.name if i < len(params) and \
                params[i].kind.name == "TEMPLATE_NON_TYPE_PARAMETER" else ""
            if ptype == "BOOL":
                out.append("true" if spec.get_template_argument_value(i) else "false")
            elif ptype.startswith("U") or ptype == "CHAR_U":
                out.append(str(spec.get_template_argument_unsigned_value(i)))
            else:
                out.append(str(spec.get_template_argument_value(i)))
        else:
            return None
    return out


def _specialization(callee):
    """The FUNCTION_DECL specialisation a non-dependent callee expression refers to, else None."""
    for n in walk(callee) if callee is not None else ():
        ref = n.referenced if n.kind.name == "DECL_REF_EXPR" else None
        if ref is not None and ref.kind.name == "FUNCTION_DECL" and specialized_template(ref) is not None:
            return ref
    return None


def deduce_from_types(kernel_cursor, names: list[str], args: list) -> dict[str, str]:
    """Type parameters deduced from `P *x` (or `P x`, `const P *x`) against the argument's type."""
    params = [c for c in kernel_cursor.get_children() if c.kind.name == "PARM_DECL"]
    out: dict[str, str] = {}
    for prm, arg in zip(params, args):
        a = strip(arg)
        if a is None:
            continue
        pt, at = _norm(prm.type.spelling), _norm(a.type.spelling)
        for name in names:
            m = re.fullmatch(rf"{re.escape(name)}(\**)", pt)
            if m is None or name in out:
                continue
            stars = m.group(1)
            if at.endswith(stars) and at[:len(at) - len(stars)].strip():
                base = at[:len(at) - len(stars)].strip()
                if "*" not in base or stars == "":
                    out[name] = base
    return out


_VECTOR = re.compile(r"(u?char|u?short|u?int|u?long|u?longlong|float|double|__half|half|__nv_bfloat16)[1-4]")
_TYPE_WORDS = {"int", "float", "double", "long", "unsigned", "short", "char", "bool", "signed", "void", "size_t",
               "half", "int8_t", "int16_t", "int32_t", "int64_t", "uint8_t", "uint16_t", "uint32_t", "uint64_t",
               "true", "false", "std", "__half", "__nv_bfloat16"}


def _written(project: Project, call) -> list[str] | None:
    """`f<a, b>` as written at a dependent call (None when the call names no arguments or sits in a macro)."""
    kids = list(call.get_children())
    text = project.text(kids[0]) if kids else ""
    if re.fullmatch(r"[\w:]+\s*<.*>", text.strip(), re.S):
        return _template_args(text)
    return _in_macro(project, call)


def _in_macro(project: Project, call) -> list[str] | None:
    """`f<T, n>` of a dependent call that a function-like macro of the application makes (`#define RUN(n)
    f<T, n>(x)` used as `RUN(64)`): the arguments as the invocation expands them, when it makes one call of `f`."""
    macros = getattr(project, "function_macros", {})
    text = project.text(call)
    toks = fnmacro.tokens(text)
    if not macros or not toks or toks[0] not in macros or not fnmacro.invocation(toks, macros):
        return None
    expanded = fnmacro.expand(toks, macros)
    name = (call.spelling or next((n.spelling for n in walk(call) if n.kind.name == "OVERLOADED_DECL_REF"), "")
            ).split("::")[-1]
    at = [i for i, t in enumerate(expanded or []) if t == name and i + 1 < len(expanded) and expanded[i + 1] == "<"]
    if not name or len(at) != 1:
        return None
    depth, j = 0, at[0] + 1
    for j in range(at[0] + 1, len(expanded)):
        depth += expanded[j] == "<"
        depth -= expanded[j] == ">"
        if depth == 0:
            break
    return _template_args(name + " ".join(expanded[at[0] + 1:j + 1])) if depth == 0 else None


def _derived(arg: str, project: Project) -> bool:
    """Whether every name in a substituted argument is a C++ type word, a number or one of the app's macros."""
    return all(_type_word(w) or w in project.macros for w in re.findall(r"[A-Za-z_]\w*", arg))


def _type_word(w: str) -> bool:
    return w in _TYPE_WORDS or _VECTOR.fullmatch(w) is not None


def enclosing_instantiation(project: Project, enclosing, depth: int = 0, resolver=None) \
        -> tuple[dict[str, str], str | None]:
    """The enclosing function template's parameters -> the arguments of its first instantiation the
    application calls, with a note when it calls several; else of its first explicit instantiation
    (`template void f<float>(...);`). A call from another template's body (`f<T, 4>(x)` inside `g<T>`) counts
    with `g`'s own instantiation substituted, a few levels deep."""
    names = template_params(enclosing)
    if not names:
        return {}, None
    seen: list[list[str]] = []
    dependent = []
    calls, decided = keep_reached(resolver, project.calls.get(enclosing.get_usr(), []))
    for call, caller in calls:
        if call.referenced is None:
            dependent.append((call, caller))
            continue
        args = _spelled_args(call.referenced)
        if args is not None and len(args) == len(names) and args not in seen:
            seen.append(args)
    for args in explicit_instantiations(project, enclosing.spelling) if not seen else ():
        if len(args) == len(names) and all(_derived(a, project) for a in args) and args not in seen:
            seen.append(args)
    outer = []
    for call, caller in dependent if not seen and depth < 3 else ():
        args = _written(project, call)
        if args is None:        # `run(d_a, n)` of `template <class T> void run(T *a, int n)`: C++ deduces T
            args = _deduced_at(enclosing, names, call)
        if args is None or len(args) != len(names):
            continue
        if caller.kind.name == "FUNCTION_TEMPLATE":
            mapping, said = enclosing_instantiation(project, caller, depth + 1)
            args = [substitute(a, mapping) for a in args]
            if said and said not in outer:
                outer.append(said)
        if all(_derived(a, project) for a in args) and args not in seen:
            seen.append(args)
    if not seen:
        return {}, None
    note = None
    if outer:       # `run(d_a, ..)` deduced in the body of `example<fp>`, which main instantiates
        note = (f"{enclosing.spelling}() is instantiated as "
                f"{', '.join('<' + ', '.join(s) + '>' for s in seen)} by its calls in other templates: "
                + "; ".join(outer))
    elif len(seen) > 1:
        note = (f"{enclosing.spelling}() is instantiated as "
                f"{', '.join('<' + ', '.join(s) + '>' for s in seen)}; this MEP uses <{', '.join(seen[0])}>")
    if decided:
        note = (f"{enclosing.spelling}() is instantiated as <{', '.join(seen[0])}> by the call the run reaches: "
                "the others are under conditions that are false with the values mepgen derived"
                + (f" (candidates left: {', '.join('<' + ', '.join(s) + '>' for s in seen)})" if len(seen) > 1 else ""))
    return dict(zip(names, seen[0])), note


def _deduced_at(template, names: list[str], call) -> list[str] | None:
    """The arguments C++ deduces for `template`'s parameters `names` at a dependent call that writes none, from
    the types of the call's arguments as the caller spells them (`fp *` inside the caller's own template); None
    unless every parameter is deduced."""
    kids = list(call.get_children())
    args = list(call.get_arguments()) or kids[1:]
    deduced = deduce_from_types(template, names, args)
    return [deduced[n] for n in names] if all(n in deduced for n in names) else None


_SOURCES = (".cu", ".cuh", ".cpp", ".cc", ".cxx", ".h", ".hpp", ".hh")


def explicit_instantiations(project: Project, name: str) -> list[list[str]]:
    """The arguments of `template void name<float>(...);` (explicit instantiations) in the application's sources,
    in file order. libclang gives such a declaration no cursor, so its text is read: the form is fixed by the
    language (`template` not followed by `<`, the name with its argument list, the parameter list)."""
    cache = project.__dict__.setdefault("_explicit_texts", None)
    if cache is None:
        cache = []
        for f in sorted(Path(project.app_root).rglob("*")):
            if f.suffix in _SOURCES and f.is_file() and ".mepgen" not in f.parts:
                text = f.read_text(errors="replace")
                if re.search(r"\btemplate\s+[^<\s]", text):
                    cache.append(re.sub(r"//[^\n]*|/\*.*?\*/", " ", text, flags=re.S))
        project.__dict__["_explicit_texts"] = cache
    out = []
    pattern = re.compile(rf"\btemplate\s+(?!<)[\w\s:*&]+?\b{re.escape(name)}\s*(<[^;{{}}()]*>)\s*\(")
    for text in cache:
        for m in pattern.finditer(text):
            args = _template_args(name + m.group(1))
            if args:
                out.append(args)
    return out


def substitute(text: str, mapping: dict[str, str]) -> str:
    for name, value in mapping.items():
        text = re.sub(rf"(?<![\w.:]){re.escape(name)}(?!\w)", value, text)
    return text


def site_template_args(project: Project, kernel: dict, kernel_cursor, site: dict, lc, enclosing, resolver=None) \
        -> tuple[list[str], list[str], bool]:
    """The kernel's template arguments at this launch (as many as mepgen could derive, in order), notes, and
    whether clang made them (a specialisation, whose types the extraction's closure already holds).
    Fewer arguments than the kernel has parameters means the rest could not be derived."""
    names = [tp["name"] for tp in kernel["template_params"]]
    if not names:
        return [], [], True
    notes: list[str] = []
    spec = _specialization(lc.callee)
    full = _spelled_args(spec) if spec is not None else None
    if full is not None and len(full) == len(names):
        return full, notes, True
    written = list(site.get("template_args") or [])
    deduced = deduce_from_types(kernel_cursor, names[len(written):], lc.args)
    out = written + [deduced[n] for n in names[len(written):] if n in deduced]
    if len(out) < len(names) and not written and kernel.get("instantiations"):
        out = list(kernel["instantiations"][0])
    if enclosing is not None and enclosing.kind.name == "FUNCTION_TEMPLATE":
        mapping, note = enclosing_instantiation(project, enclosing, resolver=resolver)
        if mapping:
            out = [substitute(a, mapping) for a in out]
            if note:
                notes.append(note)
    cls = class_of(enclosing)
    if cls is not None and cls.kind.name == "CLASS_TEMPLATE":     # a method of `Table<K>` called on a Table<int>
        mapping, note = class_instantiation(project, enclosing, resolver)
        if mapping:
            out = [substitute(a, mapping) for a in out]
            if note:
                notes.append(note)
    # a type still spelled with the enclosing template's own parameters is not derived
    pending = set(template_params(enclosing)) if enclosing is not None else set()
    if cls is not None and cls.kind.name == "CLASS_TEMPLATE":
        pending |= set(template_params(cls))
    kept = []
    for a in out:
        if pending and re.search(rf"\b({'|'.join(map(re.escape, pending))})\b", a):
            break
        kept.append(a)
    return kept, notes, False


def settle(args: list[str], kernel: dict, project: Project, resolver) -> tuple[list[str], str | None]:
    """Each argument as the MEP can compile it: a type word or the app's macro as is, a local constant
    (`const int THREADS = 256;` in the launching function) by its value, a type of the application only when
    the kernel's closure copies its definition. Returns the arguments up to the first that is none of these,
    and why that one is not."""
    types = {m.get("name") for m in kernel.get("closure", {}).get("types", [])} | \
            {m.get("name") for m in kernel.get("closure", {}).get("typedefs", [])}
    out = []
    for a in args:
        words = re.findall(r"[A-Za-z_]\w*", a)
        if all(_type_word(w) or w in project.macros for w in words):
            out.append(a)
            continue
        value = resolver.tokens_expr(re.findall(r"[A-Za-z_]\w*|\d\w*|\S", a))
        number = cexpr.integer(value, project.macros) if value is not None else None
        if number is not None:
            out.append(str(number))
            continue
        if all(_type_word(w) or w in types for w in words):
            out.append(a)
            continue
        return out, (f"`{a}` is neither a value mepgen can evaluate nor a type the MEP's kernel.cu defines "
                     f"(a type of the application the kernel names only through its template parameter)")
    return out, None
