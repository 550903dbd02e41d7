"""Recognise a one-thread-per-point 2D/3D stencil and prove its neighbour offsets (for tile_stencil).

The shape: thread indices `i = blockIdx.x*blockDim.x+threadIdx.x` (and `.y`, `.z`) declared first, then
local declarations, then one `if (GUARD) {...}` holding the computation, GUARD a conjunction of bounds on
the thread indices. Every read of the tiled array (an `in` buffer the kernel never writes) must be
`u[IDX]` with IDX = i + j*S [+ k*P] + constant offsets, the strides S (and P) the same for every read;
or a pass of `u` to a `__device__` helper in kernel.cu whose reads of its pointer are of that form over
its parameters, which the call binds to i, j, k and the strides. The largest offset per axis is the
radius the halo needs; it is proven from the index expressions, never assumed.

A thread index may start at an interior point (`blockIdx.x*blockDim.x+threadIdx.x + 1`: its origin). A read under
a condition that keeps it inside the guard's box (`x > 0 ? u[x-1] : 0`, `if (y < ny - 1) s += u[...]`, the guard
bounding y by ny) is served from the tile without a halo beyond the box: only the reads without such a condition
decide how far the tile's loads may reach outside it (`near`), and so what the guard's bounds must leave room for.
"""
from __future__ import annotations

import re

from ...cexpr import is_one_group
from ...spec import DTYPES
from dataclasses import dataclass, field

from .affine import add, int_value, local_constants, param_sizes, poly, substitute, text
from .analysis import body_statements, squash
from .source import KernelSource, Refused, kind, walk

AXES = "xyz"
#: the comparison with its operands swapped: `4 <= x` is `x >= 4`
MIRROR = {"<": ">", ">": "<", "<=": ">=", ">=": "<=", "==": "==", "!=": "!="}


def global_index(expr: str, axis: str) -> bool:
    e = squash(expr).replace(" ", "")
    while e.startswith("(") and e.endswith(")"):
        e = e[1:-1]
    a = re.escape(axis)
    forms = [rf"blockIdx\.{a}\*blockDim\.{a}\+threadIdx\.{a}", rf"blockDim\.{a}\*blockIdx\.{a}\+threadIdx\.{a}",
             rf"threadIdx\.{a}\+blockIdx\.{a}\*blockDim\.{a}", rf"threadIdx\.{a}\+blockDim\.{a}\*blockIdx\.{a}"]
    return any(re.fullmatch(f, e) for f in forms)


def index_origin(expr: str, axis: str) -> int | None:
    """c where `expr` is the global thread index along `axis` plus a literal c >= 0 (`... + threadIdx.y + 1`, the
    spelling of a grid whose first point is an interior one), 0 for the index itself, None otherwise."""
    if global_index(expr, axis):
        return 0
    e = squash(expr).replace(" ", "")
    while is_one_group(e):
        e = e[1:-1]
    m = re.fullmatch(r"(.+)\+(\d+)[uU]?", e) or re.fullmatch(r"(\d+)[uU]?\+(.+)", e)
    if m is None:
        return None
    g, c = (m.group(1), m.group(2)) if m.group(2).isdigit() else (m.group(2), m.group(1))
    return int(c) if global_index(g, axis) else None



@dataclass
class Read:
    cursor: object                  # the `u[...]` subscript, or the helper call
    offset: tuple                   # (dx, dy[, dz]) for a direct read; None for a helper call
    helper_args: dict = field(default_factory=dict)   # call argument cursor -> "x" | "y" | "z" | "S" | "P" | "ptr"


@dataclass
class Stencil:
    ndim: int
    index: list[str]                # thread index names, x first
    index_stmts: list               # their declarations
    guard: object                   # the IF_STMT
    lo: list[int]                   # literal lower bounds per axis (the guard's, or the origin's if larger)
    hi: list[str]                   # upper bounds (exclusive) as C text
    array: str                      # the tiled pointer parameter
    ctype: str                      # its element type
    strides: list[str]              # C text: [S] or [S, P]
    radius: list[int]               # per axis
    reads: list[Read]
    offsets: set
    origin: list[int] = field(default_factory=list)   # per axis: the index is the global thread index + origin
    near: list[int] = field(default_factory=list)     # per axis: how far beyond the guard's box a read may reach
    conditional: int = 0            # reads kept inside the guard's box by a condition (`i > 0 ? u[i-1] : 0`)


