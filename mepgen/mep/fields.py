"""A field of a struct that a function of the application builds: `net = make_net(n); ... net->size`.

C code passes sizes around in structs made by a create function: `Net *make_net(int n) { Net *r = malloc(..);
r->size = n; return r; }`, called with a value from the command line, and the launch reads `net->size` in
another file. The value of `p->f` is followed back through what `p` holds (a parameter: its callers' argument; a
local: what it was last assigned on the straight path to the point) to the call of the function that made it,
whose body stores the field once, unconditionally, in the object it returns (`r->f = expr;`, or the object of
another create function it returns). It is a value only when no other statement of the application's sources
assigns a field of that name; anything else is unsure, with the reason.
"""
from __future__ import annotations

from . import flow
from .objfields import _only_store, local_field
from .project import unwrap, walk
from .inputs import read_into
from .readers import Why, kind_of, stored_by
from .syntax import init_expr, operator_of
from .recursion import outer_calls

_NULLS = ("CXX_NULL_PTR_LITERAL_EXPR", "GNU_NULL_EXPR")
_DEPTH = 8


def _strip(c):
    return unwrap(c, ("CSTYLE_CAST_EXPR", "CXX_STATIC_CAST_EXPR", "CXX_REINTERPRET_CAST_EXPR"), skip_type_refs=True)


def field_value(r, member) -> str | None:
    """The value of `base->f` (a MEMBER_REF_EXPR) as the resolver `r` writes values, or None (the reason, when
    there is one to give, in r.unsure)."""
    kids = list(member.get_children())
    field = member.referenced
    if not kids or field is None or field.kind.name != "FIELD_DECL":
        return None
    return _trace(r, kids[0], field, 0)


def _trace(r, e, field, depth: int) -> str | None:
    """Follow the pointer expression `e` to the call that made its object."""
    e = _strip(e)
    if e is None or depth > _DEPTH:
        return None
    k = e.kind.name
    if k == "UNARY_OPERATOR" and operator_of(e, list(e.get_children())) == "&":    # `run(&o)`: the object o
        inner = _strip(next(iter(e.get_children()), None))
        if inner is not None and inner.kind.name == "DECL_REF_EXPR" and inner.referenced is not None \
                and inner.referenced.kind.name == "VAR_DECL":
            return local_field(r, inner.referenced, field)
        return None
    if k == "CALL_EXPR":
        return _built_by(r, e, field, depth)
    if k != "DECL_REF_EXPR" or e.referenced is None:
        return None
    d = e.referenced
    if d.kind.name == "PARM_DECL":
        for frame in reversed(r.bindings):
            if d.get_usr() in frame:
                return _trace(r, frame[d.get_usr()][0], field, depth + 1)
        index, fn = r.param_index(d)
        if fn is None:
            return None
        here = fn.location.file.name if fn.location.file is not None else None
        calls = sorted(outer_calls(fn, r.p.callers(fn))[0], key=lambda cc: (cc[1].location.file.name if cc[1].location.file
                                                        is not None else None) != here)
        for call, caller in calls:
            args = list(call.get_arguments())
            if index < len(args):
                with r.inside(caller, call.extent.start.offset):
                    value = _trace(r, args[index], field, depth + 1)
                if value is not None:
                    return value
        return None
    if d.kind.name == "VAR_DECL" and d.semantic_parent is not None \
            and d.semantic_parent.kind.name not in ("NAMESPACE", "TRANSLATION_UNIT"):
        value = local_field(r, d, field)        # `o = malloc(..); o->w = w; run(o);` in this very function
        if value is not None:
            return value
        source = _held(r, d)
        return _trace(r, source, field, depth + 1) if source is not None else None
    return None


