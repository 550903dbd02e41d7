"""Every change of a host variable inside a function (assignments, compound operators, `++`, its address passed
on), computed once per function of a parsed unit: the facts that flow.py orders into the value at a launch and
that the command-line readers (cstrings.py) search for `optarg`."""
from __future__ import annotations

from dataclasses import dataclass, field

from .project import unwrap
from .readers import stream_target
from .syntax import operator_of

LOOPS = ("FOR_STMT", "WHILE_STMT", "DO_STMT", "CXX_FOR_RANGE_STMT")
BRANCHES = ("IF_STMT", "SWITCH_STMT", "CONDITIONAL_OPERATOR", "CASE_STMT", "DEFAULT_STMT", "LAMBDA_EXPR",
            "CXX_TRY_STMT", "CXX_CATCH_STMT")
_ASSIGN = ("BINARY_OPERATOR", "COMPOUND_ASSIGNMENT_OPERATOR", "UNARY_OPERATOR", "CALL_EXPR")


@dataclass
class Mod:
    """One change of the variable: `op` is `=`, a compound operator (`*=`), `++`/`--`, or `?` (address taken,
    passed by reference: not followable); `member` is the field assigned (`x` of `grid.x = ...`) or None."""
    node: object
    op: str
    member: str | None
    rhs: object | None
    path: list = field(default_factory=list)     # ancestors, function body first, the node's parent last
    call: object | None = None                   # op `&arg`: the call that gets the variable's address
    index: int = -1                              # ... as its argument number `index`


class Unsure(Exception):
    """The value at the launch depends on control flow mepgen does not decide; the message says why."""


def _strip(c):
    return unwrap(c)


def _target(c) -> tuple[str | None, str | None]:
    """(usr, field) of the variable `c` names (`v`) or whose field it names (`v.x`); (None, None) otherwise."""
    c = _strip(c)
    if c is None:
        return None, None
    if c.kind.name == "DECL_REF_EXPR" and c.referenced is not None and c.referenced.kind.name in ("VAR_DECL",
                                                                                                "PARM_DECL"):
        return c.referenced.get_usr(), None
    if c.kind.name == "MEMBER_REF_EXPR":
        kids = list(c.get_children())
        base = _strip(kids[0]) if kids else None
        if base is not None and base.kind.name == "DECL_REF_EXPR" and base.referenced is not None \
                and base.referenced.kind.name in ("VAR_DECL", "PARM_DECL") \
                and not any(t.spelling == "->" for t in c.get_tokens()):
            return base.referenced.get_usr(), c.spelling
    return None, None


def _operator(node, kids) -> str:
    if node.kind.name == "CALL_EXPR":
        return "=" if node.spelling == "operator=" else node.spelling.replace("operator", "")
    return operator_of(node, kids)


def modifications(fn, usr: str) -> list[Mod]:
    """Every change of variable `usr` inside function `fn`, with its path of ancestors, in source order."""
    return all_modifications(fn).get(usr, [])


def all_modifications(fn) -> dict[str, list[Mod]]:
    """Every change of every variable inside `fn` (usr -> changes in source order): one walk per function."""
    tu = fn.translation_unit
    cache = tu.__dict__.setdefault("_mepgen_modifications", {})     # lives as long as the parsed unit
    key = (fn.location.file.name if fn.location.file else "", fn.extent.start.offset, fn.extent.end.offset)
    if key in cache:
        return cache[key]
    out: dict[str, list[Mod]] = {}

    def add(usr, mod):
        out.setdefault(usr, []).append(mod)

    def visit(node, path):
        k = node.kind.name
        kids = list(node.get_children())
        if k in _ASSIGN and kids:
            if k == "CALL_EXPR":   # an overloaded operator: [lhs, the operator, rhs]
                args = [kids[0], kids[2]] if node.spelling.startswith("operator") and len(kids) == 3 else []
            else:
                args = kids
            read = stream_target(node) if k in ("CALL_EXPR", "BINARY_OPERATOR") else None
            if read is not None:
                usr, _ = _target(read)            # `in >> n`: n is read from a stream
                if usr is not None:
                    add(usr, Mod(node, "?", None, None, list(path)))
            if args:
                usr, member = _target(args[0])
                if usr is not None:
                    op = _operator(node, kids)
                    if k == "UNARY_OPERATOR" and op == "&":
                        call, index = _call_argument(node, path)
                        add(usr, Mod(node, "&arg", None, None, list(path), call, index) if call is not None
                            and member is None else Mod(node, "?", None, None, list(path)))
                    elif k == "UNARY_OPERATOR" and op in ("++", "--"):
                        add(usr, Mod(node, op, member, None, list(path)))
                    elif k in ("BINARY_OPERATOR", "COMPOUND_ASSIGNMENT_OPERATOR", "CALL_EXPR") and op.endswith("=") \
                            and op not in ("==", "!=", "<=", ">="):
                        add(usr, Mod(node, op, member, args[-1] if len(args) > 1 else None, list(path)))
        if k == "CALL_EXPR" and node.referenced is not None and not node.spelling.startswith("operator"):
            parms = [p for p in node.referenced.get_children() if p.kind.name == "PARM_DECL"]
            for i, a in enumerate(node.get_arguments()):
                usr, _ = _target(a)
                ptype = parms[i].type if i < len(parms) else None
                if usr is not None and ptype is not None and ptype.kind.name == "LVALUEREFERENCE" \
                        and not ptype.get_pointee().is_const_qualified():
                    add(usr, Mod(node, "?", None, None, list(path)))
        path.append(node)
        for c in kids:
            visit(c, path)
        path.pop()

    visit(fn, [])
    for mods in out.values():
        mods.sort(key=lambda m: m.node.extent.start.offset)
    cache[key] = out
    return out


def _call_argument(node, path) -> tuple[object | None, int]:
    """(call, argument index) when `node` is an argument of a call to a function of the application (through
    casts only: `init(&dt)`, `setup((void*)&p)`), else (None, -1)."""
    child = node
    for parent in reversed(path):
        if parent.kind.name == "CALL_EXPR":
            if parent.referenced is None or parent.spelling.startswith("operator"):
                return None, -1
            for i, a in enumerate(parent.get_arguments()):
                if a == child:
                    return parent, i
            return None, -1
        if parent.kind.name not in ("UNEXPOSED_EXPR", "CSTYLE_CAST_EXPR", "PAREN_EXPR"):
            return None, -1
        child = parent
    return None, -1


def _contains(node, offset: int) -> bool:
    return node.extent.start.offset <= offset < node.extent.end.offset


def _for_parts(loop) -> tuple[object | None, object | None]:
    """(init, body) of a for statement (libclang leaves out the parts a loop does not write)."""
    kids = list(loop.get_children())
    toks = [t.spelling for t in loop.get_tokens()]
    has_init = len(toks) > 2 and toks[2] != ";"
    return (kids[0] if has_init and len(kids) > 1 else None), (kids[-1] if kids else None)


def _mentions(node, word: str) -> bool:
    """Whether the node's own tokens hold `word` (a node inside a macro expansion has none of its own)."""
    if node is None or node.extent.end.offset <= node.extent.start.offset:
        return False
    lo, hi = node.extent.start.offset, node.extent.end.offset
    return any(t.spelling == word and lo <= t.extent.start.offset and t.extent.end.offset <= hi
               for t in node.get_tokens())


def _walk(c):
    yield c
    for k in c.get_children():
        yield from _walk(k)
