"""A captured launch is numbers only (grid 7813, block 128; grid 64 x 48, block 16 x 16): nothing says how the grid
follows the block, which launch_config (and tune_params' block axis with it) needs to try another block.

Where the kernel's threads each do one element's work behind a guard, the grid that covers the same elements with
another block is provable: 1D, a kernel that is exactly a thread index and `if (i < N) {...}` (launch_guard: the
index in any spelling thread_index.py reads, or with integer casts of its parts, `(size_t)blockIdx.x * blockDim.x
+ threadIdx.x`, and barriers after the guard with no shared memory, where they order nothing); 2D, exactly `x = blockIdx.x * blockDim.x + threadIdx.x`, `y = blockIdx.y * blockDim.y +
threadIdx.y` and `if (x < W && y < H) {...}`, nothing else of the block geometry, no shared memory, barrier,
warp-level call or early return. Every thread inside the bounds then does the same work in whatever block it is, so
the grid of a block B is ceil(N / B) along each axis. The bounds come from mep.yaml (its sizes, the scalars'
recorded values, kernel.cu's macros) and the captured launch must cover them.
"""
from __future__ import annotations

import re

from .analysis import (body_statements, bound_value, is_global_index, squash, thread_index_var,
                       uses_block_geometry, warp_level, without_int_casts)
from .coarsen_blocks import _bare, _conjuncts
from .cursors import Refused, kind
from .memory_roots import Memory
from ...spec import integer_scalar


def _number(text) -> bool:
    return str(text).strip().strip("()").strip().isdigit()


def is_literal(launch) -> bool:
    """Grid and block are numbers, as many of each (a captured launch, trailing 1s trimmed)."""
    return len(launch["grid"]) == len(launch["block"]) and \
        all(_number(v) for v in list(launch["grid"]) + list(launch["block"]))


def _index(text: str, axis: str) -> bool:
    """`blockIdx.A * blockDim.A + threadIdx.A` in any commuted spelling, for axis A."""
    t = re.sub(r"[\s()]", "", text)
    b, d, th = f"blockIdx.{axis}", f"blockDim.{axis}", f"threadIdx.{axis}"
    return t in {f"{b}*{d}+{th}", f"{d}*{b}+{th}", f"{th}+{b}*{d}", f"{th}+{d}*{b}"}


def _own_work(src, indices, barriers: int, what: str) -> None:
    """Each thread's work is its own whatever block it is in: no shared memory, no barrier but the `barriers`
    trailing `__syncthreads();` (nothing to order without shared memory), no warp-level call, no early return (another
    block moves the threads that return), no block geometry beyond the index declarations `indices`; Refused with
    the reason otherwise."""
    calls = [c for c in src.calls() if c.startswith("__syncthreads")]
    if src.shared_arrays() or len(calls) != barriers or any(c != "__syncthreads" for c in calls):
        raise Refused("the kernel uses shared memory or barriers")
    warp = warp_level(src)
    if warp:
        raise Refused(f"the kernel depends on which threads form a warp ({warp[0]})")
    if src.nodes("RETURN_STMT"):
        raise Refused("the kernel returns early")
    geometry = uses_block_geometry(src, skip=indices)
    if geometry:
        raise Refused(f"the kernel uses {geometry[0]} beyond its {what}")


