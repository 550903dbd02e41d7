"""Find sum-reduction loops: `for (int j = lo; j < hi; ++j) TARGET += ADDEND;` where TARGET is a local
scalar or an element of global memory whose index does not change in the loop, and ADDEND is a pure
expression that does not read TARGET's array (a read of it could see the loop's own partial sums).
The sum may be guarded: `if (COND) TARGET += ADDEND;` (a sparse-skipping `if (a[i] != 0)`, a mask), COND pure
and not reading TARGET; a rewrite keeps the guard around its own accumulation (`SumLoop.accumulate`).
"""
from __future__ import annotations

from dataclasses import dataclass

from .analysis import Loop, body_statements, canonical_loop, check_pure, squash
from .source import KernelSource, Refused, kind, walk


@dataclass
class SumLoop:
    loop: Loop
    stmt: object            # the `TARGET += ADDEND` statement
    target: object          # cursor
    addend: object          # cursor
    global_target: bool     # TARGET is `p[i]` (global memory), not a local variable
    target_base: str        # `y` of `y[row]`, or the local variable's name
    ctype: str              # the accumulator's type
    guard: object = None    # cursor of COND in `if (COND) TARGET += ADDEND;`, or None

    def accumulate(self, src: KernelSource, acc: str) -> str:
        """`acc += ADDEND;`, inside the loop's guard where it has one."""
        add = f"{acc} += {src.src(self.addend)};"
        return add if self.guard is None else f"if ({src.src(self.guard)}) {add}"


def sum_loop(src: KernelSource, for_cursor) -> SumLoop:
    loop = canonical_loop(src, for_cursor)
    stmts = body_statements(loop.body)
    guard = None
    if len(stmts) == 1 and kind(stmts[0]) == "IF_STMT":
        parts = list(stmts[0].get_children())
        then = body_statements(parts[1]) if len(parts) == 2 else []
        if len(then) == 1:          # `if (COND) TARGET += ADDEND;`: no else, no declaration in the condition
            guard, stmts = parts[0], then
            check_pure(src, guard, "the sum's guard")
    if len(stmts) != 1 or kind(stmts[0]) != "COMPOUND_ASSIGNMENT_OPERATOR" or src.operator(stmts[0]) != "+=":
        raise Refused("the loop body is not a single `target += addend` statement (or one under an `if`)")
    stmt = stmts[0]
    target, addend = list(stmt.get_children())
    check_pure(src, addend, "the addend")
    check_pure(src, target, "the accumulation target")
    guard_refs = src.refs(guard) if guard is not None else set()
    t = target
    while kind(t) == "UNEXPOSED_EXPR" and len(list(t.get_children())) == 1:
        t = list(t.get_children())[0]
    if kind(t) == "ARRAY_SUBSCRIPT_EXPR":
        base, index = list(t.get_children())
        base_name = squash(src.src(base))
        if loop.var in src.refs(index):
            raise Refused(f"the accumulation target `{src.src(target)}` moves with the loop counter {loop.var}")
        if base_name in src.refs(addend) | guard_refs:
            raise Refused(f"the addend or its guard reads {base_name}, the array accumulated into (possible "
                          f"aliasing)")
        if not base_name.isidentifier() or src.param(base_name) is None:
            raise Refused(f"the accumulation target `{src.src(target)}` is not an element of a kernel parameter")
        return SumLoop(loop, stmt, target, addend, True, base_name, target.type.spelling, guard)
    if kind(t) == "DECL_REF_EXPR":
        if t.spelling in src.refs(addend) | guard_refs:
            raise Refused(f"the addend or its guard reads the accumulator {t.spelling}")
        return SumLoop(loop, stmt, target, addend, False, t.spelling, target.type.spelling, guard)
    raise Refused(f"the accumulation target `{src.src(target)}` is neither a local variable nor an array element")


def sum_loops(src: KernelSource) -> tuple[list[SumLoop], list[str]]:
    """Every reduction loop of the kernel, and why each other for loop is not one."""
    found, why = [], []
    for c in walk(src.body):
        if kind(c) == "FOR_STMT":
            try:
                found.append(sum_loop(src, c))
            except Refused as e:
                why.append(str(e))
    return found, why


def sum_group(src: KernelSource, for_cursor) -> list[SumLoop]:
    """A loop whose body is several `T_k[i_k] += addend_k;` into distinct parameters' elements that do not move
    with the loop, no addend reading any of them (`tmp[i] += A[i*n+j] * x[j]; y[i] += B[i*n+j] * x[j];`): one
    SumLoop per statement; Refused otherwise."""
    loop = canonical_loop(src, for_cursor)
    stmts = body_statements(loop.body)
    if len(stmts) < 2:
        raise Refused("not several sums in one loop")
    out = []
    for stmt in stmts:
        if kind(stmt) != "COMPOUND_ASSIGNMENT_OPERATOR" or src.operator(stmt) != "+=":
            raise Refused("the loop body is not only `target += addend` statements")
        target, addend = list(stmt.get_children())
        check_pure(src, addend, "an addend")
        t = target
        while kind(t) == "UNEXPOSED_EXPR" and len(list(t.get_children())) == 1:
            t = list(t.get_children())[0]
        if kind(t) != "ARRAY_SUBSCRIPT_EXPR":
            raise Refused(f"the target `{src.src(target)}` is not an array element")
        base, index = list(t.get_children())
        name = squash(src.src(base))
        check_pure(src, index, "a target's index")
        if not name.isidentifier() or src.param(name) is None or loop.var in src.refs(index):
            raise Refused(f"the target `{src.src(target)}` is not a fixed element of a kernel parameter")
        out.append(SumLoop(loop, stmt, target, addend, True, name, target.type.spelling))
    bases = [s.target_base for s in out]
    if len(set(bases)) != len(bases):
        raise Refused("two sums into the same array")
    for s in out:
        if set(bases) & src.refs(s.addend):
            raise Refused(f"an addend reads {', '.join(sorted(set(bases) & src.refs(s.addend)))}, an array summed into")
    return out
