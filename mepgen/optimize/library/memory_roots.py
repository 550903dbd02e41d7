"""Which memory each array access of a kernel touches, for rewrites that keep an element in a register.

Every subscript `A[I]` (and `A[I][J]` of a multi-dimensional array) is traced to its root: a pointer parameter, a
`__shared__` or local array, or a local pointer set once from one of those (`real_t *o = (real_t *) out;` has
root `out`). Its index is read as a polynomial of the shared access model (affine.py) where it is one. Two roots
may be the same memory only where both are pointer parameters that mep.yaml does not give buffers of their own and
that are not both `__restrict__`; a pointer the kernel computes any other way (`p + k`, a call's result) has no
root, and anything may alias it. Dereferences (`*p`), addresses taken (`&A[I]`) and atomics are accesses too:
address-taken ones count as writes at an unknown place.

A loop-invariant element is one whose index reads only variables declared before the loop and never assigned in
it (the loop's own counter included), through no memory read and no call.
"""
from __future__ import annotations

from dataclasses import dataclass

from .affine import poly
from .analysis import squash, strip
from .source import KernelSource, Refused, kind, walk

#: calls after which another thread's writes may be seen, or that order this thread's writes for others
SYNC_CALLS = ("__syncthreads", "__syncwarp", "__threadfence", "__syncthreads_or", "__syncthreads_and",
              "__syncthreads_count", "__barrier_sync", "sync", "grid_sync", "__nanosleep")


@dataclass
class Access:
    cursor: object          # the outermost ARRAY_SUBSCRIPT_EXPR (or the dereference)
    root: str | None        # the memory it touches (None: unknown)
    indices: list           # index cursors, outermost dimension first ([] for a dereference)
    key: tuple | None       # the indices' polynomials as a hashable key; None when one is not a polynomial
    write: bool             # assigned, updated, incremented or its address taken
    member: bool            # `A[I].x`: a part of the element
    via: str | None = None  # the name indexed (`o` of `o[i]`, rooted at `out`): indices compare only through one


def parents(root) -> dict:
    """Cursor (by extent and kind) -> its parent cursor, for every node under `root`."""
    out = {}
    for c in walk(root):
        for k in c.get_children():
            out[_id(k)] = c
    return out


def _id(c):
    """A cursor's identity (libclang's own: an implicit cast has the extent and kind of the cast inside it)."""
    return c


