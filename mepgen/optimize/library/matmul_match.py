"""Recognise a one-thread-per-output matrix product (for tile_matmul).

The shape: `col = blockIdx.x*blockDim.x+threadIdx.x; row = blockIdx.y*blockDim.y+threadIdx.y;
if (GUARD) { T acc = INIT; for (int p = LO; p < HI; ++p) acc += X[..] * Y[..]; EPILOGUE }` where GUARD
bounds row and col (`row < M && col < N`), or is the lower/upper triangle (`row < N && col <= row`, a
rank-k update of a symmetric matrix), one operand's index is affine in (row, p) and the other's in
(col, p) (either may be transposed: `A[row*K + p]` or `A[p*M + row]`), both are read-only inputs, and
the loop bounds do not depend on the thread. Anything else (a bound on the thread, an operand that mixes
row and col, an accumulator in global memory) is refused with the reason: tiling would change results.
"""
from __future__ import annotations

from dataclasses import dataclass

from .affine import local_constants, poly
from .analysis import ARITHMETIC_OPERATORS, check_pure, size_expr, body_statements, squash, uses_block_geometry
from .reduction import sum_loop
from .source import KernelSource, Refused, kind, walk
from .stencil_match import MIRROR, _conjuncts, _unwrap, global_index


@dataclass
class Operand:
    cursor: object          # the `A[...]` subscript
    side: str               # "row" | "col": which thread index it follows
    fast: str               # the index that is unit-stride in memory ("row"/"col"/"k"), for coalesced loads


@dataclass
class Matmul:
    row: str
    col: str
    col_stmt: object
    row_stmt: object
    guard: object               # the IF_STMT
    bounds: dict                # "row" / "col" -> C text of the exclusive upper bound
    triangle: str               # "" | "lower" | "upper"
    acc: str
    acc_type: str
    init: str
    loop: object                # analysis.Loop
    operands: list              # [Operand, Operand] in the addend's order
    after: list                 # epilogue statements
    addend: object = None       # a generalized addend g(X, Y) (None: the plain product X * Y)
    init_per_output: bool = False   # the initial value reads the output's row/col (evaluated per output)


def _index_decl(src, stmts, axis):
    for s in stmts:
        decls = list(s.get_children()) if kind(s) == "DECL_STMT" else []
        if len(decls) == 1 and kind(decls[0]) == "VAR_DECL" and list(decls[0].get_children()) and \
                global_index(src.src(list(decls[0].get_children())[-1]), axis):
            return decls[0].spelling, s
    raise Refused(f"no `blockIdx.{axis}*blockDim.{axis}+threadIdx.{axis}` index: not a 2D output grid")