def _conjuncts(src, c) -> list:
    c = _unwrap(c)
    if kind(c) == "BINARY_OPERATOR" and src.operator(c) == "&&":
        a, b = list(c.get_children())
        return _conjuncts(src, a) + _conjuncts(src, b)
    return [c]


def _unwrap(c):
    while kind(c) in ("UNEXPOSED_EXPR", "PAREN_EXPR") and len(list(c.get_children())) == 1:
        c = list(c.get_children())[0]
    return c


def _bounds(src, guard_cond, index: list[str], params: set[str]):
    lo, hi = [0] * len(index), [None] * len(index)
    hi_at = [None] * len(index)
    for t in _conjuncts(src, guard_cond):
        if kind(t) != "BINARY_OPERATOR" or len(list(t.get_children())) != 2:
            raise Refused(f"the guard term `{squash(src.src(t))}` is not a bound on a thread index")
        a, b = list(t.get_children())
        name, op, other = squash(src.src(a)), src.operator(t), b
        if name not in index and squash(src.src(b)) in index:     # `4 <= x`: the bound written first
            name, op, other = squash(src.src(b)), MIRROR.get(op, op), a
        if name not in index:
            raise Refused(f"the guard term `{squash(src.src(t))}` is not `index OP bound`")
        d = index.index(name)
        bound = squash(src.src(other))
        stray = {n.spelling for n in walk(other) if kind(n) == "DECL_REF_EXPR"} - params
        if stray:
            raise Refused(f"the guard bound `{bound}` uses {', '.join(sorted(stray))}, not only kernel parameters")
        if op in (">", ">="):
            v = int_value(bound)
            v = v if v is not None else int_value(src.expand(bound))
            if v is None:
                raise Refused(f"the lower bound `{squash(src.src(t))}` is not a literal")
            lo[d] = v + (1 if op == ">" else 0)
        elif op in ("<", "<="):
            hi[d] = bound if op == "<" else f"({bound}) + 1"
            hi_at[d] = (other, 0 if op == "<" else 1)
            if d == 0:
                x_hi = (other, 0 if op == "<" else 1)
        else:
            raise Refused(f"the guard term `{squash(src.src(t))}` is not a bound")
    for d, h in enumerate(hi):
        if h is None:
            raise Refused(f"the guard has no upper bound on {index[d]}")
    return lo, hi, x_hi, hi_at


def decompose(p: dict, index: list[str], what: str) -> tuple[tuple, list[tuple]]:
    """(offsets per axis, stride monomials [S] or [S, P]) of `i + j*S [+ k*P] + offsets`; Refused otherwise."""
    strides = []
    rest = dict(p)
    if rest.get((index[0],)) != 1:
        raise Refused(f"the index of {what} is not unit-stride in {index[0]}")
    del rest[(index[0],)]
    for v in index[1:]:
        ms = [m for m in rest if v in m]
        if len(ms) != 1 or rest[ms[0]] != 1 or m_count(ms[0], v) != 1:
            raise Refused(f"the index of {what} is not `... + {v} * stride` (non-affine in {v})")
        s = tuple(a for a in ms[0] if a != v)
        if not s or set(s) & set(index):
            raise Refused(f"the index of {what} has no stride for {v} independent of the thread indices")
        strides.append(s)
        del rest[ms[0]]
    offs = [rest.pop((), 0)]
    for s in strides:
        offs.append(rest.pop(s, 0))
    if rest:
        m = next(iter(rest))
        raise Refused(f"the stencil radius is not provable: the index of {what} has the term "
                      f"`{' * '.join(m)}`, not a constant offset")
    return tuple(offs), strides


def m_count(m: tuple, v: str) -> int:
    return sum(1 for a in m if a == v)


