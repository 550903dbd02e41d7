"""Whether a variable mepgen could not follow is built from what the application reads.

`Matrix A(n); A.fill(ai, ap); solve(A);` after `load_matrix(path, info, &ai, &ap); n = info->n;`: the object
changes through calls mepgen does not follow, so its fields have no value; but everything it is built from comes
from the file `load_matrix` reads, and its todo should say so (kind `file`), not that mepgen merely failed. The
variables that flow into it inside its function are collected (initializer, constructor arguments, right-hand
sides of its assignments, arguments of the calls that change it or of its own methods), transitively, and the
first one a reader fills through its address or a pointer (`read(fd, &n, 4)`, `load_matrix(path, info, ...)`)
gives the reason. A size passed by value to a reader (`fread(buf, 4, n, f)`) is no value read.
"""
from __future__ import annotations

from .project import walk
from .readers import Why, reader_call
from .syntax import operator_of

_MAX_VARS = 40


def _usrs(node) -> dict:
    """usr -> declaration of the local variables and parameters a node names."""
    return {n.referenced.get_usr(): n.referenced for n in walk(node) if n.kind.name == "DECL_REF_EXPR"
            and n.referenced is not None and n.referenced.kind.name in ("VAR_DECL", "PARM_DECL")
            and n.referenced.semantic_parent is not None
            and n.referenced.semantic_parent.kind.name not in ("NAMESPACE", "TRANSLATION_UNIT")}


def _addressed(arg) -> set[str]:
    """The variables a call argument gives the callee a way to write: `&v`, or `v` of pointer, array or
    reference type."""
    out = set()
    amp = any(n.kind.name == "UNARY_OPERATOR" and [x.spelling for x in n.get_tokens()][:1] == ["&"]
              for n in walk(arg))
    for usr, d in _usrs(arg).items():
        if amp or d.type.get_canonical().kind.name in ("POINTER", "CONSTANTARRAY", "INCOMPLETEARRAY",
                                                       "LVALUEREFERENCE"):
            out.add(usr)
    return out


class _Flows:
    """One walk of a function: what flows into each of its variables."""

    def __init__(self, fn):
        self.feeds: dict[str, dict] = {}          # usr -> {usr: decl} of what its declaration/assignments use
        self.calls: list[tuple] = []              # (call, [usrs of each argument], addressed usrs, method-of usrs)
        for n in walk(fn):
            k = n.kind.name
            if k == "VAR_DECL":
                for c in n.get_children():
                    self.feeds.setdefault(n.get_usr(), {}).update(_usrs(c))
            elif k in ("BINARY_OPERATOR", "COMPOUND_ASSIGNMENT_OPERATOR"):
                kids = list(n.get_children())
                if len(kids) == 2 and (k == "COMPOUND_ASSIGNMENT_OPERATOR" or operator_of(n, kids) == "="):
                    rhs = _usrs(kids[1])
                    for usr in _usrs(kids[0]):
                        self.feeds.setdefault(usr, {}).update(rhs)
            elif k == "CALL_EXPR":
                args = list(n.get_arguments())
                kids = list(n.get_children())
                method = set(_usrs(kids[0])) if kids and kids[0].kind.name == "MEMBER_REF_EXPR" else set()
                self.calls.append((n, [_usrs(a) for a in args], set().union(*map(_addressed, args)) if args
                                   else set(), method))


def read_into(project, d, fn, where) -> Why | None:
    """Why local `d` of function `fn` holds a value of the application's input: the reader that fills one of the
    variables it is built from; None when none does (or it cannot be told). Cached per variable."""
    if fn is None:
        return None
    cache = project.__dict__.setdefault("_read_into", {})
    key = (d.get_usr(), fn.get_usr())
    if key in cache:
        return cache[key]
    flows_by_fn = project.__dict__.setdefault("_flows", {})
    fkey = (fn.get_usr(), fn.location.file.name if fn.location.file else "", fn.extent.start.offset)
    if fkey not in flows_by_fn:
        flows_by_fn[fkey] = _Flows(fn)
    flows = flows_by_fn[fkey]
    cache[key] = None
    todo, seen = [d], set()
    while todo and len(seen) < _MAX_VARS:
        v = todo.pop(0)
        usr = v.get_usr()
        if usr in seen:
            continue
        seen.add(usr)
        feeds = dict(flows.feeds.get(usr, {}))
        for call, arg_usrs, addressed, method in flows.calls:
            if usr in addressed:
                read = reader_call(project, call)
                if read is not None:
                    what = f"`{d.spelling}` is" if usr == d.get_usr() else \
                        f"`{d.spelling}` is built from `{v.spelling}`, which is"
                    cache[key] = Why(f"{what} filled by {read} at {where(call)}, which reads the application's "
                                     "input", "file")
                    return cache[key]
                for a in arg_usrs:                      # the call may store the other arguments into it
                    feeds.update(a)
            elif usr in method:                         # `A.fill(ai, ap)`
                for a in arg_usrs:
                    feeds.update(a)
        todo += [x for u, x in feeds.items() if u not in seen]
    return None
