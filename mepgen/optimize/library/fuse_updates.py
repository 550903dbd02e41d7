"""A loop's repeated read-modify-writes of the same array element, kept in a register: loaded once before the loop,
updated in the register on every iteration, stored once after it.

    for (int k = 0; k < n; ++k) {                 if ((0) < (n)) {
        out[o] -= a[k] * b[k];                        auto mepgen_r0 = out[o];
        t = c[k];                          ->         for (int k = 0; k < n; ++k) { mepgen_r0 -= a[k] * b[k];
        out[o] += t * t;                                                            t = c[k]; mepgen_r0 += t * t; }
    }                                                 out[o] = mepgen_r0;
                                                  }

The same operations in the same order on the same values: the result is bit for bit the original's. Proven on the
access model (memory_roots.py, affine.py), never on spelling:
- the element's index is loop-invariant (it reads only variables declared before the loop and not assigned in it);
- a top-level statement of the body writes the element, so every run of the loop touches it (the load and store
  happen only where the loop runs: `lo < hi`);
- no other access in the loop may reach it: every access of a memory that may alias the element's is the element
  itself (same polynomial index) or provably another element (its index differs by a nonzero constant); a pointer
  of unknown origin refuses;
- nothing in the loop lets another thread's write in or out (no barrier, fence, atomic, volatile, asm), no call that
  may write memory, and control leaves the loop only by its condition (no return, goto, break or continue of it).
A loop that scalar_replace already handles (a single `y[i] += e;` body) is left to it.

Several updates of one element in a row of statements (`o[x] -= p; o[x] += q; ...` in one block, the element's
index the same through them) are fused the same way without a loop: the register is loaded right before the first
of them and stored right after the last, under the same conditions over the statements from the first to the last.
"""
from __future__ import annotations

import re

from .affine import text as affine_text
from .analysis import pure_call, body_statements, squash
from .base import Rewrite, Transformation
from .loop_registers import first_reason, inside, open_loops, wrapped
from .memory_roots import Memory, leaves, leaves_early, synchronizes
from .reduction import sum_loop
from .cursors import Refused, kind, strip, walk


def top_writes(src, mem: Memory, statements) -> list:
    """The accesses that `statements` write by their own assignment target (`A[I] op= e`, `A[I] = e`, `A[I]++`):
    each is executed whenever its statement is."""
    out = []
    for stmt in statements:
        s = strip(stmt)
        target = None
        if kind(s) in ("COMPOUND_ASSIGNMENT_OPERATOR",) or kind(s) == "BINARY_OPERATOR" and src.operator(s) == "=":
            target = list(s.get_children())[0]
        elif kind(s) == "UNARY_OPERATOR" and any(t in squash(src.src(s)) for t in ("++", "--")):
            target = list(s.get_children())[0]
        if target is None:
            continue
        for acc in mem.accesses(target):
            if acc.write and src.span(acc.cursor) == src.span(strip(target)):
                out.append((stmt, acc))
    return out


def distinct(a: tuple, b: tuple, spec=None) -> bool:
    """Two index keys (per dimension, polynomials as sorted items) that differ in some dimension by a nonzero
    constant, or by a polynomial of the MEP's size symbols alone (compile-time constants of the application,
    `VEC_LENGTH`) that is nonzero at mep.yaml's sizes: never the same element."""
    if a is None or b is None or len(a) != len(b):
        return False
    for da, db in zip(a, b):
        pa, pb = dict(da), dict(db)
        diff = {m: pa.get(m, 0) - pb.get(m, 0) for m in set(pa) | set(pb)}
        diff = {m: c for m, c in diff.items() if c}
        if not diff:
            continue
        if set(diff) == {()}:
            return True
        if spec is not None and all(x in spec.sizes for m in diff for x in m):
            value = spec.size(affine_text(diff))
            if value:
                return True
    return False


def fusable_elements(src, mem: Memory, writes: list, region: list, restrict: bool = True) -> tuple[list, list[str]]:
    """The groups [(root, key, [accesses])] of the elements written by `writes` that may live in a register through
    `region` (a loop, or a run of statements), and why each other may not. An element that nvcc can tell apart
    from every other access of the region itself (memory_roots.apart_for_compiler; `restrict`: `__restrict__`
    counts) is left to it: the rewrite would not change the code."""
    accesses = [a for r in region for a in mem.accesses(r)]
    why, groups = [], {}
    for _, w in writes:
        if w.root is None:
            why.append(f"`{squash(src.src(w.cursor))[:40]}` writes through a pointer of unknown origin")
            continue
        if w.key is None:
            why.append(f"the index of `{squash(src.src(w.cursor))[:40]}` is not in the access model")
            continue
        if w.member:
            why.append(f"`{squash(src.src(w.cursor))[:40]}` is written a member at a time")
            continue
        moving = next((r for r in (mem.invariant_in(i, *region) for i in w.indices) if r), None)
        if moving:
            why.append(f"the index of `{squash(src.src(w.cursor))[:40]}` changes in the loop ({moving})")
            continue
        groups.setdefault((w.root, w.via, w.key), [])
    out = []
    for (root, via, key) in groups:
        mine, clash = [], None
        for a in accesses:
            if a.root == root and a.via == via and a.key == key and not a.member:
                mine.append(a)
            elif mem.may_alias(a.root, root) and not (a.root == root and a.via == via and
                                                      distinct(a.key, key, mem.spec)):
                clash = a
                break
        if clash is not None:
            why.append(f"`{squash(src.src(clash.cursor))[:40]}` may be the same element as the one updated "
                       f"(`{squash(src.src(mine[0].cursor if mine else clash.cursor))[:40]}`)")
            continue
        # the same buffer at a constant distance (`out[2 * t + 1]` beside `out[2 * t]`): nvcc sees that as well
        others = [a for a in accesses if not (a.root == root and a.via == via and
                                              (a.key == key or distinct(a.key, key, mem.spec)))]
        if all(mem.apart_for_compiler(root, a.root, restrict) for a in others):
            why.append(f"nvcc keeps `{squash(src.src(mine[0].cursor))[:40]}` in a register itself: every other "
                       f"access of the {'loop' if restrict is False else 'statements'} is "
                       f"{'in another memory space' if restrict is False else '__restrict__ or in another memory space'}")
            continue
        if any(not src.src(a.cursor).rstrip().endswith("]") for a in mine):
            why.append(f"an access to {root} is spelled through a macro")
            continue
        out.append((root, key, mine))
    return out, why


