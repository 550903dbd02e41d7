"""What a host loop changes from one round to the next: the names a launch inside it may read differently each round.

A variable declared outside the loop changes when the loop writes it in any way: assigns, increments, updates in
place, writes a member or an element of it, hands its address or a non-const reference to a call, binds a non-const
reference to it, calls a non-const method on it, or calls a lambda whose body writes it. The order of a round's
statements is not looked at, so `b = 32` before each launch counts.

A variable declared in the loop's body is made anew each round, so it carries nothing from the last round: it
changes only where its value in a round depends on what does. That is where its initializer or a write to it reads a
changing name, calls a function that may give a different answer each time, or sits under a condition (an `if`, a
`switch`, an inner loop's header, `?:`) that reads one and that its declaration is not under too (a variable declared
in a branch lives only while the branch runs). `static` locals keep their value and count as declared
outside. A loop's own header variables (`for (int b = 32; ...; b *= 2)`, `for (int b : sizes)`) are not made
anew each round. Not followed: a write that a `break`, `continue` or `goto` skips on a changing condition, and a
write through a pointer taken outside the loop.
"""
from __future__ import annotations

# calls whose answer depends only on their arguments
_PURE_NAMES = {"min", "max", "fmin", "fminf", "fmax", "fmaxf", "abs", "fabs", "fabsf", "ceil", "ceilf", "floor",
               "floorf", "sqrt", "sqrtf", "pow", "powf", "clamp", "log2", "log2f", "exp2", "exp2f", "round", "roundf"}
_CONTROL = ("IF_STMT", "SWITCH_STMT", "WHILE_STMT", "DO_STMT", "FOR_STMT", "CXX_FOR_RANGE_STMT",
            "CONDITIONAL_OPERATOR")


def loop_changes(loop) -> set[str]:
    """The names `loop` may change from one round to the next (see the module's docstring)."""
    kids = list(loop.get_children())
    if not kids:
        return set()
    body = kids[0] if loop.kind.name == "DO_STMT" else kids[-1]
    facts = _Facts()
    for k in kids:
        if k is not body:           # the header: its variables live across the rounds
            facts.walk(k, (), fresh_scope=False)
            if loop.kind.name == "CXX_FOR_RANGE_STMT" and k.kind.name == "VAR_DECL":
                facts.unknown.add(k.spelling)       # `for (int b : sizes)`: the next element each round
    facts.walk(body, (), fresh_scope=True)
    changing = {n for n in facts.written if n not in facts.fresh} | {n for n in facts.unknown}
    grew = True
    while grew:
        grew = False
        for name in facts.fresh:
            if name not in changing and (facts.sources.get(name, set()) - {name}) & changing:
                changing.add(name)
                grew = True
    return changing


class _Facts:
    def __init__(self):
        self.fresh: set[str] = set()        # declared in the body, made anew each round
        self.written: set[str] = set()      # written anywhere in the loop
        self.unknown: set[str] = set()      # written from what cannot be followed: changing
        self.sources: dict[str, set[str]] = {}
        self.decl_frames: dict[str, tuple] = {}  # a fresh variable -> the conditions its declaration sits under
        self.lambdas: set[int] = set()          # the bodies of lambdas called in the loop, walked once each

    def _record(self, name: str, reads: set[str], conds: tuple, opaque: bool) -> None:
        """A write of `name` reading `reads`, under the conditions `conds` (frames: (id, names read, opaque)); of
        those, only the ones the variable's declaration is not under decide its value (a variable declared in a
        branch lives only when the branch runs)."""
        self.written.add(name)
        outer = [f for f in conds if f[0] not in self.decl_frames.get(name, ())]
        self.sources.setdefault(name, set()).update(reads, *(f[1] for f in outer))
        if opaque or any(f[2] for f in outer):
            self.unknown.add(name)

    def walk(self, node, conds: tuple, fresh_scope: bool) -> None:
        k = node.kind.name
        if k == "VAR_DECL":
            if node.type.kind.name == "LVALUEREFERENCE" and not node.type.get_pointee().is_const_qualified():
                for name in _reads(node):       # `int& n = b;`: what the reference names may change through it
                    self._record(name, set(), conds, True)
            if fresh_scope and not _is_static(node):
                self.fresh.add(node.spelling)
                self.decl_frames[node.spelling] = tuple(f[0] for f in conds)
                init = [c for c in node.get_children() if c.kind.name not in ("TYPE_REF", "NAMESPACE_REF",
                                                                                 "TEMPLATE_REF")]
                reads = set().union(*(_reads(c) for c in init)) if init else set()
                self.sources.setdefault(node.spelling, set()).update(reads)
                if any(_opaque_calls(c) for c in init):
                    self.unknown.add(node.spelling)
        elif k in ("BINARY_OPERATOR", "COMPOUND_ASSIGNMENT_OPERATOR", "UNARY_OPERATOR"):
            kids = list(node.get_children())
            target = _written(kids[0] if kids else None)
            if target is not None:
                toks = [t.spelling for t in node.get_tokens()]
                if k == "UNARY_OPERATOR":
                    if toks[:1] == ["&"]:            # its address handed on (`read_block(&t)`): anything may land
                        self._record(target, set(), conds, True)
                    elif {"++", "--"} & set(toks):
                        self._record(target, _reads(node), conds, False)
                elif k == "COMPOUND_ASSIGNMENT_OPERATOR" or _assigns(toks, kids):
                    self._record(target, _reads(node), conds, _opaque_calls(node))
        elif k == "CALL_EXPR":
            self._call_writes(node, conds)
        if k in _CONTROL:
            header, rest = _split_control(node)
            frame = (node.hash, frozenset().union(*(_reads(h) for h in header)),
                     any(_opaque_calls(h) for h in header))
            for h in header:
                self.walk(h, conds, fresh_scope and k != "CXX_FOR_RANGE_STMT")
            for r in rest:
                self.walk(r, (*conds, frame), fresh_scope)
            return
        for c in node.get_children():
            self.walk(c, conds, fresh_scope)

    def _call_writes(self, call, conds: tuple) -> None:
        """`t.grow()` (a non-const method) and `f(t)` where f takes a non-const reference may change `t`."""
        kids = list(call.get_children())
        callee = call.referenced
        if kids and kids[0].kind.name == "MEMBER_REF_EXPR" and callee is not None \
                and callee.kind.name == "CXX_METHOD" and not callee.is_const_method():
            obj = list(kids[0].get_children())
            target = _written(obj[0] if obj else None)
            if target is not None:
                self._record(target, set(), conds, True)
        if callee is not None and callee.spelling == "operator()" and callee.semantic_parent is not None \
                and callee.semantic_parent.spelling.startswith("(lambda at "):
            body = callee.get_definition()      # a lambda called in the loop: what its body writes, captured
            if body is not None and body.hash not in self.lambdas:   # by reference, the loop writes
                self.lambdas.add(body.hash)
                self.walk(body, conds, False)
            return
        if callee is None or callee.kind.name not in ("FUNCTION_DECL", "CXX_METHOD", "FUNCTION_TEMPLATE"):
            return
        params = [p.type for p in callee.get_arguments()] if callee.kind.name != "FUNCTION_TEMPLATE" else []
        for arg, ptype in zip(call.get_arguments(), params):
            if ptype.kind.name == "LVALUEREFERENCE" and not ptype.get_pointee().is_const_qualified():
                target = _written(arg)
                if target is not None:
                    self._record(target, set(), conds, True)


