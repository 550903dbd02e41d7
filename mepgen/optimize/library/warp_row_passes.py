"""A warp per row for a thread-per-row kernel that passes over its row several times (softmax: the row's maximum,
the sum of exponentials, then every element written; normalisations of the same shape).

One thread walking a contiguous row reads with a whole row's stride between neighbouring threads (uncoalesced); 32
lanes walking the row together read consecutive elements. Each pass becomes `for (j = lo + lane; j < hi; j += 32)`:
- a sum `acc += e` is summed per lane from zero, the lanes' partials added with a butterfly of `__shfl_xor_sync`
  (every lane gets the total) and the total added to `acc` (which keeps its start value);
- a running maximum or minimum `acc = fmaxf(acc, e)` (max, fmax, fminf, ...) goes on per lane from the value all
  lanes share, then the butterfly takes the maximum of the lanes (idempotent: the start value counted 32 times is
  still the same maximum);
- an element-wise pass `out[... + j] = e` simply strides: each element is written by one lane.
Statements between the passes run in every lane with the same values, as before. The row is warp-uniform, so the
guard keeps whole warps together and the shuffles see all 32 lanes. The grid gets 32x the threads.

Applies when the guarded work is only such passes (at least two) and declarations or assignments of locals that
write no memory and call nothing with side effects; every access in a pass is unit-stride in its counter (reads
along the row); a sum in float needs a tolerance on the outputs (the order of the sum changes).
"""
from __future__ import annotations

from .analysis import pure_call, array_accesses, body_statements, canonical_loop, guarded_thread, \
    size_expr, squash, strip, unit_stride_in
from .base import Rewrite, Transformation
from .source import Refused, kind, walk

LANES = 32
MAXMIN = {"max", "min", "fmaxf", "fminf", "fmax", "fmin", "::max", "::min"}