def match_stencil(src: KernelSource, spec) -> Stencil:
    stmts = body_statements(src.body)
    index, index_stmts, origin = [], [], []
    for axis in AXES:
        for s in stmts:
            decls = list(s.get_children()) if kind(s) == "DECL_STMT" else []
            o = index_origin(src.src(list(decls[0].get_children())[-1]), axis) \
                if len(decls) == 1 and kind(decls[0]) == "VAR_DECL" and list(decls[0].get_children()) else None
            if o is not None:
                index.append(decls[0].spelling)
                index_stmts.append(s)
                origin.append(o)
                break
        else:
            break
    if len(index) < 2:
        raise Refused("not a 2D/3D stencil: no `blockIdx.y*blockDim.y+threadIdx.y` thread index")
    if src.shared_arrays() or "__syncthreads" in src.calls():
        raise Refused("the kernel already uses shared memory or barriers")
    rest = [s for s in stmts if not any(src.span(s) == src.span(t) for t in index_stmts)]
    ifs = [s for s in rest if kind(s) == "IF_STMT"]
    if len(ifs) != 1 or rest[-1] is not ifs[0] and src.span(rest[-1]) != src.span(ifs[0]) or \
            any(kind(s) != "DECL_STMT" for s in rest[:-1]):
        raise Refused("the kernel is not `indices; [declarations;] if (guard) {...}`")
    guard = ifs[0]
    kids = list(guard.get_children())
    if len(kids) != 2:
        raise Refused("the stencil guard has an else branch")
    params = src.invariants()
    lo, hi, x_hi, hi_at = _bounds(src, kids[0], index, params | set(index))
    array = _tiled_array(src, spec, guard)
    env = local_constants(src, src.body, set(index))
    reads, offsets, strides = [], set(), None
    guarded = conditions_of_reads(src, kids[1], array)
    reach = set()                   # offsets read without a condition that keeps them inside the guard's box
    conditional = 0
    for c in walk(src.body):
        if kind(c) == "ARRAY_SUBSCRIPT_EXPR" and squash(src.src(list(c.get_children())[0])) == array:
            off, st = decompose(poly(src, list(c.get_children())[1], env), index, f"`{squash(src.src(c))}`")
            strides = _same(strides, st, c, src)
            reads.append(Read(c, off))
            offsets.add(off)
            if any(off) and inside_box(src, off, guarded.get(src.span(c), []), index, lo, hi_at,
                                       params | set(index)):
                conditional += 1
            else:
                reach.add(off)
        elif kind(c) == "CALL_EXPR" and any(squash(src.src(a)) == array for a in c.get_arguments()):
            read, offs, st = _helper(src, c, array, index, env)
            strides = _same(strides, st, c, src)
            reads.append(read)
            offsets |= offs
            reach |= offs
    inside = set(src.span(n) for n in walk(kids[1]))
    for r in reads:
        if src.span(r.cursor) not in inside:
            raise Refused(f"`{squash(src.src(r.cursor))[:50]}` reads {array} outside the guard")
    uses = [n for n in walk(src.body) if kind(n) == "DECL_REF_EXPR" and n.spelling == array]
    covered = [n for n in uses if any(src.span(r.cursor)[0] <= src.span(n)[0] < src.span(r.cursor)[1] for r in reads)]
    if len(covered) != len(uses):
        raise Refused(f"{array} is used other than read as {array}[index] or passed to a helper")
    lo = [max(lo[d], origin[d]) for d in range(len(index))]     # the index never is below its origin
    radius = [max(abs(o[d]) for o in offsets) for d in range(len(index))]
    # the tile's cells beyond the guard's box are loaded (and must lie in the array) only as far as a read
    # without a bounding condition reaches; a conditional read stays inside the box, proven by its condition
    near = [max([abs(o[d]) for o in reach] or [0]) for d in range(len(index))]
    if not any(radius):
        raise Refused(f"every read of {array} is at the thread's own point: nothing to share between threads")
    if max(radius) > 4:
        raise Refused(f"stencil radius {max(radius)} is too large for a shared-memory tile")
    for d, v in enumerate(index):
        if lo[d] < near[d]:
            raise Refused(f"the guard lets {v} reach {lo[d]}, but a read without a condition that keeps it inside "
                          f"the guard's box lies {near[d]} away along {v}: the halo would start before index 0")
    s_poly = {strides[0]: 1}
    hi_x = _in_sizes(add(poly(src, x_hi[0], {}), {(): x_hi[1]}), spec)
    bound_gap = add(hi_x, _in_sizes(s_poly, spec), -1)
    if bound_gap.keys() - {()} or bound_gap.get((), 0) > -near[0]:
        raise Refused(f"cannot prove the halo stays inside a row: the bound on {index[0]} is not "
                      f"`{text(s_poly)} - c` with c >= {near[0]}")
    ctype = _elem(spec, array)
    return Stencil(len(index), index, index_stmts, guard, lo, hi, array, ctype,
                   [text({s: 1}) for s in strides], radius, reads, offsets, origin, near, conditional)


