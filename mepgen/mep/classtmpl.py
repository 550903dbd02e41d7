"""Objects whose methods launch: `Table<int> t(4096); t.put(in, 100);` with `put` launching over `capacity`.

A class (often a class template) keeps its sizes in members its constructor sets, and its methods launch kernels
over them. The launch sits in the method; the values come from the object the method is called on:
- a member read in the method (`capacity`, `this->capacity`) is the value the constructor stores in it (an
  assignment in its body or its member initializer list), with the constructor's parameters bound to the
  arguments of the object's declaration (`Table<int> t(4096)`, `new Table<int>(4096)`), when that constructor is
  the only code of the application that assigns the member; the object is the one of the method's first call from
  another function (a stated choice in mep.yaml's notes);
- the class template's parameters (`K` in `wipe<K><<<..>>>`) are the arguments of the class the called method
  belongs to (`Table<int>`), as the calls of the method instantiate it.
Anything else is not a value here; the todo says why.
"""
from __future__ import annotations

from .project import unwrap, walk
from .syntax import operator_of, template_params
from .members import member_writes
from .recursion import outer_calls
from .reach import keep_reached
from ..parsing.clang import specialized_template

_CTORS = ("CONSTRUCTOR",)


def _strip(c):
    return unwrap(c, ("CSTYLE_CAST_EXPR",))


def class_of(method):
    """The class (template) a method belongs to, or None for a free function."""
    parent = method.semantic_parent if method is not None else None
    return parent if parent is not None and parent.kind.name in ("CLASS_TEMPLATE", "CLASS_DECL", "STRUCT_DECL") \
        else None


def _object_of(call):
    """The variable a method call is made on (`t.put(..)`, `t->put(..)`), else None."""
    head = next(iter(call.get_children()), None)
    head = _strip(head)
    if head is None or head.kind.name != "MEMBER_REF_EXPR":
        return None
    base = _strip(next(iter(head.get_children()), None))
    if base is not None and base.kind.name == "DECL_REF_EXPR" and base.referenced is not None \
            and base.referenced.kind.name == "VAR_DECL":
        return base.referenced
    return None


def _construction(obj):
    """The constructor call that makes variable `obj` (`Table<int> t(4096)` or `= new Table<int>(4096)`)."""
    for n in walk(obj):
        if n.kind.name == "CALL_EXPR" and n.referenced is not None and n.referenced.kind.name in _CTORS:
            return n
    return None


def _stores(ctor, field) -> list:
    """The expressions constructor `ctor` gives member `field`: its initializer-list entry, assignments in its body."""
    out = []
    kids = list(ctor.get_children())
    for i, k in enumerate(kids):
        if k.kind.name == "MEMBER_REF" and k.referenced is not None and k.referenced.get_usr() == field.get_usr() \
                and i + 1 < len(kids):
            init = kids[i + 1]
            inner = list(init.get_children()) if init.kind.name in ("PAREN_LIST_EXPR", "INIT_LIST_EXPR") else [init]
            if len(inner) == 1:
                out.append((k, inner[0]))
    for n in walk(ctor):
        if n.kind.name != "BINARY_OPERATOR":
            continue
        ch = list(n.get_children())
        if len(ch) != 2 or operator_of(n, ch) != "=":
            continue
        lhs = _strip(ch[0])
        if lhs is None or not _names(lhs, field):
            continue
        base = _strip(next(iter(lhs.get_children()), None))
        if base is None or base.kind.name == "CXX_THIS_EXPR":
            out.append((n, ch[1]))
    return out


def _names(lhs, field) -> bool:
    """Whether `lhs` is the member `field`: resolved, or `this->field` in a template's body, which libclang leaves
    unresolved (its `this` depends on the template's parameters)."""
    if lhs.kind.name != "MEMBER_REF_EXPR":
        return False
    if lhs.referenced is not None:
        return lhs.referenced.get_usr() == field.get_usr()
    base = _strip(next(iter(lhs.get_children()), None))
    if base is None or base.kind.name != "CXX_THIS_EXPR":
        return False
    words = [t.spelling for t in lhs.get_tokens()]
    return (lhs.spelling or (words[-1] if words else "")) == field.spelling


