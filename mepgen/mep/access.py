"""How a kernel uses its pointer parameters: reads, writes, atomics, index expressions and their bounds.

This is what the roles (`in`/`out`/`inout`) and the element counts of mep.yaml come from: a pointer
written through is an output, one accumulated into with atomics starts from zeros, `y[row]` under
`if (row < nrows)` has `nrows` elements, `row_ptr[row + 1]` one more, and an array indexed with the values
of another (`x[col_idx[k]]`) makes the other an index array whose values must stay inside the first.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from .project import walk
from .syntax import init_expr, operator_of, strip

_BOUND = re.compile(r"^\(?\s*([A-Za-z_]\w*)\s*(<=|<)\s*(.+?)\s*\)?$")
_BOUND_REV = re.compile(r"^\(?\s*(.+?)\s*(>=|>)\s*([A-Za-z_]\w*)\s*\)?$")
_RETURN = re.compile(r"^\(?\s*([A-Za-z_]\w*)\s*(>=|>)\s*(.+?)\s*\)?$")
_THREAD = re.compile(r"\b(threadIdx|blockIdx|blockDim|gridDim)\b")


@dataclass
class Guard:
    text: str
    branch: str          # then | else | loop | return (the code after `if (cond) return;`)


@dataclass
class Access:
    kind: str            # read | write | rmw | atomic | call_read | call_write | alias
    index: str | None    # index expression as written (None: the pointer itself)
    guards: list[Guard]
    offset: int
    via: str | None = None   # another pointer parameter whose values index this one, or an opaque call


@dataclass
class KernelFacts:
    accesses: dict[str, list[Access]] = field(default_factory=dict)
    locals: dict[str, str] = field(default_factory=dict)        # local -> initializer text
    thread_locals: set[str] = field(default_factory=set)        # locals computed from thread/block indices
    loop_bounds: dict[str, list[str]] = field(default_factory=dict)
    csr: dict[str, tuple[str, str]] = field(default_factory=dict)   # loop var -> (row_ptr param, row var)


def analyze(kernel, text_of) -> KernelFacts:
    """Facts about the pointer parameters of a kernel definition cursor. `text_of(cursor)` gives source text."""
    params = {c.spelling: c for c in kernel.get_children() if c.kind.name == "PARM_DECL"}
    pointers = {n for n, c in params.items() if c.type.get_canonical().kind.name in ("POINTER", "INCOMPLETEARRAY")
                or "*" in c.type.spelling}
    facts = KernelFacts(accesses={n: [] for n in pointers})
    body = next((c for c in kernel.get_children() if c.kind.name == "COMPOUND_STMT"), None)
    if body is None:
        return facts
    for n in walk(body):
        if n.kind.name == "VAR_DECL":
            init = init_expr(n)
            if init is not None:
                facts.locals[n.spelling] = text_of(init)
                if _THREAD.search(facts.locals[n.spelling]):
                    facts.thread_locals.add(n.spelling)
    _Walker(facts, pointers, text_of).stmt(body, [])
    return facts


_ASSIGN_OPERATORS = {f"operator{op}=" for op in ("", "+", "-", "*", "/", "%", "&", "|", "^", "<<", ">>")}


def _param_ref(c, pointers) -> str | None:
    c = strip(c)
    if c is not None and c.kind.name == "DECL_REF_EXPR" and c.referenced is not None \
            and c.referenced.kind.name == "PARM_DECL" and c.spelling in pointers:
        return c.spelling
    return None


class _Walker:
    def __init__(self, facts: KernelFacts, pointers: set[str], text_of):
        self.f, self.pointers, self.text = facts, pointers, text_of
        self._store_at: int | None = None   # a store happens after its right-hand side is evaluated

    def stmt(self, c, guards: list[Guard]) -> None:
        k = c.kind.name
        if k == "COMPOUND_STMT":
            extra: list[Guard] = []
            for s in c.get_children():
                self.stmt(s, guards + extra)
                if s.kind.name == "IF_STMT" and _returns(list(s.get_children())[1]):
                    extra.append(Guard(self.text(list(s.get_children())[0]), "return"))
        elif k == "IF_STMT":
            kids = list(c.get_children())
            cond = self.text(kids[0])
            self.expr(kids[0], "read", guards)
            self.stmt(kids[1], guards + [Guard(cond, "then")])
            if len(kids) > 2:
                self.stmt(kids[2], guards + [Guard(cond, "else")])
        elif k == "FOR_STMT":
            self._for(c, guards)
        elif k in ("WHILE_STMT", "DO_STMT"):
            kids = list(c.get_children())
            cond_kid = kids[0] if k == "WHILE_STMT" else kids[-1]
            g = guards + [Guard(self.text(cond_kid), "loop")]
            for kid in kids:
                (self.stmt if kid is not cond_kid else lambda x, gg: self.expr(x, "read", gg))(kid, g)
        elif k in ("DECL_STMT", "RETURN_STMT", "CASE_STMT", "DEFAULT_STMT", "SWITCH_STMT", "LABEL_STMT"):
            for kid in c.get_children():
                self.stmt(kid, guards)
        elif k == "VAR_DECL":
            init = init_expr(c)
            if init is not None:
                ref = _param_ref(init, self.pointers) or self._pointer_arith(init)
                t = c.type.get_canonical()
                if ref and t.kind.name == "POINTER":
                    self._add(ref, "alias", None, guards, c)
                if t.kind.name == "LVALUEREFERENCE" and not t.get_pointee().is_const_qualified():
                    # `float& dst = out[i];` may store through dst: the element is aliased, not only read
                    self.expr(init, "alias", guards)
                else:
                    self.expr(init, "read", guards)
        else:
            self.expr(c, "read", guards)

    def _for(self, c, guards):
        kids = list(c.get_children())
        body = kids[-1]
        init = next((x for x in kids[:-1] if x.kind.name == "DECL_STMT"), None)
        cond = next((x for x in kids[:-1] if x.kind.name in ("BINARY_OPERATOR", "UNEXPOSED_EXPR")), None)
        for x in kids[:-1]:
            self.stmt(x, guards) if x.kind.name == "DECL_STMT" else self.expr(x, "read", guards)
        g = list(guards)
        if cond is not None:
            cond_text = self.text(cond)
            g.append(Guard(cond_text, "loop"))
            var_decl = next((v for v in init.get_children() if v.kind.name == "VAR_DECL"), None) if init else None
            if var_decl is not None:
                self._csr_loop(var_decl, cond)
        self.stmt(body, g)

    def _csr_loop(self, var_decl, cond) -> None:
        """`for (k = P[row]; k < P[row + 1]; ...)`: k walks the nonzeros of one CSR row."""
        start = init_expr(var_decl)
        kids = list(cond.get_children())
        if start is None or len(kids) != 2:
            return
        lo, hi = strip(start), strip(kids[1])
        if lo.kind.name == hi.kind.name == "ARRAY_SUBSCRIPT_EXPR":
            p_lo, p_hi = _param_ref(list(lo.get_children())[0], self.pointers), \
                _param_ref(list(hi.get_children())[0], self.pointers)
            row = self.text(list(lo.get_children())[1]).strip()
            if p_lo and p_lo == p_hi and re.fullmatch(r"\w+", row) and \
                    re.sub(r"\s", "", self.text(list(hi.get_children())[1])) == f"{row}+1":
                self.f.csr[var_decl.spelling] = (p_lo, row)

    def expr(self, c, role: str, guards) -> None:
        k = c.kind.name
        kids = list(c.get_children())
        if k == "ARRAY_SUBSCRIPT_EXPR" and len(kids) == 2:
            name = _param_ref(kids[0], self.pointers)
            if name:
                self._add(name, role, kids[1], guards, c)
                self.expr(kids[1], "read", guards)
                return
        elif k == "UNARY_OPERATOR" and kids:
            op = operator_of(c, kids)
            name = _param_ref(kids[0], self.pointers)
            if op == "*" and name:
                self._add(name, role, None, guards, c)
                return
            found = self._offset_of(kids[0]) if op == "*" else None
            if found:                                    # *(out + i): element i of out
                self._add(found[0], role, found[1], guards, c)
                self.expr(found[1], "read", guards)
                return
            if op in ("++", "--"):
                return self.expr(kids[0], "rmw", guards)
            if op == "&":
                return self.expr(kids[0], "atomic" if role == "atomic" else "alias", guards)
        elif k == "BINARY_OPERATOR" and len(kids) == 2:
            if operator_of(c, kids) == "=":
                self.expr(kids[1], "read", guards)     # the right side is read before the store
                self._store_at = c.extent.end.offset
                self.expr(kids[0], "write", guards)
                self._store_at = None
                return
        elif k == "COMPOUND_ASSIGNMENT_OPERATOR" and len(kids) == 2:
            self.expr(kids[1], "read", guards)
            return self.expr(kids[0], "rmw", guards)
        elif k == "MEMBER_REF_EXPR" and kids and role != "read":
            # a store to one field (`p[i].x = v`, `q->x += v`) leaves the element's other fields as they
            # were: the element is read-modify-written, never written whole
            field_role = "rmw" if role == "write" else role
            name = _param_ref(kids[0], self.pointers)
            if name:                                              # q->x: element 0 of the parameter
                self._add(name, field_role, None, guards, c)
                return
            return self.expr(kids[0], field_role, guards)        # p[i].x: the element p[i]
        elif k == "CONDITIONAL_OPERATOR" and len(kids) == 3:
            # `i < n ? x[i] : 0.0f`: each branch is read under the condition, like an if statement
            cond = self.text(kids[0])
            self.expr(kids[0], "read", guards)
            self.expr(kids[1], role, guards + [Guard(cond, "then")])
            self.expr(kids[2], role, guards + [Guard(cond, "else")])
            return
        elif k == "CALL_EXPR" and c.spelling in _ASSIGN_OPERATORS:
            # an assignment of a class type (`h[i] = __float2half(v)` for __half, `a[i] += b` for a struct
            # with operator+=) is a call of operator=: its first argument is the stored-to place
            args = list(c.get_arguments())
            if args:
                for a in args[1:]:
                    self.expr(a, "read", guards)
                if c.spelling == "operator=":
                    self._store_at = c.extent.end.offset
                    self.expr(args[0], "write", guards)
                    self._store_at = None
                else:
                    self.expr(args[0], "rmw", guards)
                return
        elif k == "CALL_EXPR":
            return self._call(c, guards)
        elif k == "DECL_REF_EXPR":
            # the pointer itself, outside a subscript or a dereference mepgen follows (`out + i` stored
            # through, a cast, a comparison): what happens to the memory is not known, so a non-const
            # pointer counts as possibly written (an output is never mistaken for an input)
            name = _param_ref(c, self.pointers)
            if name:
                self._add(name, "alias", None, guards, c)
            return
        for kid in kids:
            self.expr(kid, "read", guards)

    def _call(self, c, guards) -> None:
        args = list(c.get_arguments())
        callee = c.referenced
        parms = [p for p in callee.get_children() if p.kind.name == "PARM_DECL"] if callee is not None else []
        for i, a in enumerate(args):
            name = _param_ref(a, self.pointers)
            found = self._offset_of(a) if name is None and i == 0 and c.spelling.startswith("atomic") else None
            if found:                                    # atomicAdd(out + k, v): element k of out
                self._add(found[0], "atomic", found[1], guards, a)
                self.expr(found[1], "read", guards)
                continue
            if name and c.spelling.startswith("atomic"):
                self._add(name, "atomic", None, guards, a) if i == 0 else self._add(name, "read", None, guards, a)
            elif name:
                pointee = parms[i].type.get_pointee() if i < len(parms) else None
                const = pointee is not None and pointee.is_const_qualified()
                self._add(name, "call_read" if const else "call_write", None, guards, a, via=c.spelling)
            elif not c.spelling.startswith("atomic") and self._address_of(a) is not None:
                # `f(&(out[k]), ...)`, `f(out + k, ...)`: the callee gets a pointer into the parameter and may
                # write through it (an atomicAdd there) unless its parameter points to const
                base, index = self._address_of(a)
                pointee = parms[i].type.get_pointee() if i < len(parms) else None
                const = pointee is not None and pointee.is_const_qualified()
                self._add(base, "call_read" if const else "call_write", index, guards, a, via=c.spelling)
                self.expr(index, "read", guards)
            else:
                self.expr(a, "atomic" if (i == 0 and c.spelling.startswith("atomic")) else "read", guards)

    def _address_of(self, c):
        """(parameter, index cursor) of `&p[i]`, `&(p[i])` or `p + i` (parentheses and conversions skipped)."""
        c = strip(c)
        while c is not None and c.kind.name == "PAREN_EXPR":
            c = strip(next(iter(c.get_children()), None))
        if c is None:
            return None
        kids = list(c.get_children())
        if c.kind.name == "UNARY_OPERATOR" and kids and operator_of(c, kids) == "&":
            inner = strip(kids[0])
            while inner is not None and inner.kind.name == "PAREN_EXPR":
                inner = strip(next(iter(inner.get_children()), None))
            sub = list(inner.get_children()) if inner is not None else []
            if inner is not None and inner.kind.name == "ARRAY_SUBSCRIPT_EXPR" and len(sub) == 2:
                name = _param_ref(sub[0], self.pointers)
                return (name, sub[1]) if name else None
            return None
        return self._offset_of(c)

    def _pointer_arith(self, c) -> str | None:
        found = self._offset_of(c)
        return found[0] if found else None

    def _offset_of(self, c):
        """(parameter, offset cursor) of `p + off` or `off + p` (parentheses and conversions skipped)."""
        c = strip(c)
        while c is not None and c.kind.name == "PAREN_EXPR":
            c = strip(next(iter(c.get_children()), None))
        if c is None or c.kind.name != "BINARY_OPERATOR":
            return None
        kids = list(c.get_children())
        if len(kids) != 2 or operator_of(c, kids) != "+":
            return None
        for j, kid in enumerate(kids):
            ref = _param_ref(kid, self.pointers)
            if ref:
                return ref, kids[1 - j]
        return None

    def _add(self, name, kind, index_cursor, guards, at, via=None) -> None:
        index = self.text(index_cursor) if index_cursor is not None else None
        if index_cursor is not None and via is None:
            inner = strip(index_cursor)
            if inner.kind.name == "ARRAY_SUBSCRIPT_EXPR":
                via = _param_ref(list(inner.get_children())[0], self.pointers)
            elif inner.kind.name == "CALL_EXPR":
                via = f"{inner.spelling}()"
        offset = self._store_at if kind == "write" and self._store_at is not None else at.extent.start.offset
        self.f.accesses[name].append(Access(kind, index, list(guards), offset, via))


def _returns(c) -> bool:
    if c.kind.name == "RETURN_STMT":
        return True
    kids = list(c.get_children())
    return c.kind.name == "COMPOUND_STMT" and len(kids) == 1 and kids[0].kind.name == "RETURN_STMT"


def upper_bounds(guards: list[Guard]) -> dict[str, list[str]]:
    """Exclusive upper bounds each variable has under these guards (`i < n` -> n, `i <= m` -> m + 1)."""
    out: dict[str, list[str]] = {}
    for g in guards:
        if g.branch == "else":
            continue
        for part in _conjuncts(g.text):
            if "||" in part:
                continue
            if g.branch == "return":   # `if (t >= X) return;` leaves t < X
                m = _RETURN.match(part)
                if m:
                    out.setdefault(m.group(1), []).append(m.group(3) if m.group(2) == ">=" else f"{m.group(3)} + 1")
                continue
            m = _BOUND.match(part)
            if m:
                out.setdefault(m.group(1), []).append(m.group(3) if m.group(2) == "<" else f"{m.group(3)} + 1")
                continue
            m = _BOUND_REV.match(part)
            if m:
                out.setdefault(m.group(3), []).append(m.group(1) if m.group(2) == ">" else f"{m.group(1)} + 1")
    return out


def only_upper_bounds(guards: list[Guard]) -> bool:
    """Whether a write under these guards covers every index below its bounds: no lower bound, no else
    branch, no data-dependent condition (so poisoning the whole output before the run is fair)."""
    for g in guards:
        if g.branch == "else":
            return False
        for part in _conjuncts(g.text):
            pattern_ok = _RETURN.match(part) if g.branch == "return" else (_BOUND.match(part) or _BOUND_REV.match(part))
            if "||" in part or not pattern_ok:
                return False
    return True


def _conjuncts(text: str) -> list[str]:
    """`(a < n && (b < m))` -> ['a < n', '(b < m)'], split at top-level `&&` only."""
    t = text.strip()
    if t.startswith("(") and t.endswith(")") and _balanced(t[1:-1]):
        t = t[1:-1]
    parts, depth, start, i = [], 0, 0, 0
    while i < len(t):
        ch = t[i]
        depth += ch == "("
        depth -= ch == ")"
        if depth == 0 and t.startswith("&&", i):
            parts.append(t[start:i])
            start, i = i + 2, i + 2
            continue
        i += 1
    parts.append(t[start:])
    return [p.strip() for p in parts if p.strip()]


def _balanced(t: str) -> bool:
    depth = 0
    for ch in t:
        depth += ch == "("
        depth -= ch == ")"
        if depth < 0:
            return False
    return depth == 0