def match_matmul(src: KernelSource, spec) -> Matmul:
    stmts = body_statements(src.body)
    col, col_stmt = _index_decl(src, stmts, "x")
    row, row_stmt = _index_decl(src, stmts, "y")
    rest = [s for s in stmts if src.span(s) not in (src.span(col_stmt), src.span(row_stmt))]
    if len(rest) != 1 or kind(rest[0]) != "IF_STMT" or len(list(rest[0].get_children())) != 2:
        raise Refused("the kernel is not `col, row indices; if (guard) {...}` without else")
    if src.shared_arrays() or "__syncthreads" in src.calls() or src.nodes("RETURN_STMT"):
        raise Refused("the kernel uses shared memory, barriers or early returns")
    if uses_block_geometry(src, skip=[col_stmt, row_stmt]):
        raise Refused("the kernel uses the block geometry beyond its two indices")
    guard = rest[0]
    cond, then = list(guard.get_children())
    params = src.invariants()
    bounds, triangle = _guard(src, cond, row, col, params)
    inner = body_statements(then)
    loops = [i for i, s in enumerate(inner) if kind(s) == "FOR_STMT"]
    if len(loops) != 1:
        raise Refused("the guarded block does not hold exactly one loop")
    s = sum_loop(src, inner[loops[0]])
    if s.guard is not None:
        raise Refused(f"the product's sum is guarded (`if ({squash(src.src(s.guard))[:40]})`): tiles load whole rows")
    if s.global_target:
        raise Refused("the product accumulates into global memory: scalar_replace first")
    if loops[0] != 1 or kind(inner[0]) != "DECL_STMT":
        raise Refused("the guarded block is not `T acc = init; for (...) acc += ...; epilogue`")
    decl = list(inner[0].get_children())
    if len(decl) != 1 or decl[0].spelling != s.target_base or not list(decl[0].get_children()):
        raise Refused(f"the accumulator {s.target_base} is not declared with an initial value right before the loop")
    init = list(decl[0].get_children())[-1]
    per_output = bool(src.refs(init) - params)
    if src.refs(init) - params - {row, col}:
        raise Refused(f"the accumulator's initial value `{squash(src.src(init))}` depends on "
                      f"{', '.join(sorted(src.refs(init) - params - {row, col}))}, not only on the output's row and column")
    if per_output:          # `C[row * n + col] * beta`: read for each output before its sum (pure reads only)
        check_pure(src, init, "the accumulator's initial value")
    loop = s.loop
    if s.loop.step != "1":
        raise Refused("the reduction loop does not step by 1")
    init_stmt, cond_stmt = list(loop.cursor.get_children())[:2]
    bound_refs = src.refs(init_stmt) | src.refs(list(cond_stmt.get_children())[1])
    if bound_refs - params - {loop.var}:
        raise Refused(f"the loop bounds `{loop.lo}`..`{loop.hi}` depend on {', '.join(sorted(bound_refs - params - {loop.var}))}"
                      ": a triangular or per-thread loop, not a matrix product")
    addend = _unwrap(s.addend)
    product = kind(addend) == "BINARY_OPERATOR" and src.operator(addend) == "*" and \
        all(kind(_unwrap(x)) == "ARRAY_SUBSCRIPT_EXPR" for x in addend.get_children())
    if product:
        reads = [_unwrap(x) for x in addend.get_children()]
    else:       # a generalized inner product: acc += g(X[row, p], Y[p, col]) with g pure (hellinger, minkowski)
        reads = [c for c in walk(addend) if kind(c) == "ARRAY_SUBSCRIPT_EXPR"]
        if len(reads) != 2 or any(src.span(a)[0] < src.span(b)[0] < src.span(a)[1] for a in reads for b in reads
                                  if a is not b):
            raise Refused(f"the addend `{squash(src.src(s.addend))}` does not read exactly two array elements")
        stray = {n.spelling for n in walk(addend) if kind(n) == "DECL_REF_EXPR" and n.spelling and
                 not any(src.span(r)[0] <= src.span(n)[0] < src.span(r)[1] for r in reads)} - params - ARITHMETIC_OPERATORS
        stray = {n for n in stray if src.param(n) is not None or not _is_function(src, addend, n)}
        if stray:
            raise Refused(f"the addend `{squash(src.src(s.addend))}` uses {', '.join(sorted(stray))} besides its "
                          "two reads and the kernel's parameters")
    written = _written(src)
    env = local_constants(src, src.body, {row, col, loop.var})
    ops = []
    for x in reads:
        x = _unwrap(x)
        base, idx = list(x.get_children())
        name = squash(src.src(base))
        if src.param(name) is None or name in written or spec_role(spec, name) != "in":
            raise Refused(f"the factor {name} is not a read-only input buffer")
        extra = src.refs(idx) - params - {row, col, loop.var}
        if extra:
            raise Refused(f"the index of `{squash(src.src(x))}` uses {', '.join(sorted(extra))}: "
                          "only the indices, the loop counter and parameters may appear")
        p = poly(src, idx, env)
        atoms = {a for m in p for a in m}
        sides = [v for v in (row, col) if v in atoms]
        if loop.var not in atoms or len(sides) != 1:
            raise Refused(f"`{squash(src.src(x))}` is not indexed by the loop counter and exactly one of {row}, {col}")
        fast = next((n for n, v in (("k", loop.var), ("row", row), ("col", col)) if p.get((v,)) == 1), "k")
        ops.append(Operand(x, "row" if sides[0] == row else "col", fast))
    if {o.side for o in ops} != {"row", "col"}:
        raise Refused("both factors follow the same output index: not a matrix product")
    return Matmul(row, col, col_stmt, row_stmt, guard, bounds, triangle, s.target_base,
                  decl[0].type.spelling, src.src(init), loop, ops, inner[2:], None if product else addend, per_output)