def _in_sizes(p: dict, spec) -> dict:
    """`p` with each scalar parameter written as the size symbol mep.yaml gives it (affine.param_sizes)."""
    env = {a: {(v,): 1} for a, v in param_sizes(spec).items()}
    return substitute(p, env) if env else p


def _same(known, new, c, src):
    if known is not None and known != new:
        raise Refused(f"`{squash(src.src(c))[:50]}` uses other strides than the other reads")
    return new


def _tiled_array(src, spec, guard) -> str:
    roles = {p.name: p.role for p in spec.params}
    written = set()
    for w in src.writes():
        kids = list(w.get_children())
        if kids:
            written |= {n.spelling for n in walk(kids[0]) if kind(n) == "DECL_REF_EXPR"}
    counts = {}
    for c in walk(guard):
        if kind(c) == "ARRAY_SUBSCRIPT_EXPR":
            base = squash(src.src(list(c.get_children())[0]))
            counts[base] = counts.get(base, 0) + 1
        elif kind(c) == "CALL_EXPR":
            for a in c.get_arguments():
                counts[squash(src.src(a))] = counts.get(squash(src.src(a)), 0) + 1
    cands = [p.name for p in src.params if p.pointer and roles.get(p.name) == "in" and p.name not in written
             and p.name in counts]
    if not cands:
        raise Refused("no read-only input array (role `in` in mep.yaml) is read inside the guard")
    return max(cands, key=lambda n: counts[n])


def _elem(spec, name) -> str:
    p = spec.param(name)
    if p.dtype not in DTYPES:
        raise Refused(f"the element type of {name} is unknown")
    return DTYPES[p.dtype]


def _helper(src, call, array, index, env):
    """Reads of `array` inside a __device__ helper, mapped to the caller's thread indices and strides."""
    ref = call.referenced
    d = ref.get_definition() if ref is not None else None
    if d is None or d.location.file is None or d.location.file.name != src.path:
        raise Refused(f"{array} is passed to `{call.spelling}`, whose body is not in kernel.cu to analyse")
    hparams = [p.spelling for p in d.get_arguments()]
    args = list(call.get_arguments())
    if len(args) != len(hparams):
        raise Refused(f"`{call.spelling}` is called with default arguments: cannot map its parameters")
    body = next((k for k in d.get_children() if kind(k) == "COMPOUND_STMT"), None)
    ptr = next(h for h, a in zip(hparams, args) if squash(src.src(a)) == array)
    binds, roles = {}, {}
    for h, a in zip(hparams, args):
        if h == ptr:
            roles[src.span(a)] = "ptr"
            continue
        try:
            binds[h] = poly(src, a, env)
        except Refused:
            binds[h] = None
    hlocal = local_constants(src, body, set())
    offsets, strides, used = set(), None, set()
    for c in walk(body):
        if kind(c) == "ARRAY_SUBSCRIPT_EXPR" and squash(src.src(list(c.get_children())[0])) == ptr:
            idx = list(c.get_children())[1]
            hp = poly(src, idx, hlocal)
            for n in {a for m in hp for a in m}:
                if n not in binds or binds[n] is None:
                    raise Refused(f"`{call.spelling}` indexes {ptr} with `{n}`, not bound to an affine argument")
                used.add(n)
            off, st = decompose(substitute(hp, {k: v for k, v in binds.items() if v is not None}), index,
                                f"`{squash(src.src(c))}` in {call.spelling}")
            strides = _same(strides, st, call, src)
            offsets.add(off)
    if not offsets:
        raise Refused(f"`{call.spelling}` does not read {ptr} as {ptr}[index]")
    ptr_uses = [n for n in walk(body) if kind(n) == "DECL_REF_EXPR" and n.spelling == ptr]
    sub = [n for n in walk(body) if kind(n) == "ARRAY_SUBSCRIPT_EXPR" and
           squash(src.src(list(n.get_children())[0])) == ptr]
    if len(ptr_uses) != len(sub):
        raise Refused(f"`{call.spelling}` uses its pointer {ptr} other than as {ptr}[index]")
    idx_spans = [src.span(list(n.get_children())[1]) for n in sub]
    names = {index[0]: "x", index[1]: "y", **({index[2]: "z"} if len(index) > 2 else {})}
    stride_roles = {strides[0]: "S", **({strides[1]: "P"} if len(strides) > 1 else {})}
    for h, a in zip(hparams, args):
        if h not in used:
            continue
        b = binds[h]
        one = list(b.items())
        role = None
        if len(one) == 1 and one[0][1] == 1:
            m = one[0][0]
            role = names.get(m[0]) if len(m) == 1 and m[0] in names else stride_roles.get(m)
        if role is None:
            raise Refused(f"`{call.spelling}` gets `{squash(src.src(a))}` for {h}: not a thread index or a stride")
        for n in walk(body):
            if kind(n) == "DECL_REF_EXPR" and n.spelling == h and \
                    not any(s <= src.span(n)[0] < e for s, e in idx_spans):
                raise Refused(f"`{call.spelling}` uses {h} outside its reads of {ptr}")
        roles[src.span(a)] = role
    return Read(call, None, roles), offsets, strides