class WarpRowPasses(Transformation):
    def __init__(self):
        super().__init__("warp_row_passes", "a warp per row for kernels that pass over the row several times",
                         {"block": 256})

    def _pass(self, src, stmt, params: set[str]) -> dict:
        loop = canonical_loop(src, stmt)
        if squash(loop.step) != "1":
            raise Refused(f"the pass over {loop.var} does not step by 1")
        body = body_statements(loop.body) if kind(loop.body) == "COMPOUND_STMT" else [loop.body]
        if len(body) != 1:
            raise Refused(f"the pass over {loop.var} holds {len(body)} statements, not one")
        st = body[0]
        kids = list(st.get_children())
        for name, idx in array_accesses(src, st):
            if not unit_stride_in(src, idx, loop.var):
                raise Refused(f"`{name}[{squash(src.src(idx))[:40]}]` is not accessed along the row with unit stride "
                              f"in {loop.var}")
        for c in walk(st):
            if kind(c) == "CALL_EXPR" and not pure_call(src, c, MAXMIN):
                raise Refused(f"the pass over {loop.var} calls `{c.spelling}`, which may have side effects")
        lhs = strip(kids[0]) if kids else None
        if kind(st) == "COMPOUND_ASSIGNMENT_OPERATOR" and src.operator(st) == "+=" and kind(lhs) == "DECL_REF_EXPR" \
                and lhs.spelling not in params and lhs.spelling not in src.refs(kids[1]):
            return {"loop": loop, "kind": "sum", "acc": lhs.spelling, "value": kids[1], "stmt": st}
        if kind(st) == "BINARY_OPERATOR" and src.operator(st) == "=" and kind(lhs) == "DECL_REF_EXPR" and \
                lhs.spelling not in params:
            call = strip(kids[1])
            args = list(call.get_arguments()) if kind(call) == "CALL_EXPR" else []
            if kind(call) == "CALL_EXPR" and call.spelling in MAXMIN and len(args) == 2:
                own = [a for a in args if squash(src.src(a)) == lhs.spelling]
                other = [a for a in args if squash(src.src(a)) != lhs.spelling]
                if len(own) == 1 and len(other) == 1 and lhs.spelling not in src.refs(other[0]):
                    return {"loop": loop, "kind": "extreme", "acc": lhs.spelling, "fn": call.spelling, "stmt": st}
            raise Refused(f"the pass over {loop.var} assigns {lhs.spelling} other than as a running max/min")
        if kind(st) == "BINARY_OPERATOR" and src.operator(st) == "=" and kind(lhs) == "ARRAY_SUBSCRIPT_EXPR":
            base, idx = list(lhs.get_children())
            if loop.var not in src.refs(idx) or not unit_stride_in(src, idx, loop.var):
                raise Refused(f"the pass over {loop.var} stores to `{squash(src.src(lhs))[:40]}`, not one element "
                              f"per {loop.var}")
            name = squash(src.src(base))
            if name in src.refs(kids[1]):
                raise Refused(f"the pass over {loop.var} reads the {name} it writes")
            return {"loop": loop, "kind": "map", "stmt": st, "array": name}
        raise Refused(f"the pass over {loop.var} is not a sum, a running max/min or an element-wise store")

    def _match(self, src, spec):
        g = guarded_thread(src, "row", "all lanes of a warp must reach the shuffles")
        params = {p.name for p in src.params}
        inner = body_statements(g.then)
        passes, written = [], set()
        for s in inner:
            if kind(s) == "FOR_STMT":
                passes.append(self._pass(src, s, params))
                continue
            for w in src.writes(s):
                t = strip(list(w.get_children())[0])
                if kind(t) != "DECL_REF_EXPR" or t.spelling in params:
                    raise Refused(f"`{squash(src.src(s))[:50]}` stores to memory outside the passes over the row")
            for c in walk(s):
                if kind(c) == "CALL_EXPR" and not pure_call(src, c, MAXMIN):
                    raise Refused(f"`{squash(src.src(s))[:50]}` calls `{c.spelling}`, which may have side effects")
            if kind(s) in ("IF_STMT", "WHILE_STMT", "DO_STMT", "SWITCH_STMT"):
                raise Refused(f"`{squash(src.src(s))[:40]}`: control flow between the passes")
        if len(passes) < 2:
            raise Refused("fewer than two passes over the row (one sum is warp_per_row's)")
        written = {p["array"] for p in passes if p["kind"] == "map"}
        for p in passes:      # a lane would read elements another lane wrote (no ordering between lanes)
            value = list(p["stmt"].get_children())[-1]
            if any(name in written for name, _ in array_accesses(src, value)):
                raise Refused("a pass reads an array that a pass over the row writes")
        size = size_expr(src, spec, g.bound)
        if size is None:
            raise Refused(f"the row bound `{squash(g.bound)}` has no value for the MEP's sizes")
        if any(p["kind"] == "sum" for p in passes):
            for name in written:
                tol = spec.verify.tolerance.get(name)
                if tol is None or (tol.rtol <= 0 and tol.atol <= 0):
                    raise Refused(f"{name} must match exactly: summing a row in another order could change it")
        return g, passes, size

    def space(self, src, spec, launch):
        self._match(src, spec)
        return {"block": [256, 128, 512]}

    def apply(self, src, spec, launch, params):
        g, passes, size = self._match(src, spec)
        block = int(params.get("block", 256))
        if block % LANES or block > 1024:
            raise Refused(f"a block of {block} threads is not whole warps")
        lane = "mepgen_lane"
        row_text = src.src(g.decl).rstrip().rstrip(";")
        row_type = row_text.split(g.var)[0].strip() or "int"
        edits = [(*src.span(g.decl), f"const int {lane} = threadIdx.x % {LANES};\n    "
                                     f"{row_type} {g.var} = (blockIdx.x * blockDim.x + threadIdx.x) / {LANES};")]
        sums = 0
        for n, p in enumerate(passes):
            loop = p["loop"]
            s0, s1 = src.span(loop.cursor)
            braced = kind(loop.body) == "COMPOUND_STMT"
            wrap = (lambda t: t) if braced else (lambda t: f"{{ {t.rstrip().rstrip(';')}; }}")
            body = wrap(src.src(loop.body))
            head = f"for (int {loop.var} = ({loop.lo}) + {lane}; {loop.var} < {loop.hi}; {loop.var} += {LANES})"
            butterfly = f"for (int mepgen_off = {LANES // 2}; mepgen_off > 0; mepgen_off >>= 1)"
            if p["kind"] == "sum":
                part = f"mepgen_p{n}"
                b0, b1 = src.span(loop.body)
                st0, st1 = src.span(p["stmt"])
                lhs0, lhs1 = src.span(list(p["stmt"].get_children())[0])
                body = wrap(src.text[b0:lhs0] + part + src.text[lhs1:b1])
                ctype = _type_of(src, g.then, p["acc"])
                text = (f"{{ {ctype} {part} = 0;\n        {head} {body}\n"
                        f"        {butterfly} {part} += __shfl_xor_sync(0xffffffffu, {part}, mepgen_off);\n"
                        f"        {p['acc']} += {part}; }}")
                sums += 1
            elif p["kind"] == "extreme":
                text = (f"{head} {body}\n        {butterfly} {p['acc']} = {p['fn']}({p['acc']}, "
                        f"__shfl_xor_sync(0xffffffffu, {p['acc']}, mepgen_off));")
            else:
                text = f"{head} {body}"
            edits.append((s0, s1, text))
        text = src.replace(sorted(edits))
        grid = f"((long long)({size}) * {LANES} + {block} - 1) / {block}"
        kinds = ", ".join(p["kind"] for p in passes)
        return Rewrite(text, f"warp_row_passes: {LANES} lanes per row through its {len(passes)} passes ({kinds}); "
                             f"coalesced reads, lane partials combined with __shfl_xor_sync butterflies"
                             + (" (the float sums' order changes)" if sums else "")
                             + f"; launch {block}-thread blocks, {LANES}x the threads",
                       {"grid": [grid], "block": [str(block)], "shared_mem": "0"})


def _type_of(src, root, name: str) -> str:
    """The declared type of the local `name` (declared in `root` or the kernel body)."""
    for c in list(walk(root)) + list(walk(src.body)):
        if kind(c) == "VAR_DECL" and c.spelling == name:
            return c.type.spelling.replace("const ", "")
    raise Refused(f"no declaration of {name} in the kernel")