def _bounds_2d(src, spec) -> list[str]:
    """[W, H] of a kernel that is exactly the x and y indices and `if (x < W && y < H) {...}`."""
    stmts = body_statements(src.body)
    if len(stmts) != 3 or kind(stmts[2]) != "IF_STMT":
        raise Refused("the kernel is not `x = global x index; y = global y index; if (x < W && y < H) {...}`")
    names, decls = {}, stmts[:2]
    for s in decls:
        vars_ = list(s.get_children()) if kind(s) == "DECL_STMT" else []
        init = [k for k in vars_[0].get_children() if kind(k) not in ("TYPE_REF", "NAMESPACE_REF")] \
            if len(vars_) == 1 and kind(vars_[0]) == "VAR_DECL" else []
        axis = next((a for a in "xy" if init and _index(src.src(init[-1]), a)), None)
        if axis is None or axis in names:
            raise Refused("the kernel's first statements are not its global x and y indices")
        names[axis] = vars_[0].spelling
    kids = list(stmts[2].get_children())
    if len(kids) != 2:
        raise Refused("the guard has an else branch")
    bounds = {}
    for term in _conjuncts(src, kids[0]):
        term = _bare(term)
        parts = [squash(src.src(c)) for c in term.get_children()] if kind(term) == "BINARY_OPERATOR" else []
        op = src.operator(term) if parts else ""
        var, bound = (parts[0], parts[1]) if op == "<" else ((parts[1], parts[0]) if op == ">" else (None, None))
        axis = next((a for a, v in names.items() if v == var), None)
        if axis is None or axis in bounds:
            raise Refused(f"the guard term `{squash(src.src(term))}` is not `x < W` or `y < H`")
        bounds[axis] = bound
    if set(bounds) != {"x", "y"}:
        raise Refused("the guard does not bound both indices")
    _own_work(src, decls, 0, "x and y indices")
    if set(names.values()) & Memory(src, spec).assigned_names(src.body):
        raise Refused("the kernel assigns one of its indices")
    return [bounds["x"], bounds["y"]]


def _cast_index(src) -> tuple[str, object] | None:
    """(name, declaration statement) of `T v = (size_t)blockIdx.x * blockDim.x + threadIdx.x;` (integer casts of the
    parts, C or static_cast, in any commuted spelling) among the body's first statements."""
    for stmt in body_statements(src.body):
        decls = list(stmt.get_children()) if kind(stmt) == "DECL_STMT" else []
        if len(decls) != 1 or kind(decls[0]) != "VAR_DECL":
            continue
        init = [k for k in decls[0].get_children() if kind(k) not in ("TYPE_REF", "NAMESPACE_REF")]
        text = without_int_casts(src.src(init[-1])) if init else ""
        if init and text != src.src(init[-1]) and is_global_index(text):
            return decls[0].spelling, stmt
    return None


def launch_guard(src) -> tuple[str, str]:
    """(index, bound) of a 1-D kernel whose threads each do one element's work behind `if (i < N) {...}`: the global
    index declared first (analysis.thread_index_var, or _cast_index), the guard without else as the only statement
    after it but for trailing `__syncthreads();` (with no shared memory a barrier orders nothing the work does: it
    writes only its own element's places, which the guard's proof of another grid rests on in any case), no other
    barrier, shared memory, warp-level call, early return or block geometry, the index never assigned. Refused with
    the reason otherwise."""
    try:
        var, decl = thread_index_var(src)
    except Refused:
        found = _cast_index(src)
        if found is None:
            raise
        var, decl = found
    rest = [s for s in body_statements(src.body) if s is not decl and src.span(s) != src.span(decl)]
    trailing = 0
    while rest and kind(rest[-1]) == "CALL_EXPR" and rest[-1].spelling == "__syncthreads":
        rest, trailing = rest[:-1], trailing + 1
    if len(rest) != 1 or kind(rest[0]) != "IF_STMT":
        raise Refused(f"the kernel is not `{var} = global index; if ({var} < bound) {{...}}`")
    kids = list(rest[0].get_children())
    if len(kids) != 2:
        raise Refused("the thread guard has an else branch")
    cond = kids[0]
    if kind(cond) != "BINARY_OPERATOR" or src.operator(cond) != "<" or \
            squash(src.src(list(cond.get_children())[0])) != var:
        raise Refused(f"the thread guard is not `{var} < bound`")
    _own_work(src, [decl], trailing, "thread index")
    if var in Memory(src, src.spec).assigned_names(src.body):
        raise Refused("the kernel assigns its thread index")
    return var, src.src(list(cond.get_children())[1])


