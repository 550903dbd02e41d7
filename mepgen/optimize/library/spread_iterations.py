"""A thread's independent loop iterations shared among P copies of its block, for a launch too small for the GPU.

A kernel whose threads each walk a loop nest of their own (a face, a cell's energies and angles) on a launch of a few
hundred threads leaves most of the GPU idle, whatever its loops do. When no iteration of a thread touches an element
another of its iterations writes, its iterations may run in any order and in any thread, so the grid grows P times
along x and the P copies of each block split its threads' iterations: copy p takes the iterations p, p + P, ... of
the flattened outer L loops of the nest (the inner loops stay loops):

    PROLOGUE                                        const unsigned int mepgen_gx = gridDim.x / P;
    for (int a = LA; a < HA; ++a)          ->       const unsigned int mepgen_part = blockIdx.x / mepgen_gx;
      for (int b = LB; b < HB; ++b)                 PROLOGUE'
        BODY                                        for (long long f = mepgen_part; f < NA * NB; f += P) {
                                                        int a = LA + f / NB; int b = LB + f % NB; BODY' }

with `blockIdx.x` read as `blockIdx.x % mepgen_gx` and `gridDim.x` as `mepgen_gx` everywhere in the kernel (each copy
is the original block). Every (thread, iteration) of the original runs exactly once; only their order and their
threads change.

What it proves, on the syntax tree (the reason names what fails):
- the path: the kernel is statements that write no memory and call nothing with side effects (declarations,
  `if (...) return;`), then the nest, possibly inside `if (...) { ... }` without else, nothing after it;
- the nest: perfectly nested `for (int v = LO; v < HI; ++v)` loops whose bounds are the same in every thread and
  every iteration (parameters never assigned, enumerators, literals), and nothing in it leaves an iteration early;
- the iterations of one thread are independent: every variable the nest assigns is declared inside it; memory is
  touched only as elements of pointer parameters, which are distinct buffers (restrict.unrestricted_pointers); every
  access of an array the nest writes has the same index, and that index is one-to-one in the loop counters: as a
  polynomial (affine.py) it is linear in them and their coefficients form a mixed radix, each the one before times
  that loop's trip count (`ia + na * (iu + NU * ie)` over ia < na, iu < NU), so two different iterations of a
  thread never meet on an element;
- nothing orders threads: no shared memory, barrier, warp intrinsic or atomic anywhere in the kernel, and no function
  it calls reads blockIdx or gridDim (the replacement must see every use);
- the launch leaves the GPU underused (fewer than MIN_THREADS threads): a full launch gains nothing from more blocks.
"""
from __future__ import annotations


from .affine import add, local_constants, mul, text_poly
from .analysis import pure_call, body_statements, canonical_loop, squash, strip
from .base import Rewrite, Transformation, launch_threads
from .coarsen_blocks import MIN_THREADS
from .grid_axis import axis_refs, callees_read
from .replicas import _SIDE_EFFECTS, _functions
from .restrict import unrestricted_pointers
from .source import Refused, kind, walk
from .warp_uniform import assigned_names

PARTS = [8, 32, 128]
_ORDERING = _SIDE_EFFECTS + ("__syncthreads", "__threadfence")
GRID_X = ("blockIdx", "gridDim")


def _nest(src, stmts: list, prologue: list) -> list:
    """The loop nest that ends the kernel's path (its loops, outermost first); `prologue` gets what runs before it."""
    if not stmts:
        raise Refused("the kernel's body is empty")
    *before, last = stmts
    prologue += before
    if kind(last) == "IF_STMT":
        kids = list(last.get_children())
        if len(kids) != 2:
            raise Refused("the statement holding the loops is an if with an else")
        prologue.append(kids[0])
        return _nest(src, body_statements(kids[1]), prologue)
    if kind(last) != "FOR_STMT":
        raise Refused("the kernel does not end in a loop nest (declarations and guards, then for loops, nothing "
                      "after them)")
    loops = [canonical_loop(src, last)]
    while True:
        inner = body_statements(loops[-1].body)
        if len(inner) != 1 or kind(inner[0]) != "FOR_STMT":
            return loops
        try:
            loops.append(canonical_loop(src, inner[0]))
        except Refused:
            return loops