class Memory:
    """The roots of a kernel's pointers and arrays, and every access of a region, with what may alias what."""

    def __init__(self, src: KernelSource, spec):
        self.src, self.spec = src, spec
        self.parent = parents(src.body)
        self.roots: dict[str, str] = {p.name: p.name for p in src.params if p.pointer}
        self.restricted = {p.name for p in src.params if p.pointer and "restrict" in p.type}
        self.shared, self.local_arrays = set(), set()
        assigned = self.assigned_names(src.body)
        for c in walk(src.body):
            if kind(c) != "VAR_DECL":
                continue
            canon = c.type.get_canonical().kind.name
            if canon in ("CONSTANTARRAY", "INCOMPLETEARRAY", "VARIABLEARRAY"):
                self.roots[c.spelling] = c.spelling
                (self.shared if "__shared__" in src.src(c) else self.local_arrays).add(c.spelling)
            elif canon == "POINTER" and c.spelling not in assigned:
                init = [k for k in c.get_children() if kind(k) not in ("TYPE_REF", "NAMESPACE_REF")]
                base = _through_casts(init[-1]) if init else None
                if base is not None and kind(base) == "DECL_REF_EXPR" and base.spelling in self.roots:
                    self.roots[c.spelling] = self.roots[base.spelling]
                    if "restrict" in src.src(c) and base.spelling in self.restricted:
                        self.restricted.add(c.spelling)

    def assigned_names(self, region) -> set[str]:
        """Variables assigned or incremented in `region` (`x = ...`, `x += ...`, `++x`), not memory writes."""
        out = set()
        for w in self.src.writes(region):
            kids = list(w.get_children())
            target = strip(kids[0]) if kids else None
            while target is not None and kind(target) in ("UNEXPOSED_EXPR", "PAREN_EXPR") and \
                    list(target.get_children()):
                target = strip(list(target.get_children())[0])
            if target is not None and kind(target) == "DECL_REF_EXPR":
                out.add(target.spelling)
        return out

    def may_alias(self, a: str | None, b: str | None) -> bool:
        if a is None or b is None:
            return True
        if a == b:
            return True
        if a in self.shared | self.local_arrays or b in self.shared | self.local_arrays:
            return False
        roles = {p.name: p.role for p in self.spec.params}
        if roles.get(a, "scalar") != "scalar" and roles.get(b, "scalar") != "scalar":
            return False                        # mep.yaml gives each a buffer of its own
        return not ({a, b} <= self.restricted)

    def apart_for_compiler(self, a: str | None, b: str | None, restrict: bool = True) -> bool:
        """Whether nvcc itself can tell memories `a` and `b` apart: a `__shared__` array and global memory (other
        address spaces), or (`restrict`) two `__restrict__` pointers. Where it can, it keeps values in registers
        across the other's stores itself (PTX of nvcc 13 -O3: an invariant load out of a loop that stores through
        `__restrict__` pointers, a run of updates of one element among `__restrict__` reads, a loop's updates of a
        shared element among global reads: the rewrite's PTX is the original's)."""
        if a is None or b is None or a == b:
            return False
        space = lambda r: "shared" if r in self.shared else ("local" if r in self.local_arrays else "global")
        if space(a) != space(b) or a in self.shared | self.local_arrays and b in self.shared | self.local_arrays:
            return True                  # other address spaces, or two arrays the kernel declares: two objects
        return restrict and space(a) == "global" and {a, b} <= self.restricted

    def accesses(self, region) -> list[Access]:
        """Every array subscript and pointer dereference in `region` (outermost subscripts only)."""
        out = []
        for c in walk(region):
            k = kind(c)
            if k == "ARRAY_SUBSCRIPT_EXPR":
                if self._subscripted(c):
                    continue                    # an inner dimension of `A[i][j]`: the outer one is the access
                base, indices = c, []
                while kind(base) == "ARRAY_SUBSCRIPT_EXPR":
                    b, i = list(base.get_children())
                    indices.insert(0, i)
                    base = _through_casts(b)
                via = base.spelling if kind(base) == "DECL_REF_EXPR" else None
                out.append(Access(c, self.roots.get(via), indices, self._key(indices), self._written(c),
                                  self._member(c), via))
            elif k == "UNARY_OPERATOR" and squash(self.src.src(c)).startswith("*"):
                kids = list(c.get_children())
                base = _through_casts(kids[0]) if kids else None
                root = self.roots.get(base.spelling) if base is not None and kind(base) == "DECL_REF_EXPR" else None
                out.append(Access(c, root, [], None, True, False, None))     # `*p`: where in p is not modelled
            elif k == "DECL_REF_EXPR" and c.spelling in self.roots and not self._indexed(c):
                # the pointer or array itself passed along, offset or copied (`f(out)`, `out + 1`): anywhere in it
                out.append(Access(c, self.roots[c.spelling], [], None, True, False, c.spelling))
            elif k == "CALL_EXPR" and c.spelling.startswith("atomic"):
                for a in list(c.get_arguments())[:1]:
                    for acc in self.accesses(a):
                        acc.write = True
                        out.append(acc)
        return out

    def _indexed(self, c) -> bool:
        """Whether the name `c` is what a subscript indexes (`A` of `A[i]`, through casts) or a dereference reads."""
        node, p = c, self.parent.get(_id(c))
        while p is not None and kind(p) in ("UNEXPOSED_EXPR", "PAREN_EXPR", "CSTYLE_CAST_EXPR",
                                            "CXX_REINTERPRET_CAST_EXPR", "CXX_STATIC_CAST_EXPR"):
            node, p = p, self.parent.get(_id(p))
        if p is None:
            return False
        if kind(p) == "ARRAY_SUBSCRIPT_EXPR":
            return _id(list(p.get_children())[0]) == _id(node)
        return kind(p) == "UNARY_OPERATOR" and squash(self.src.src(p)).startswith("*")

    def _subscripted(self, c) -> bool:
        """Whether `c` is the array that an enclosing subscript indexes (`A[i]` of `A[i][j]`)."""
        node, p = c, self.parent.get(_id(c))
        while p is not None and kind(p) in ("UNEXPOSED_EXPR", "PAREN_EXPR") and len(list(p.get_children())) == 1:
            node, p = p, self.parent.get(_id(p))
        return p is not None and kind(p) == "ARRAY_SUBSCRIPT_EXPR" and _id(list(p.get_children())[0]) == _id(node)

    def _key(self, indices) -> tuple | None:
        keys = []
        for i in indices:
            try:
                p = poly(self.src, i, {})
            except Refused:
                return None
            keys.append(tuple(sorted(p.items())))
        return tuple(keys)

    def _written(self, c) -> bool:
        node = c
        p = self.parent.get(_id(node))
        while p is not None and kind(p) in ("UNEXPOSED_EXPR", "PAREN_EXPR") and len(list(p.get_children())) == 1:
            node, p = p, self.parent.get(_id(p))
        if p is None:
            return False
        if kind(p) == "MEMBER_REF_EXPR":       # `A[i].x = ...`: the member's own parent decides
            return self._written(p)
        if kind(p) in ("COMPOUND_ASSIGNMENT_OPERATOR",) or \
                kind(p) == "BINARY_OPERATOR" and self.src.operator(p) == "=":
            return _id(list(p.get_children())[0]) == _id(node)
        if kind(p) == "UNARY_OPERATOR":
            t = squash(self.src.src(p))
            return t.startswith(("++", "--", "&")) or t.endswith(("++", "--"))
        return False

    def _member(self, c) -> bool:
        p = self.parent.get(_id(c))
        while p is not None and kind(p) in ("UNEXPOSED_EXPR", "PAREN_EXPR"):
            p = self.parent.get(_id(p))
        return p is not None and kind(p) == "MEMBER_REF_EXPR"

    def invariant_in(self, expr, *region) -> str | None:
        """None when `expr` has the same value on every iteration of `region` (a loop), or all through it (several
        statements): it reads only variables declared before the region and not assigned in it, no memory and no
        call; else the reason it may not."""
        rs, re_ = self.src.span(region[0])[0], self.src.span(region[-1])[1]
        assigned = set().union(*(self.assigned_names(r) for r in region))
        for c in walk(expr):
            if kind(c) in ("ARRAY_SUBSCRIPT_EXPR", "CALL_EXPR") and not (kind(c) == "CALL_EXPR" and _index_call(c)):
                return f"`{squash(self.src.src(c))[:40]}` reads memory or calls a function"
            if kind(c) == "UNARY_OPERATOR" and squash(self.src.src(c)).startswith("*"):
                return f"`{squash(self.src.src(c))[:40]}` reads memory"
            if kind(c) == "DECL_REF_EXPR":
                ref = c.referenced
                if ref is not None and kind(ref) == "VAR_DECL" and ref.location.file is not None and \
                        ref.location.file.name == self.src.path and rs <= ref.extent.start.offset < re_:
                    return f"{c.spelling} is declared inside it"
                if c.spelling in assigned:
                    return f"{c.spelling} changes in it"
        return None