def _is_static(decl) -> bool:
    return decl.storage_class is not None and decl.storage_class.name == "STATIC"


def _reads(node) -> set[str]:
    return {c.spelling for c in node.walk_preorder() if c.kind.name == "DECL_REF_EXPR"}


def _opaque_calls(node) -> bool:
    """Whether `node` calls something whose answer may change from call to call (not a constructor, a conversion,
    a math function or a constexpr function)."""
    for c in node.walk_preorder():
        if c.kind.name != "CALL_EXPR":
            continue
        ref = c.referenced
        if ref is None:
            if c.spelling:                  # a dependent call nothing resolves
                return True
            continue                        # a functional cast or an implicit construction
        if ref.kind.name in ("CONSTRUCTOR", "CONVERSION_FUNCTION"):
            continue
        if ref.spelling in _PURE_NAMES or _constexpr(ref):
            continue
        return True
    return False


def _constexpr(fn) -> bool:
    d = fn.get_definition() or fn
    for t in d.get_tokens():
        if t.spelling == "constexpr":
            return True
        if t.spelling in ("{", "(", fn.spelling):
            return False
    return False


def _split_control(node):
    """A control statement's header (what decides which way it goes and how often) and its branches or body."""
    kids = list(node.get_children())
    k = node.kind.name
    if k == "CONDITIONAL_OPERATOR":
        return kids[:1], kids[1:]
    if k == "DO_STMT":
        return kids[-1:], kids[:-1]
    if k in ("FOR_STMT", "WHILE_STMT", "CXX_FOR_RANGE_STMT"):
        return kids[:-1], kids[-1:]
    # if / switch: what lies inside the parentheses after the keyword
    close = _closing_paren(node)
    if close is None:
        return kids, []             # unknown layout: everything is header, the conservative side
    header = [c for c in kids if c.extent.end.offset <= close]
    return header, [c for c in kids if c.extent.end.offset > close]


def _closing_paren(node) -> int | None:
    depth = 0
    for t in node.get_tokens():
        if t.spelling == "(":
            depth += 1
        elif t.spelling == ")":
            depth -= 1
            if depth == 0:
                return t.extent.end.offset
    return None


def _written(target) -> str | None:
    """The variable an assignment writes: itself, or the one whose member or element it writes (`p.x`, `s[i]`)."""
    while target is not None and target.kind.name in ("UNEXPOSED_EXPR", "PAREN_EXPR", "MEMBER_REF_EXPR",
                                                      "ARRAY_SUBSCRIPT_EXPR"):
        inner = list(target.get_children())
        target = inner[0] if inner else None
    return target.spelling if target is not None and target.kind.name == "DECL_REF_EXPR" else None


def _assigns(toks: list[str], kids) -> bool:
    """Whether a binary operator is `=` (read between its operands)."""
    left = len(list(kids[0].get_tokens())) if kids else 0
    return left < len(toks) and toks[left] == "="