class SpreadIterations(Transformation):
    def __init__(self):
        super().__init__("spread_iterations", "a thread's independent loop iterations shared among more blocks",
                         {"parts": 32, "levels": 1})

    # --- the kernel's shape --------------------------------------------------------------------------

    def _threads(self, spec, launch) -> int:
        total = launch_threads(spec, launch)
        if total is None:
            raise Refused("the launch's grid or block has no value for the MEP's sizes")
        if total >= MIN_THREADS:
            raise Refused(f"the launch has {total} threads: it fills the GPU already (at least {MIN_THREADS})")
        return total

    def _match(self, src, spec, launch) -> tuple[list, list]:
        self._threads(spec, launch)
        if src.shared_arrays() or "__shared__" in src.text[src.span(src.body)[0]:src.span(src.body)[1]]:
            raise Refused("the kernel uses shared memory: its blocks' threads work together")
        for fn in _functions(src):
            bad = next((c for c in (x.spelling for x in walk(fn) if kind(x) == "CALL_EXPR")
                        if c.startswith(_ORDERING)), None)
            if bad:
                raise Refused(f"the kernel calls `{bad}`: its threads are ordered or combined")
        callees_read(src, "x")
        axis_refs(src, "x", GRID_X)
        prologue: list = []
        loops = _nest(src, body_statements(src.body), prologue)
        for s in prologue:
            self._no_effects(src, s, "before the loops")
        nest = loops[0].cursor
        for c in walk(nest):
            if kind(c) in ("RETURN_STMT", "BREAK_STMT", "CONTINUE_STMT", "GOTO_STMT"):
                raise Refused("the loops leave an iteration early (return, break, continue or goto)")
            if kind(c) == "CALL_EXPR" and not pure_call(src, c):
                raise Refused(f"the loops call `{c.spelling}`, which may have side effects")
        assigned = assigned_names(src)           # `n` assigned, `n&` its address taken
        for lp in loops:
            if squash(lp.step) != "1":
                raise Refused(f"the loop over {lp.var} does not step by 1")
            self._uniform(src, lp, assigned)
        return loops, prologue

    def _uniform(self, src, loop, assigned: set[str]) -> None:
        """The loop's start and bound the same in every thread and iteration: literals, enumerators, template
        parameters, parameters the kernel never assigns (and their members). Stricter than warp_uniform.uniform,
        which asks for the same value in every lane of a warp at one point and so admits the counters of the loops
        around it: here the bound must not change from one iteration to the next."""
        init, cond = list(loop.cursor.get_children())[:2]
        ends = [list(list(init.get_children())[0].get_children())[-1], list(cond.get_children())[1]]
        for end in ends:
            for c in walk(end):
                k = kind(c)
                if k in ("ARRAY_SUBSCRIPT_EXPR", "CALL_EXPR") or k == "UNARY_OPERATOR" and \
                        squash(src.src(c)).startswith("*"):
                    raise Refused(f"the bound `{squash(src.src(end))}` of the loop over {loop.var} reads memory or "
                                  "calls a function")
                if k != "DECL_REF_EXPR":
                    continue
                ref = c.referenced
                rk = kind(ref) if ref is not None else ""
                if rk in ("ENUM_CONSTANT_DECL", "TEMPLATE_NON_TYPE_PARAMETER", "NON_TYPE_TEMPLATE_PARAMETER") or \
                        rk == "PARM_DECL" and c.spelling in src.invariants() and \
                        not {c.spelling, c.spelling + "&"} & assigned:
                    continue
                raise Refused(f"the bound `{squash(src.src(end))}` of the loop over {loop.var} reads `{c.spelling}`, "
                              "which is neither a parameter the kernel never assigns, an enumerator nor a literal")

    def _no_effects(self, src, s, where: str) -> None:
        """A statement before the loops: no memory written, nothing called with side effects (each copy repeats it)."""
        for c in walk(s):
            if kind(c) == "CALL_EXPR" and not pure_call(src, c):
                raise Refused(f"`{squash(src.src(s))[:50]}` {where} calls `{c.spelling}`, which may have side effects")
        for w in src.writes(s):
            target = strip(list(w.get_children())[0]) if list(w.get_children()) else None
            if target is None or kind(target) != "DECL_REF_EXPR":
                raise Refused(f"`{squash(src.src(w))[:50]}` {where} writes memory (each copy would repeat it)")

    # --- the proof ------------------------------------------------------------------------------------

    def _prove(self, src, spec, loops, prologue) -> int:
        """The number of written arrays shown never to be touched at one element by two different iterations."""
        nest = loops[0].cursor
        n0, n1 = src.span(nest)
        inside = (lambda decl: decl is not None and n0 <= decl.extent.start.offset < n1)
        pointers = {p.name for p in src.params if p.pointer}
        written = set()
        for w in src.writes(nest):
            target = strip(list(w.get_children())[0]) if list(w.get_children()) else None
            decl = _root(target)
            if decl is not None and kind(decl) == "PARM_DECL" and decl.spelling in pointers and \
                    _element_of(target, decl.spelling):
                written.add(decl.spelling)
            elif not inside(decl):
                raise Refused(f"`{squash(src.src(w))[:50]}` writes what the loops do not declare: it carries a value "
                              "from one iteration to another")
        if not written:
            raise Refused("the loops write no memory")
        for st in prologue:
            read = next((c.spelling for c in walk(st) if kind(c) == "DECL_REF_EXPR" and c.spelling in written), None)
            if read:
                raise Refused(f"`{squash(src.src(st))[:50]}` before the loops reads {read}, which they write (a copy "
                              "of the block could read it after another copy wrote it)")
        env = local_constants(src, src.body, keep={lp.var for lp in loops})
        indices: dict[str, list] = {}
        subscripted = 0
        for c in walk(nest):
            if kind(c) != "ARRAY_SUBSCRIPT_EXPR":
                continue
            base, index = list(c.get_children())
            name = squash(src.src(base))
            if name in pointers:
                subscripted += 1
                if name in written:
                    indices.setdefault(name, []).append(text_poly(src, src.expand(src.src(index)), env))
                continue
            decl = _root(base)
            if decl is None or kind(decl) == "PARM_DECL" and decl.spelling in pointers:
                raise Refused(f"`{squash(src.src(c))[:40]}` is an element the proof cannot place")
            f0, f1 = src.span(src.fn)
            if not (kind(decl) == "PARM_DECL" or f0 <= decl.extent.start.offset < f1 or
                    decl.location.file is not None and decl.location.file.name == src.path and
                    "__constant__" in src.src(decl)):
                raise Refused(f"`{squash(src.src(c))[:40]}` reads a global array that other code may write")
        uses = sum(1 for c in walk(nest) if kind(c) == "DECL_REF_EXPR" and c.spelling in pointers)
        if uses != subscripted:
            raise Refused("the loops use a pointer parameter other than by subscript (pointer arithmetic or a call)")
        unrestricted_pointers(src, spec)          # distinct buffers: only accesses of one array can meet
        trips = [add(text_poly(src, src.expand(lp.hi), env), text_poly(src, src.expand(lp.lo), env), -1)
                 for lp in loops]
        counters = [lp.var for lp in loops]
        varying = {c.spelling for c in walk(nest) if kind(c) == "VAR_DECL"} - set(counters)
        for name, polys in indices.items():
            if any(p != polys[0] for p in polys[1:]):
                raise Refused(f"{name} is written and read at different indices: iterations may meet on an element")
            inner = sorted({a for mono in polys[0] for a in mono} & varying)
            if inner:          # `out[a + j]` with j another loop's counter: a differs, a + j may not
                raise Refused(f"the index of {name} reads {inner[0]}, which changes within an iteration: not proven "
                              "one-to-one in the loop counters")
            self._one_to_one(name, polys[0], counters, trips)
        return len(indices)

    @staticmethod
    def _one_to_one(name: str, index: dict, counters: list[str], trips: list[dict]) -> None:
        """Refused unless `index` is linear in the counters with mixed-radix coefficients (one of them a nonzero
        integer, each next one an integer multiple of the one before times that loop's trip count)."""
        coef: dict[str, dict] = {v: {} for v in counters}
        for mono, c in index.items():
            hit = [a for a in mono if a in coef]
            if len(hit) > 1:
                raise Refused(f"the index of {name} multiplies loop counters ({' * '.join(hit)}): not linear in them")
            if hit:
                rest = list(mono)
                rest.remove(hit[0])
                coef[hit[0]][tuple(rest)] = c
        missing = [v for v in counters if not coef[v]]
        if missing:
            raise Refused(f"the index of {name} does not use the counter {missing[0]}: its iterations write one "
                          "element")
        trip = dict(zip(counters, trips))
        order = [v for v in counters if set(coef[v]) == {()}][:1]
        if not order:
            raise Refused(f"no counter of {name}'s index has a constant coefficient: not proven one-to-one")
        while len(order) < len(counters):
            step = mul(coef[order[-1]], trip[order[-1]])
            nxt = next((v for v in counters if v not in order and _multiple(coef[v], step)), None)
            if nxt is None:
                raise Refused(f"the index of {name} is not a mixed radix of the loop counters (a coefficient is not "
                              f"the one before times that loop's trip count): not proven one-to-one")
            order.append(nxt)

    # --- the transformation ---------------------------------------------------------------------------

    def space(self, src, spec, launch):
        loops, prologue = self._match(src, spec, launch)
        self._prove(src, spec, loops, prologue)
        return {"parts": PARTS, "levels": list(range(1, len(loops) + 1))}

    def first_point(self, src, spec, launch):
        space = self.space(src, spec, launch)
        return {"parts": 32, "levels": max(1, space["levels"][-1] - 1)}

    def apply(self, src, spec, launch, params):
        loops, prologue = self._match(src, spec, launch)
        arrays = self._prove(src, spec, loops, prologue)
        parts, levels = int(params.get("parts", 32)), int(params.get("levels", 1))
        if parts not in PARTS or not 1 <= levels <= len(loops):
            raise Refused(f"{parts} parts over {levels} loop(s) is not a point of this kernel's space")
        spread, kept = loops[:levels], loops[levels:]
        s, e = src.span(src.body)
        edits = [(*src.span(r), "(blockIdx.x % mepgen_gx)" if squash(src.src(r)) == "blockIdx.x" else "mepgen_gx")
                 for r in axis_refs(src, "x", GRID_X)]
        inner = loops[levels - 1].body
        i0, i1 = src.span(inner)
        body_text = self._edited(src, i0, i1, [x for x in edits if i0 <= x[0] < i1])
        if kind(inner) != "COMPOUND_STMT":
            body_text = f"{{ {body_text.rstrip().rstrip(';')}; }}"
        n = [f"mepgen_n{k}" for k in range(levels)]
        lines = [f"const long long {n[k]} = (long long)({lp.hi}) - (long long)({lp.lo});" for k, lp in enumerate(spread)]
        total = " * ".join(n)
        positive = " && ".join(f"{x} > 0" for x in n)
        lines.append(f"for (long long mepgen_f = mepgen_part; ({positive}) && mepgen_f < {total}; "
                     f"mepgen_f += {parts}) {{")
        for k, lp in enumerate(spread):
            div = " * ".join(n[k + 1:])
            value = f"mepgen_f / ({div})" if div else "mepgen_f"
            value = f"({value}) % {n[k]}" if k else value
            lines.append(f"    {lp.ctype} {lp.var} = ({lp.ctype})(({lp.lo}) + {value});")
        lines.append(f"    {body_text}")
        lines.append("}")
        a, b = src.span(loops[0].cursor)
        new_nest = "{ // mepgen spread_iterations: the iterations of " + \
            ", ".join(lp.var for lp in spread) + f" shared among {parts} copies of the block\n" + \
            "\n".join(lines) + "\n}"
        head = self._edited(src, s + 1, a, [x for x in edits if x[0] < a])
        tail = src.text[b:e - 1]
        text = src.text[:s] + "{\n    const unsigned int mepgen_gx = gridDim.x / " + f"{parts}u;\n" + \
            "    const unsigned int mepgen_part = blockIdx.x / mepgen_gx;\n" + head + new_nest + tail + \
            src.text[e - 1:]
        grid = list(launch["grid"])
        grid[0] = f"({grid[0]}) * {parts}"
        what = ", ".join(lp.var for lp in spread) + (f" (the loops over {', '.join(lp.var for lp in kept)} kept in "
                                                     "each)" if kept else "")
        return Rewrite(text, f"spread_iterations: each thread's iterations of {what} shared among {parts} copies of "
                             f"its block (grid x {parts}); the iterations are proven independent ({arrays} written "
                             "array(s) indexed one-to-one in the loop counters)",
                       {"grid": grid, "block": list(launch["block"]), "shared_mem": str(launch.get("shared_mem", "0"))})

    @staticmethod
    def _edited(src, a: int, b: int, edits: list) -> str:
        out = src.text[a:b]
        for x, y, new in sorted(edits, reverse=True):
            out = out[:x - a] + new + out[y - a:]
        return out