def _class_writes(project, cls, field) -> list:
    """The changes of member `field` anywhere in the application (mep/members.py's), and those its class's own
    methods make through an unresolved `this->field`."""
    out = list(member_writes(project).get(field.get_usr(), []))
    for fn in project.functions.values():
        if fn.semantic_parent is None or fn.semantic_parent.get_usr() != cls.get_usr():
            continue
        for n in walk(fn):
            if n.kind.name not in ("BINARY_OPERATOR", "COMPOUND_ASSIGNMENT_OPERATOR", "UNARY_OPERATOR"):
                continue
            ch = list(n.get_children())
            lhs = _strip(ch[0]) if ch else None
            if lhs is not None and lhs.referenced is None and _names(lhs, field) and n not in out and (
                    n.kind.name == "COMPOUND_ASSIGNMENT_OPERATOR" or operator_of(n, ch) in ("=", "++", "--")):
                out.append(n)
    return out


def member_value(r, member, method) -> str | None:
    """The value of member `member` (a MEMBER_REF_EXPR on the implicit or explicit `this`) read in `method`, as
    resolver `r` writes values, or None."""
    field = member.referenced
    cls = class_of(method)
    if field is None or cls is None:
        return None
    writes = _class_writes(r.p, cls, field)
    if method.kind.name in _CTORS:      # read in the constructor itself (`cudaMalloc(&slots, capacity * ..)`)
        stores = _stores(method, field)
        if len(stores) != 1 or any(not _inside(w, method) for w in writes) or len(writes) > 1:
            return None
        node, rhs = stores[0]
        with r.inside(method, node.extent.start.offset):
            value = r.expr(rhs)         # its parameters: the arguments where the object is made
        if value is not None:
            r.choices.append(f"`{field.spelling}` is set by the constructor of {cls.spelling} at {r.where(node)}: "
                             f"{r.p.text(rhs)}")
        return value
    calls, _ = outer_calls(method, r.p.callers(method))
    for call, caller in calls:
        obj = _object_of(call)
        made = _construction(obj) if obj is not None else None
        ref = made.referenced if made is not None else None
        tmpl = None
        if ref is not None:
            tmpl = specialized_template(ref)
        base = tmpl or ref
        ctor = None if base is None else base if base.is_definition() else r.p.find_function(base.get_usr())
        if ctor is None:
            continue
        stores = _stores(ctor, field)
        if len(stores) != 1 or any(not _inside(w, ctor) for w in writes) or len(writes) > 1:
            return None
        node, rhs = stores[0]
        parms = [x for x in ctor.get_children() if x.kind.name == "PARM_DECL"]
        r.bindings.append({p.get_usr(): (a, None) for p, a in zip(parms, made.get_arguments())})
        try:
            with r.inside(caller, call.extent.start.offset), r.inside(ctor, node.extent.start.offset):
                value = r.expr(rhs)
        finally:
            r.bindings.pop()
        if value is not None:
            r.choices.append(f"`{field.spelling}` is set by the constructor of {cls.spelling} at {r.where(node)} for "
                             f"the object `{obj.spelling}` that {method.spelling}() is called on at {r.where(call)}: "
                             f"{r.p.text(rhs)}")
        return value
    return None


def _inside(node, fn) -> bool:
    f, g = node.extent.start.file, fn.extent.start.file
    return f is not None and g is not None and f.name == g.name and \
        fn.extent.start.offset <= node.extent.start.offset < fn.extent.end.offset


def class_instantiation(project, method, resolver=None) -> tuple[dict[str, str], str | None]:
    """The class template's parameters -> the arguments of the class of the method's first call (`t.put(..)` on a
    `Table<int>`: {K: int}), with a note when calls instantiate several; ({}, None) when none is known."""
    cls = class_of(method)
    if cls is None or cls.kind.name != "CLASS_TEMPLATE":
        return {}, None
    names = template_params(cls)
    seen: list[list[str]] = []
    calls, _ = keep_reached(resolver, project.calls.get(method.get_usr(), []))
    for call, _ in calls:
        ref = call.referenced
        spec = ref.semantic_parent if ref is not None else None
        if spec is None or spec.get_usr() == cls.get_usr():
            continue
        t = spec.type
        try:
            n = t.get_num_template_arguments()
            args = [t.get_template_argument_type(i).get_canonical().spelling for i in range(n)]
        except Exception:  # an older binding
            continue
        if len(args) == len(names) and all(args) and "" not in args and args not in seen:
            seen.append(args)
    if not seen:
        return {}, None
    note = None
    if len(seen) > 1:
        note = (f"{cls.spelling} is instantiated as {', '.join('<' + ', '.join(s) + '>' for s in seen)}; this MEP "
                f"uses <{', '.join(seen[0])}>")
    return dict(zip(names, seen[0])), note