def literal_extents(src, spec, launch) -> list[int]:
    """The elements a captured launch covers along each axis ([N] or [W, H]): the guard's bounds, evaluated from
    mep.yaml and covered by the launch; Refused with the reason otherwise."""
    grid = launch["grid"]
    try:
        if len(launch["block"]) == 1:
            bounds = [launch_guard(src)[1]]
        elif len(launch["block"]) == 2:
            bounds = _bounds_2d(src, spec)
        else:
            raise Refused("a launch of three dimensions")
    except Refused as e:
        raise Refused(f"the grid `{', '.join(grid)}` is numbers, not derived from the block, and no other grid "
                      f"follows from the kernel: {e}") from None
    out = []
    for d, bound in enumerate(bounds):
        n = bound_value(src, spec, bound)
        if not isinstance(n, int) or n <= 0:
            raise Refused(f"the grid `{', '.join(grid)}` is numbers (a captured launch) and the guard's bound "
                          f"`{bound}` has no value from mep.yaml to derive another grid from")
        covered = int(str(grid[d]).strip("() ")) * int(str(launch["block"][d]).strip("() "))
        if covered < n:
            raise Refused(f"the launch's {covered} threads along {'xy'[d]} do not cover the guard's bound "
                          f"{bound} = {n}")
        out.append(n)
    return out



def guard_fact(src, spec) -> dict | None:
    """What `mepgen patch` needs to give a captured launch another block where the site's grid is not spelled with
    it: the kernel is exactly a global thread index and `if (i < N) {...}` (launch_guard, the 1-D test
    literal_extents derives another grid by) with N an integer scalar parameter, so ceil(N / B) blocks of B do the
    same work as the application's launch; {"param": N, "index": its position, "guard": "i < N"}, else None."""
    try:
        var, bound = launch_guard(src)
    except Refused:
        return None
    bound = squash(bound)
    names = [p.name for p in spec.params]
    if bound not in names:
        return None
    if not integer_scalar(spec.params[names.index(bound)]):
        return None
    return {"param": bound, "index": names.index(bound), "guard": f"{var} < {bound}"}


#: transformations of a winning chain that keep a guarded kernel's work where it was: the same elements, one per
#: thread behind the guard, whatever block they choose (the grid follows the block: ceil(N / B))
SAME_WORK = {"launch_config", "tune_params", "restrict_ldg", "launch_bounds", "nvcc_flags", "unroll", "int_division"}


def _divisor(t: dict) -> int | None:
    """How many elements per thread transformation `t` makes of one (the factor its grid is divided by), 1 for
    SAME_WORK, None for any other (what it does to the guard's coverage is not known here)."""
    name, params = t.get("name"), t.get("params") or {}
    if name in SAME_WORK:
        return 1
    value = {"vector_elements": params.get("lanes"), "coarsen": params.get("factor"),
             "coarsen_blocks": params.get("factor") if params.get("dim") == "x" else None}.get(name)
    return value if isinstance(value, int) and value >= 1 else None


def per_thread(chain: list[tuple[str, list[dict]]]) -> int | None:
    """The elements per thread of a guarded kernel's winner, from its chain of attempts ((source, transformations),
    oldest first; the last is the winner, its transformations those of the whole chain, an inherited part told as
    `inherited`, which the chain's inherited attempts spell out in order): the product of each transformation's
    factor (_divisor). None where any part is not known: an attempt neither the library's nor inherited (an LLM's
    text), a transformation of another kind, an `inherited` with no inherited attempt to spell it."""
    if not chain or any(src not in ("library", "inherited") for src, _ in chain):
        return None
    spelled = [ts for src, ts in chain if src == "inherited"]
    factor = 1
    for t in chain[-1][1]:
        parts = [t]
        if t.get("name") == "inherited":
            if not spelled:
                return None
            parts = spelled.pop(0)
            if any(p.get("name") == "inherited" for p in parts):
                return None
        for p in parts:
            d = _divisor(p)
            if d is None:
                return None
            factor *= d
    return factor