def conditions_of_reads(src, root, array: str) -> dict:
    """span of each `array[...]` read under `root` -> the condition cursors that hold whenever it runs: the
    condition of every `c ? read : ...` and `if (c) read...` (then branch) around it. A read in an else branch
    or a `:` branch gets nothing from that condition (its negation is not used)."""
    out: dict = {}

    def visit(c, held):
        k = kind(c)
        kids = list(c.get_children())
        if k == "CONDITIONAL_OPERATOR" and len(kids) == 3:
            visit(kids[0], held)
            visit(kids[1], held + [kids[0]])
            visit(kids[2], held)
            return
        if k == "IF_STMT" and len(kids) >= 2:
            visit(kids[0], held)
            visit(kids[1], held + [kids[0]])
            for e in kids[2:]:
                visit(e, held)
            return
        if k == "ARRAY_SUBSCRIPT_EXPR" and kids and squash(src.src(kids[0])) == array:
            out[src.span(c)] = held
        for ch in kids:
            visit(ch, held)

    visit(root, [])
    return out


def inside_box(src, off: tuple, conds: list, index: list[str], lo: list[int], hi_at: list, names: set) -> bool:
    """Whether the conditions prove that the point at `off` from the thread's own lies inside the guard's box
    (lo <= index + off < hi on every axis with a non-zero offset): `i > 0` for -1, `i < n - 1` for +1 where the
    guard says `i < n`. Terms: `index OP bound` or `bound OP index`, conjunctions of them; anything else proves
    nothing (the read then counts as unconditional)."""
    terms = [t for c in conds for t in _conjuncts(src, c)]
    for d, o in enumerate(off):
        if o == 0:
            continue
        ok = False
        for t in terms:
            if kind(t) != "BINARY_OPERATOR" or len(list(t.get_children())) != 2:
                continue
            a, b = list(t.get_children())
            name, op, other = squash(src.src(a)), src.operator(t), b
            if name != index[d] and squash(src.src(b)) == index[d]:
                name, op, other = index[d], MIRROR.get(op, op), a
            if name != index[d] or {n.spelling for n in walk(other) if kind(n) == "DECL_REF_EXPR"} - names:
                continue
            try:
                bound = poly(src, other, {})
            except Refused:
                continue
            if o < 0 and op in (">", ">="):              # index >= L: index + o >= L + o >= lo
                v = bound.get((), 0) if set(bound) <= {()} else None
                ok = v is not None and v + (1 if op == ">" else 0) + o >= lo[d]
            elif o > 0 and op in ("<", "<=") and hi_at[d] is not None:   # index <= B - 1: index + o < hi
                try:
                    hi = add(poly(src, hi_at[d][0], {}), {(): hi_at[d][1]})
                except Refused:
                    continue
                gap = add(hi, bound, -1)                 # hi - B
                ok = set(gap) <= {()} and gap.get((), 0) - (1 if op == "<=" else 0) >= o
            if ok:
                break
        if not ok:
            return False
    return True