def _held(r, d):
    """What local pointer `d` holds at the point the resolver asks about: the right-hand side of the last
    assignment of the whole pointer that certainly runs before it, else its initializer; None when it is changed
    in a way not followed (the reason in r.unsure)."""
    fn = d.semantic_parent
    fn = fn if fn.is_definition() else r.p.find_function(fn.get_usr())
    at = r._point(fn) if fn is not None else None
    if at is None:
        return None
    try:
        steps = flow.steps_before(fn, d.get_usr(), d.spelling, flow.path_to(fn, at), at, r.choices, r.where,
                                  decide=lambda cond: r._decide(fn, cond),
                                  stored=lambda call: stored_by(r.p, call, d.spelling, r.where(call)))
    except flow.Unsure as e:
        why = e.args[0]
        read = read_into(r.p, d, fn, r.where) if kind_of(why) is None else None
        r.unsure.append(Why(f"{why}; {read}", read.kind) if read is not None else why)
        return None
    if any(st.op != "=" or st.member is not None for st in steps):
        return None
    return steps[-1].rhs if steps else init_expr(d)


def _is_null(c) -> bool:
    c = _strip(c)
    if c is None:
        return True
    # an integer returned where an object is: a null pointer constant (`return NULL;`, `return 0;`)
    return c.kind.name in _NULLS or c.kind.name == "INTEGER_LITERAL"


def _built_by(r, call, field, depth: int) -> str | None:
    """The value a create function stores in field `field` of the object it returns."""
    ref = call.referenced
    fn = r.p.definition(ref)
    body = next((c for c in fn.get_children() if c.kind.name == "COMPOUND_STMT"), None) if fn is not None else None
    if body is None:
        return None
    returns = [n for n in walk(body) if n.kind.name == "RETURN_STMT"]
    values = [_strip(next(iter(n.get_children()), None)) for n in returns]
    made = [v for v in values if not _is_null(v)]          # `if (!p) return NULL;` is no object
    if len(made) != 1 or made[0].kind.name != "DECL_REF_EXPR" or made[0].referenced is None:
        return None
    ret = made[0].referenced.get_usr()
    store, source = None, None
    for st in body.get_children():
        n = _strip(st)
        if n is None or n.kind.name == "DECL_STMT":
            decl = next((x for x in n.get_children() if x.kind.name == "VAR_DECL" and x.get_usr() == ret), None) \
                if n is not None else None
            if decl is not None:
                source = init_expr(decl)
            continue
        if n.kind.name != "BINARY_OPERATOR":
            continue
        kids = list(n.get_children())
        if len(kids) != 2 or operator_of(n, kids) != "=":
            continue
        lhs = _strip(kids[0])
        if lhs.kind.name == "DECL_REF_EXPR" and lhs.referenced is not None and lhs.referenced.get_usr() == ret:
            source, store = kids[1], None          # the object is replaced: stores before it do not count
        elif lhs.kind.name == "MEMBER_REF_EXPR" and lhs.spelling == field.spelling:
            base = _strip(next(iter(lhs.get_children()), None))
            if base is not None and base.kind.name == "DECL_REF_EXPR" and base.referenced is not None \
                    and base.referenced.get_usr() == ret:
                store = n
    args = list(call.get_arguments())
    parms = [x for x in fn.get_children() if x.kind.name == "PARM_DECL"]
    r.bindings.append({p.get_usr(): (a, None) for p, a in zip(parms, args)})
    try:
        if store is not None:
            if not _only_store(r, field, store):
                return None
            rhs = list(store.get_children())[1]
            with r.inside(fn, store.extent.start.offset):
                value = r.expr(rhs)
            if value is not None:
                r.choices.append(f"`->{field.spelling}` is set by {fn.spelling}() at {r.where(store)}: "
                                 f"{r.p.text(rhs)}")
            return value
        source = _strip(source)
        if source is not None and source.kind.name == "CALL_EXPR":     # `r = make_inner(n); ... return r;`
            with r.inside(fn, source.extent.start.offset):
                return _built_by(r, source, field, depth + 1)
        return None
    finally:
        r.bindings.pop()
