"""Scalar replacement of a global accumulator: `y[row] += a * b` on every iteration becomes a register sum
written to `y[row]` once after the loop (one store instead of a load and a store per iteration).

Refuses when the target's index moves with the loop, when the addend reads the accumulated array (the
loop would see its own partial sums) or calls something impure, and when the accumulator is already local.
"""
from __future__ import annotations

from .analysis import element_type, squash
from .base import Rewrite, Transformation
from .reduction import sum_group, sum_loops
from .source import KernelSource, Refused, kind, walk


class ScalarReplace(Transformation):
    def __init__(self):
        super().__init__("scalar_replace", "accumulate in a register instead of global memory")

    def _loops(self, src: KernelSource):
        loops, why = sum_loops(src)
        hits = [s for s in loops if s.global_target]
        if not hits:
            groups = []
            for c in src.nodes("FOR_STMT"):
                try:
                    groups.append(sum_group(src, c))
                except Refused:
                    continue
            if groups:
                return groups
        if not hits:
            raise Refused("no loop accumulates into global memory" + (f" ({why[0]})" if why else ""))
        return hits

    def space(self, src, spec, launch):
        self._loops(src)
        return {}

    def apply(self, src, spec, launch, params):
        loops = self._loops(src)
        if isinstance(loops[0], list):
            return _apply_groups(src, loops)
        edits, names = [], []
        for n, s in enumerate(loops):
            acc = f"mepgen_acc{n}"
            target = src.src(s.target)
            start, end = src.span(s.loop.cursor)
            # `y[row] = init;` right before the loop becomes the register's initial value
            init, init_span = target, None
            parent_stmts = [c for c in _siblings(src, s.loop.cursor)]
            i = next((k for k, c in enumerate(parent_stmts) if src.span(c) == (start, end)), None)
            if i and kind(parent_stmts[i - 1]) == "BINARY_OPERATOR" and src.operator(parent_stmts[i - 1]) == "=":
                lhs, rhs = list(parent_stmts[i - 1].get_children())
                if squash(src.src(lhs)) == squash(target):
                    init, init_span = f"({src.src(rhs)})", src.span(parent_stmts[i - 1])
            elif i and kind(parent_stmts[i - 1]) == "COMPOUND_ASSIGNMENT_OPERATOR" and \
                    src.operator(parent_stmts[i - 1]) in ("*=", "+=", "-=", "/="):
                # `C[i] *= beta;` right before the loop: the register starts from the scaled value
                lhs, rhs = list(parent_stmts[i - 1].get_children())
                if squash(src.src(lhs)) == squash(target) and s.target_base not in src.refs(rhs):
                    op = src.operator(parent_stmts[i - 1])[0]
                    init, init_span = f"({target} {op} ({src.src(rhs)}))", src.span(parent_stmts[i - 1])
            stmt_start, stmt_end = src.span(s.stmt)
            loop_text = src.text[start:stmt_start] + f"{acc} += {src.src(s.addend)}" + src.text[stmt_end:end]
            after = src.text[end:end + 1]
            p = src.param(s.target_base)
            ctype = element_type(p.type) if p is not None and p.pointer else s.ctype   # the application's spelling
            store = f"{target} = {acc};"
            if params.get("start") == "zero" and init != "(0)":
                # the register sums the loop alone and the start is added once after it (`y[i] = start + sum`):
                # the float sum is ordered differently, which is what a rewrite that splits the loop needs
                store = f"{target} = {init if init != target else target} + {acc};"
                init = "0"
            if i is not None:      # a statement of a block: the register joins it (the matchers see one block)
                new = f"{ctype} {acc} = {init};\n{_indent(src.text, start)}{loop_text}{after if after == ';' else ''}" \
                      f"\n{_indent(src.text, start)}{store}"
            else:
                new = f"{{ {ctype} {acc} = {init}; {loop_text}{after if after == ';' else ''} {store} }}"
            if init_span is not None:
                edits.append((init_span[0], init_span[1] + _semicolon(src.text, init_span[1]), ""))
            edits.append((start, end + (1 if after == ";" else 0), new))
            names.append(target)
        return Rewrite(src.replace(edits), f"scalar replacement: {', '.join(names)} accumulated in a register, "
                                           f"stored once after the loop instead of on every iteration")


def _siblings(src: KernelSource, c):
    """The statements of the compound statement directly holding `c`."""
    for node in walk(src.body):
        if kind(node) == "COMPOUND_STMT":
            kids = list(node.get_children())
            if any(src.span(k) == src.span(c) for k in kids):
                return kids
    return []


def _apply_groups(src, groups) -> Rewrite:
    """Several sums in one loop: one register each, started from a `T[i] = e;` among the statements right
    before the loop (removed) or from the element itself, stored once after the loop."""
    edits, names, n = [], [], 0
    for group in groups:
        loop = group[0].loop
        start, end = src.span(loop.cursor)
        siblings = _siblings(src, loop.cursor)
        i = next((k for k, c in enumerate(siblings) if src.span(c) == (start, end)), None)
        if i is None:
            raise Refused("the loop is not a statement of a block")
        starts = {}
        k = i - 1
        while k >= 0 and kind(siblings[k]) == "BINARY_OPERATOR" and src.operator(siblings[k]) == "=":
            lhs, rhs = list(siblings[k].get_children())
            t = squash(src.src(lhs))
            match = [s for s in group if squash(src.src(s.target)) == t]
            if not match or t in starts or {s.target_base for s in group} & src.refs(rhs):
                break
            starts[t] = (f"({src.src(rhs)})", siblings[k])
            k -= 1
        indent = _indent(src.text, start)
        decls, stores, body_edits = [], [], []
        for s in group:
            acc = f"mepgen_acc{n}"
            n += 1
            target = src.src(s.target)
            init, stmt = starts.get(squash(target), (target, None))
            if stmt is not None:
                a, b = src.span(stmt)
                edits.append((a, b + _semicolon(src.text, b), ""))
            p = src.param(s.target_base)
            decls.append(f"{element_type(p.type)} {acc} = {init};")
            stores.append(f"{target} = {acc};")
            a, b = src.span(s.stmt)
            body_edits.append((a - start, b - start, f"{acc} += {src.src(s.addend)}"))
            names.append(target)
        loop_text = src.text[start:end]
        for a, b, new in sorted(body_edits, reverse=True):
            loop_text = loop_text[:a] + new + loop_text[b:]
        edits.append((start, end, f"{(chr(10) + indent).join(decls)}\n{indent}{loop_text}\n{indent}"
                                  f"{(chr(10) + indent).join(stores)}"))
    return Rewrite(src.replace(edits), f"scalar replacement: {', '.join(names)} accumulated in registers, "
                                       f"stored once after the loop instead of on every iteration")


def _indent(text: str, pos: int) -> str:
    line = text[text.rfind("\n", 0, pos) + 1:pos]
    return line if not line.strip() else ""


def _semicolon(text: str, pos: int) -> int:
    """Length up to and including the `;` that ends the statement at `pos` (cursors of expressions stop before it)."""
    j = pos
    while j < len(text) and text[j] in " \t":
        j += 1
    return j + 1 - pos if j < len(text) and text[j] == ";" else 0
