"""Loop-invariant loads out of loops: an element that a loop reads on every iteration at the same index, while
nothing in the loop may write it, is read once into a register before the loop.

    for (int k = 0; k < n; ++k)                   if ((0) < (n)) {
        y[k * m + j] = w[j] * x[k] + b[t];   ->      const auto mepgen_h0 = w[j]; const auto mepgen_h1 = b[t];
                                                     for (int k = 0; k < n; ++k) y[k * m + j] = mepgen_h0 * x[k] + mepgen_h1;
                                                  }

The compiler keeps such a load in the loop whenever a store of the loop might write the element (pointers it cannot
prove apart), so this pays where the loop writes memory. Proven on the access model (memory_roots.py):
- the index is loop-invariant (only variables declared before the loop and not assigned in it, no memory read);
- the load runs on every iteration: it lies in a top-level statement of the body, outside any condition, `?:`,
  `&&`/`||` operand or inner loop (so the loop's first iteration reads the same address: the register is read
  only where the loop runs, `lo < hi`);
- no write in the loop may reach the element's memory (another root that mep.yaml gives a buffer of its own, or
  both `__restrict__`, or a shared or local array); an atomic counts as a write, a pointer of unknown origin as
  any memory;
- with a barrier or fence in the loop, no thread of the kernel writes that memory anywhere; no call that may write
  memory; control leaves the loop only by its condition.
"""
from __future__ import annotations

from .analysis import body_statements, squash
from .base import Rewrite, Transformation
from .loop_registers import first_reason, open_loops, wrapped
from .memory_roots import Memory, _id, leaves_early, synchronizes
from .source import Refused, kind

CONDITIONAL = ("IF_STMT", "CONDITIONAL_OPERATOR", "FOR_STMT", "WHILE_STMT", "DO_STMT", "SWITCH_STMT",
               "CASE_STMT", "DEFAULT_STMT")


def unconditional(src, mem: Memory, acc, top: set) -> bool:
    """Whether `acc` is evaluated whenever the top-level statement holding it runs."""
    node = acc.cursor
    while _id(node) not in top:
        p = mem.parent.get(_id(node))
        if p is None:
            return False
        if kind(p) in CONDITIONAL or "Lambda" in kind(p):
            return False
        if kind(p) == "BINARY_OPERATOR" and src.operator(p) in ("&&", "||") and \
                _id(list(p.get_children())[1]) == _id(node):
            return False
        node = p
    return True


class HoistLoads(Transformation):
    def __init__(self):
        super().__init__("hoist_loads", "loop-invariant loads read once before the loop")

    def _plans(self, src, spec):
        mem = Memory(src, spec)
        kernel_writes = [a for a in mem.accesses(src.body) if a.write]
        chosen, reasons = [], []
        for c, loop in open_loops(src, chosen, reasons):
            accesses = mem.accesses(loop.body)
            writes = [a for a in accesses if a.write]
            if not writes:
                reasons.append(f"the loop over {loop.var} writes no memory: the compiler keeps its invariant "
                               "loads in registers itself")
                continue
            why = leaves_early(src, loop.body)
            if why:
                reasons.append(f"the loop over {loop.var} has {why}")
                continue
            sync = synchronizes(src, loop.body)
            top = {_id(s) for s in body_statements(loop.body)}
            groups: dict = {}
            for a in accesses:
                if a.write or a.root is None:
                    continue
                if any(mem.invariant_in(i, loop.cursor) for i in a.indices) or not a.indices:
                    continue
                if not unconditional(src, mem, a, top):
                    reasons.append(f"`{squash(src.src(a.cursor))[:40]}` is read only under a condition")
                    continue
                clash = next((w for w in writes if mem.may_alias(w.root, a.root)), None)
                if clash is not None:
                    reasons.append(f"`{squash(src.src(clash.cursor))[:40]}` in the loop may write "
                                   f"`{squash(src.src(a.cursor))[:40]}`")
                    continue
                if all(mem.apart_for_compiler(a.root, w.root) for w in writes):
                    reasons.append(f"nvcc hoists `{squash(src.src(a.cursor))[:40]}` itself: the loop's stores are "
                                   "through __restrict__ pointers or to another memory space")
                    continue
                if sync and any(mem.may_alias(w.root, a.root) for w in kernel_writes):
                    reasons.append(f"the loop has {sync} and the kernel writes {a.root}: another thread's write "
                                   f"may have to be seen")
                    continue
                if not src.src(a.cursor).rstrip().endswith("]"):
                    reasons.append(f"an access to {a.root} is spelled through a macro")
                    continue
                k = (a.root, a.via, a.key if a.key is not None else squash(src.src(a.cursor)))
                groups.setdefault(k, []).append(a)
            if groups:
                chosen.append((loop, list(groups.values())))
        if not chosen:
            raise Refused("no loop reads an element at a loop-invariant index that no store of the loop may write" +
                          (f" ({first_reason(reasons)})" if reasons else ""))
        return chosen

    def space(self, src, spec, launch):
        self._plans(src, spec)
        return {}

    def apply(self, src, spec, launch, params):
        edits, names, n = [], [], 0
        for loop, groups in self._plans(src, spec):
            replace, before = [], []
            for mine in groups:
                reg = f"mepgen_h{n}"
                n += 1
                elem = src.src(mine[0].cursor)
                before.append(f"const auto {reg} = {elem};")
                replace += [(*src.span(a.cursor), reg) for a in mine]
                names.append(squash(elem))
            edits.append(wrapped(src, loop, replace, before, []))
        return Rewrite(src.replace(edits), f"hoisted loads: {', '.join(names)} read once before the loop instead "
                                           f"of on every iteration (the loop's stores cannot write them)")