def _root(c):
    """The variable an lvalue is part of (`a` of `a[i].x`, `s.v[k]`): its declaration, or None."""
    while c is not None and kind(c) in ("ARRAY_SUBSCRIPT_EXPR", "MEMBER_REF_EXPR", "UNEXPOSED_EXPR", "PAREN_EXPR"):
        kids = list(c.get_children())
        if not kids:
            return None
        c = kids[0]
    return c.referenced if c is not None and kind(c) == "DECL_REF_EXPR" else None


def _element_of(target, name: str) -> bool:
    """`target` is an element of pointer `name` (`p[i]`, `p[i].x`), not the pointer itself or a member of it."""
    while kind(target) == "MEMBER_REF_EXPR":
        target = strip(list(target.get_children())[0])
    return kind(target) == "ARRAY_SUBSCRIPT_EXPR" and _root(list(target.get_children())[0]) is not None and \
        _root(list(target.get_children())[0]).spelling == name


def _multiple(a: dict, b: dict) -> bool:
    """`a` is a nonzero integer multiple of `b` (polynomials)."""
    if not a or not b or set(a) != set(b):
        return False
    m = next(iter(b))
    if a[m] % b[m]:
        return False
    q = a[m] // b[m]
    return q != 0 and all(a[k] == q * b[k] for k in b)