def _is_function(src, root, name: str) -> bool:
    """Whether `name` in `root` refers to a function (a pure call's callee), not a variable."""
    for n in walk(root):
        if kind(n) == "DECL_REF_EXPR" and n.spelling == name:
            ref = n.referenced
            return ref is not None and kind(ref) in ("FUNCTION_DECL", "FUNCTION_TEMPLATE", "CXX_METHOD")
    return False


def size_value(spec, name: str) -> str | None:
    """The size expression mep.yaml gives the scalar parameter `name` (`MAT_M` for `m`), else None."""
    try:
        p = spec.param(name.strip())
    except KeyError:
        return None
    return p.value if p.role == "scalar" and p.value and spec.size(p.value) is not None else None


def bound_sizes(spec, m: Matmul, src=None) -> dict[str, str]:
    """"row"/"col" -> the size expression of the product's output bounds; Refused when a bound has none."""
    out = {}
    for side, bound in m.bounds.items():
        out[side] = size_value(spec, bound) or (size_expr(src, spec, bound) if src else None)
        if out[side] is None and src is not None and bound.strip() in src.template_values():
            raise Refused(f"the {side} bound `{bound}` is a template parameter launched as "
                          f"`{src.template_values()[bound.strip()]}`, which has no value for the MEP's sizes")
        if out[side] is None:
            raise Refused(f"the {side} bound `{bound}` is not a scalar parameter with a size value in mep.yaml")
    return out


def spec_role(spec, name):
    try:
        return spec.param(name).role
    except KeyError:
        return None


def _written(src) -> set[str]:
    out = set()
    for w in src.writes():
        kids = list(w.get_children())
        if kids:
            out |= {n.spelling for n in walk(kids[0]) if kind(n) == "DECL_REF_EXPR"}
    return out


def _guard(src, cond, row, col, params):
    bounds, triangle = {}, ""
    for t in _conjuncts(src, cond):
        kids = list(t.get_children()) if kind(t) == "BINARY_OPERATOR" else []
        if len(kids) != 2:
            raise Refused(f"the guard term `{squash(src.src(t))}` is not a comparison")
        a, b, op = squash(src.src(kids[0])), squash(src.src(kids[1])), src.operator(t)
        if a not in (row, col) and b in (row, col) and op in MIRROR:      # `m > row`: the bound written first
            a, b, op, kids = b, a, MIRROR[op], kids[::-1]
        pair = {(col, "<=", row), (row, ">=", col)}
        if (a, op, b) in pair or (a, op, b) == (col, "<", f"{row} + 1"):
            triangle = "lower"
        elif (a, op, b) in {(col, ">=", row), (row, "<=", col)}:
            triangle = "upper"
        elif a in (row, col) and op == "<" and not (src.refs(kids[1]) - params):
            bounds["row" if a == row else "col"] = b
        else:
            raise Refused(f"the guard term `{squash(src.src(t))}` is not a bound on {row} or {col} "
                          "or the triangle")
    if "row" not in bounds:
        raise Refused(f"the guard does not bound {row}")
    if "col" not in bounds:
        if triangle != "lower":
            raise Refused(f"the guard does not bound {col}")
        bounds["col"] = bounds["row"]          # col <= row < bound
    return bounds, triangle