def impure_call(src, statements) -> str | None:
    for s in statements:
        for n in walk(s):
            if kind(n) == "CALL_EXPR" and not pure_call(src, n):
                return f"a call of `{n.spelling or '?'}`, which may write memory"
    return None


class FuseUpdates(Transformation):
    def __init__(self):
        super().__init__("fuse_updates", "a loop's repeated updates of one array element kept in a register")

    def _plans(self, src, spec):
        """[(loop or None, statements, groups)]: the loops whose elements live in registers across them, then the
        runs of statements (outside those loops) that update an element several times."""
        mem = Memory(src, spec)
        chosen, reasons = [], []
        for c, loop in open_loops(src, chosen, reasons):
            writes = top_writes(src, mem, body_statements(loop.body))
            if not writes:
                continue
            try:
                s = sum_loop(src, c)
                if s.global_target:
                    reasons.append(f"the loop over {loop.var} is a single sum: scalar_replace rewrites it")
                    continue
            except Refused:
                pass        # not a single sum: this rewrite's own checks decide
            why = synchronizes(src, loop.body) or leaves_early(src, loop.body)
            if why:
                reasons.append(f"the loop over {loop.var} has {why}: another thread or path may see the element")
                continue
            groups, why = fusable_elements(src, mem, writes, [loop.cursor], restrict=False)
            reasons += why
            if groups:
                chosen.append((loop, groups))
        plans = [(loop, None, groups) for loop, groups in chosen]
        for block in src.nodes("COMPOUND_STMT"):
            if inside(src, block, [p[0].cursor for p in chosen]) or \
                    any(src.span(block) == src.span(p[0].body) for p in chosen):
                continue
            plans += self._runs(src, mem, block, reasons)
        if not plans:
            raise Refused("no loop or run of statements updates an array element more than once that a register "
                          "may hold" + (f" ({first_reason(reasons)})" if reasons else ""))
        return plans

    def _runs(self, src, mem, block, reasons) -> list:
        """The runs of `block`'s statements from the first to the last update of an element updated at least
        twice, where the element may live in a register through them (runs that overlap: the first)."""
        stmts = list(block.get_children())
        if any(kind(s) in ("CASE_STMT", "DEFAULT_STMT", "LABEL_STMT") for s in stmts) or \
                src.text[:src.span(block)[0]].rstrip().endswith(")") and \
                re.search(r"\bswitch\s*\([^;{}]*\)$", src.text[:src.span(block)[0]].rstrip()):
            return []                           # a jump to a label must not cross the register's declaration
        writes = top_writes(src, mem, stmts)
        by_elem: dict = {}
        for stmt, w in writes:
            if w.root is not None and w.key is not None:
                by_elem.setdefault((w.root, w.via, w.key), []).append((stmt, w))
        out, taken = [], []
        for elem, ws in by_elem.items():
            if len({src.span(s) for s, _ in ws}) < 2:
                continue
            first = next(i for i, s in enumerate(stmts) if src.span(s) == src.span(ws[0][0]))
            last = next(i for i, s in enumerate(stmts) if src.span(s) == src.span(ws[-1][0]))
            if any(not (last < a or b < first) for a, b in taken):
                continue
            run = stmts[first:last + 1]
            why = synchronizes(src, *run) or leaves(run) or impure_call(src, run)
            if why:
                reasons.append(f"the statements updating `{squash(src.src(ws[0][1].cursor))[:40]}` have {why}")
                continue
            groups, why = fusable_elements(src, mem, ws, run, restrict=True)
            reasons += why
            if groups:
                out.append((None, run, groups))
                taken.append((first, last))
        return out

    def space(self, src, spec, launch):
        self._plans(src, spec)
        return {}

    def apply(self, src, spec, launch, params):
        edits, names, n = [], [], 0
        for loop, run, groups in self._plans(src, spec):
            replace, before, after = [], [], []
            for root, key, mine in groups:
                reg = f"mepgen_r{n}"
                n += 1
                elem = src.src(mine[0].cursor)
                before.append(f"auto {reg} = {elem};")
                after.append(f"{elem} = {reg};")
                replace += [(*src.span(a.cursor), reg) for a in mine]
                names.append(squash(elem))
            if loop is not None:
                edits.append(wrapped(src, loop, replace, before, after))
                continue
            s, e = src.span(run[0])[0], src.span(run[-1])[1]
            e += 1 if src.text[e:e + 1] == ";" else 0
            text = src.text[s:e]
            for a, b, new in sorted(replace, reverse=True):
                text = text[:a - s] + new + text[b - s:]
            line = src.text[src.text.rfind("\n", 0, s) + 1:s]
            ind = line if not line.strip() else ""
            edits.append((s, e, f"\n{ind}".join(before) + f"\n{ind}" + text + f"\n{ind}" + f"\n{ind}".join(after)))
        return Rewrite(src.replace(edits), f"fused updates: {', '.join(names)} kept in registers, loaded once and "
                                           f"stored once instead of at every update")