def _index_call(c) -> bool:
    """A call of a helper that only computes an index (affine.py inlines `return EXPR;` helpers)."""
    ref = c.referenced
    fn = (ref.get_definition() or ref) if ref is not None else None
    if fn is None or kind(fn) != "FUNCTION_DECL":
        return False
    body = next((k for k in fn.get_children() if kind(k) == "COMPOUND_STMT"), None)
    stmts = list(body.get_children()) if body is not None else []
    return len(stmts) == 1 and kind(stmts[0]) == "RETURN_STMT" and \
        not any(kind(k) in ("ARRAY_SUBSCRIPT_EXPR", "CALL_EXPR") for k in walk(stmts[0]))


def _through_casts(c):
    while c is not None and kind(c) in ("UNEXPOSED_EXPR", "PAREN_EXPR", "CSTYLE_CAST_EXPR", "CXX_STATIC_CAST_EXPR",
                                        "CXX_REINTERPRET_CAST_EXPR", "CXX_CONST_CAST_EXPR"):
        kids = [k for k in c.get_children() if kind(k) not in ("TYPE_REF", "NAMESPACE_REF")]
        if not kids:
            break
        c = kids[-1]
    return c


def leaves_early(src: KernelSource, region) -> str | None:
    """Why control may leave `region` (a loop body) other than by finishing it (return, goto, a break or continue
    of the loop itself rather than of a loop or switch inside it), or None."""
    return leaves(list(region.get_children()))


def leaves(statements: list) -> str | None:
    """Why control may leave a run of `statements` other than by its end, or None."""
    for ch in statements:
        why = _leaves(ch, 0)
        if why:
            return why
    return None


def _leaves(c, depth_loop: int) -> str | None:
    k = kind(c)
    if k in ("RETURN_STMT", "GOTO_STMT", "INDIRECT_GOTO_STMT"):
        return "a return or goto"
    if k in ("BREAK_STMT", "CONTINUE_STMT") and depth_loop == 0:
        return "a break or continue of the loop itself"
    inner = depth_loop + (1 if k in ("FOR_STMT", "WHILE_STMT", "DO_STMT", "SWITCH_STMT") else 0)
    for ch in c.get_children():
        why = _leaves(ch, inner)
        if why:
            return why
    return None


def synchronizes(src: KernelSource, *region) -> str | None:
    """The first call in `region` (a cursor, or several) that synchronizes with other threads or may write memory
    unseen (a barrier, a fence, an atomic, inline assembly), or None."""
    for r in region:
        for c in walk(r):
            if kind(c) in ("GCC_ASM_STMT", "MS_ASM_STMT"):
                return "inline assembly"
            if kind(c) == "CALL_EXPR" and (c.spelling.startswith(SYNC_CALLS) or c.spelling.startswith("atomic")):
                return c.spelling
        if "volatile" in src.src(r):
            return "volatile"
    return None
