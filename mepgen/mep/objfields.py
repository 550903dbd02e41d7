"""A field of an object the calling function fills in itself before it passes the object on.

C code keeps options in a struct: `struct opts *o = malloc(sizeof *o); o->width = width; run(o);` (or a struct on
the stack: `struct opts o; o.width = width; run(&o);`), and the launch, deeper down, reads `o->width`. The value of
that field is the right-hand side of the store, when
- the store assigns the whole field of that very local (`o->width = ...` or `o.width = ...`),
- it certainly runs before the point the value is wanted at (it is not under a branch or in a loop that does not
  also hold that point),
- the local is not made to point elsewhere between the store and the point, and
- no other statement of the application's sources assigns a field of that name (mep/fields.py's rule).
Anything else is not a value here (the caller goes on with its other ways, or a todo says why).
"""
from __future__ import annotations

from . import flow
from .project import walk
from .syntax import operator_of

_PLAIN = ("COMPOUND_STMT", "EXPR_STMT", "UNEXPOSED_STMT")


_strip = flow._strip       # an expression without its implicit casts and parentheses


def _stores(fn, var_usr: str, field_usr: str) -> list:
    """(assignment, rhs) of every `var->field = rhs` / `var.field = rhs` in `fn`, in source order."""
    out = []
    for n in walk(fn):
        if n.kind.name != "BINARY_OPERATOR":
            continue
        kids = list(n.get_children())
        if len(kids) != 2 or operator_of(n, kids) != "=":
            continue
        lhs = _strip(kids[0])
        if lhs is None or lhs.kind.name != "MEMBER_REF_EXPR" or lhs.referenced is None \
                or lhs.referenced.get_usr() != field_usr:
            continue
        base = _strip(next(iter(lhs.get_children()), None))
        if base is not None and base.kind.name == "DECL_REF_EXPR" and base.referenced is not None \
                and base.referenced.get_usr() == var_usr:
            out.append((n, kids[1]))
    return sorted(out, key=lambda s: s[0].extent.start.offset)


def _certain(fn, node, at: int) -> bool:
    """Whether statement `node` of `fn` runs whenever the point at offset `at` is reached, before it."""
    if node.extent.end.offset > at:
        return False
    target = flow.path_to(fn, at)
    own = flow.path_to(fn, node.extent.start.offset)
    if node not in own:
        return False
    own = own[:own.index(node)]          # the store's ancestors (path_to goes on into its left-hand side)
    common = 0
    while common < len(own) and common < len(target) and own[common] == target[common]:
        common += 1
    # below the innermost block it shares with the point: only plain statements (no branch, loop, `?:`, lambda)
    return all(x.kind.name in _PLAIN + ("PAREN_EXPR",) for x in own[common:])


def local_field(r, var, field):
    """The value of `var->field` (or `var.field`) at the point the resolver `r` asks about in the function that
    declares local `var`, as r writes values; None when that function does not store it as said above."""
    fn = var.semantic_parent
    if fn is None:
        return None
    fn = fn if fn.is_definition() else r.p.find_function(fn.get_usr())
    at = r._point(fn) if fn is not None else None
    if at is None:
        return None
    before = [(n, rhs) for n, rhs in _stores(fn, var.get_usr(), field.get_usr())
              if n.extent.start.offset < at]
    if not before:
        return None
    store, rhs = before[-1]
    if not _certain(fn, store, at):
        return None
    moved = [m for m in flow.modifications(fn, var.get_usr())
             if m.member is None and store.extent.end.offset <= m.node.extent.start.offset < at]
    if moved or not _only_store(r, field, store):
        return None
    with r.inside(fn, store.extent.start.offset):
        value = r.expr(rhs)
    if value is not None:
        shown = r.p.text(list(store.get_children())[0])
        r.choices.append(f"`{shown}` is set by {fn.spelling}() at {r.where(store)} before "
                         f"the object is passed on: {r.p.text(rhs)}")
    return value


def _only_store(r, field, store) -> bool:
    """Whether `store` is the only assignment of a field named like `field` in the application's sources (the
    plain C/C++ sources that spell the name are read first); else the reason goes to r.unsure."""
    r.p.read_host_files(field.spelling, writes=True)
    writes = _field_writes(r.p).get(field.spelling, [])
    others = [w for w in writes if w != store]
    if others:
        r.unsure.append(f"`->{field.spelling}` is set by {r.where(store)} and also at {r.where(others[0])}"
                        f"{f' and {len(others) - 1} more place(s)' if len(others) > 1 else ''}: mepgen does not "
                        "know which holds at the launch")
        return False
    return True


def _field_writes(project) -> dict[str, list]:
    """field name -> every assignment, compound assignment, `++`/`--` or address-of of a field of that name in the
    application's functions (one walk per project; dropped when more sources are read)."""
    cache = project.__dict__.get("_field_writes")
    if cache is not None:
        return cache
    out: dict[str, list] = {}
    for fn in project.functions.values():
        for n in walk(fn):
            if n.kind.name not in ("BINARY_OPERATOR", "COMPOUND_ASSIGNMENT_OPERATOR", "UNARY_OPERATOR"):
                continue
            kids = list(n.get_children())
            lhs = _strip(kids[0]) if kids else None
            if lhs is None or lhs.kind.name != "MEMBER_REF_EXPR":
                continue
            op = operator_of(n, kids)
            if n.kind.name == "COMPOUND_ASSIGNMENT_OPERATOR" or op in ("=", "++", "--", "&"):
                out.setdefault(lhs.spelling, []).append(n)
    project.__dict__["_field_writes"] = out
    return out
