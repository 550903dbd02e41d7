"""A shared-memory tree reduction finished by warp shuffles: the last five steps of the tree (32, 16, 8, 4, 2, 1
elements apart), each a barrier of the whole block, become one warp's register exchanges.

    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {     {  unsigned s = blockDim.x / 2;
        if (tid < s) sh[tid] += sh[tid + s];                    for (; s > 32; s >>= 1) { ...the same body... }
        __syncthreads();                                         if (s == 32 && blockDim.x >= 32) {
    }                                                                if (tid < 32) { float v = sh[tid] + sh[tid + 32];
                                                                         v = v + __shfl_down_sync(~0u, v, 16); ... 1
                                                                         if (tid == 0) sh[0] = v; }
                                                                     __syncthreads();
                                                                 } else { for (; s > 0; s >>= 1) { ...the body... } }
                                                             }

Lane l adds lane l + o exactly where the tree's thread l added element l + o: the same pairs in the same order, so
sh[0] is bit for bit the tree's. The tree's other elements are left as partial sums, so every read of the array
outside the tree must be of element 0. Matched on the access model, any spelling: the counter halves (`>>= 1`,
`/= 2`, `s = s >> 1`) while positive (`s > 0`, `s >= 1`, `s != 0`); the body is `if (tid < s) UPDATE` and one
`__syncthreads()` in either order; UPDATE writes the array at the thread's index (threadIdx.x, through locals
or not) from that element and the one `s` further (`+=`, `*=`, `&=`, `|=`, `^=`, `a = a op b`, `a = max(a, b)`...,
no other memory). The block is 1D (warp 0 is threads 0 to 31), the counter starts at the same value in every thread
and the tree is not inside another loop. Where the counter never reaches 32 (a block under 64 threads, a size that
is not a power of two) the original loop runs on.
"""
from __future__ import annotations

import re

from .affine import local_constants, poly
from .analysis import body_statements, check_pure, squash
from .base import Rewrite, Transformation
from .memory_roots import Memory
from .cursors import Refused, kind, strip, walk

SHUFFLE_TYPES = {"float", "double", "int", "unsigned int", "long", "unsigned long", "long long",
                 "unsigned long long"}
FUNCTIONS = {"max", "min", "fmaxf", "fminf", "fmax", "fmin"}
COMPOUND = {"+=": "+", "*=": "*", "&=": "&", "|=": "|", "^=": "^"}


def _nospace(t: str) -> str:
    return re.sub(r"\s+", "", t)


class WarpReduce(Transformation):
    def __init__(self):
        super().__init__("warp_reduce", "the last steps of a shared-memory tree reduction as warp shuffles")

    def _match(self, src, spec, launch):
        if len(launch["block"]) != 1:
            raise Refused("the block is not 1D: warp 0 is not threads 0 to 31 of a row")
        body_text = src.src(src.body)
        if re.search(r"\bthreadIdx\s*\.\s*[yz]\b", src.expand(body_text)):
            raise Refused("the kernel reads threadIdx.y or .z")
        env = local_constants(src, src.body, set())
        mem = Memory(src, spec)
        reasons = []
        for c in src.nodes("FOR_STMT"):
            try:
                return self._tree(src, spec, mem, env, c)
            except Refused as e:
                reasons.append(str(e))
        tree = [r for r in reasons if not r.startswith("not a halving")]
        raise Refused("no shared-memory tree reduction (" + (tree[0] if tree else "no loop halves its counter") + ")")

    def _tree(self, src, spec, mem: Memory, env, c) -> dict:
        kids = list(c.get_children())
        if len(kids) != 4:
            raise Refused("not a halving loop")
        init, cond, inc, body = kids
        if kind(init) != "DECL_STMT" or len(list(init.get_children())) != 1:
            raise Refused("not a halving loop")
        var = list(init.get_children())[0].spelling
        v = re.escape(var)
        if not re.fullmatch(rf"{v}(>>=1|/=2|={v}>>1|={v}/2|=\({v}>>1\)|=\({v}/2\))", _nospace(src.src(inc))):
            raise Refused("not a halving loop")
        if not re.fullmatch(rf"{v}>0|{v}>=1|0<{v}|1<={v}|{v}!=0|{v}>0u|{v}>0U", _nospace(src.src(cond))):
            raise Refused(f"the halving loop's condition `{squash(src.src(cond))}` is not `{var} > 0`")
        start = [k for k in list(init.get_children())[0].get_children() if kind(k) not in ("TYPE_REF", "NAMESPACE_REF")]
        if not start:        # an initializer the parse could not read (a macro without a value there)
            raise Refused(f"the halving loop's start `{squash(src.src(init))[:50]}` has no value the parse can read")
        start = start[-1]
        if re.search(r"\bthreadIdx\b", src.expand(src.src(start))) or \
                any(kind(k) in ("ARRAY_SUBSCRIPT_EXPR", "CALL_EXPR") for k in walk(start)):
            raise Refused("the tree's first step may differ between threads")
        if any(kind(p) in ("FOR_STMT", "WHILE_STMT", "DO_STMT") and p is not c and
               src.span(p)[0] < src.span(c)[0] and src.span(c)[1] <= src.span(p)[1] for p in walk(src.body)):
            raise Refused("the tree reduction is inside another loop")
        stmts = body_statements(body)
        sync = [s for s in stmts if kind(strip(s)) == "CALL_EXPR" and strip(s).spelling == "__syncthreads"]
        ifs = [s for s in stmts if kind(s) == "IF_STMT"]
        if len(stmts) != 2 or len(sync) != 1 or len(ifs) != 1:
            raise Refused("the halving loop's body is not `if (tid < s) update;` and one __syncthreads()")
        barrier_first = stmts[0] is sync[0] or src.span(stmts[0]) == src.span(sync[0])
        parts = list(ifs[0].get_children())
        if len(parts) != 2:
            raise Refused("the tree step's condition has an else branch")
        guard, then = parts
        tid = self._guard(src, env, guard, var)
        upd = body_statements(then)
        if len(upd) != 1:
            raise Refused("the tree step is not one update")
        combine, array, etype = self._update(src, mem, env, upd[0], var)
        self._reads_after(src, mem, env, c, array)
        return dict(loop=c, var=var, init=src.src(init), cond=src.src(cond), inc=src.src(inc), body=src.src(body),
                    tid=tid, combine=combine, array=array, etype=etype, barrier_first=barrier_first)

    @staticmethod
    def _is_tid(src, env, c) -> bool:
        try:
            return poly(src, c, env) == {("threadIdx.x",): 1}
        except Refused:
            return False

    def _guard(self, src, env, guard, var) -> str:
        g = strip(guard)
        if kind(g) == "BINARY_OPERATOR" and src.operator(g) in ("<", ">"):
            a, b = list(g.get_children())
            t, s = (a, b) if src.operator(g) == "<" else (b, a)
            if _nospace(src.src(s)) == var and self._is_tid(src, env, t):
                return src.src(t)
        raise Refused(f"the tree step's condition `{squash(src.src(guard))}` is not `threadIdx.x < {var}`")

    def _update(self, src, mem: Memory, env, stmt, var):
        s = strip(stmt)
        if kind(s) not in ("COMPOUND_ASSIGNMENT_OPERATOR", "BINARY_OPERATOR") or \
                kind(s) == "BINARY_OPERATOR" and src.operator(s) != "=":
            raise Refused("the tree step is not an assignment")
        op = src.operator(s)
        if kind(s) == "COMPOUND_ASSIGNMENT_OPERATOR" and op not in COMPOUND:
            raise Refused(f"the tree step's `{op}` is not associative")
        lhs, rhs = list(s.get_children())
        target = next(iter(mem.accesses(lhs)), None)
        if target is None or target.root not in mem.shared or len(target.indices) != 1 or \
                src.span(target.cursor) != src.span(strip(lhs)) or not self._is_tid(src, env, target.indices[0]):
            raise Refused("the tree step does not write a shared array at the thread's index")
        check_pure(src, rhs, "the tree step")
        reads = mem.accesses(rhs)
        own, other = [], []
        for a in reads:
            if a.root != target.root or len(a.indices) != 1:
                raise Refused(f"the tree step reads `{squash(src.src(a.cursor))[:40]}` besides the tree's array")
            try:
                p = poly(src, a.indices[0], env)
            except Refused:
                raise Refused("the tree step reads the array at an index outside the access model") from None
            if p == {("threadIdx.x",): 1}:
                own.append(a)
            elif p == {("threadIdx.x",): 1, (var,): 1}:
                other.append(a)
            else:
                raise Refused(f"the tree step reads `{squash(src.src(a.cursor))[:40]}`, not the element {var} away")
        decl = next(c for c in src.nodes("VAR_DECL") if c.spelling == target.root)
        etype = decl.type.get_canonical().element_type.spelling.replace("volatile ", "").strip()
        if etype not in SHUFFLE_TYPES:
            raise Refused(f"the tree's elements are `{etype or '?'}`, not a type warp shuffles move")
        rs, _ = src.span(rhs)
        if kind(s) == "COMPOUND_ASSIGNMENT_OPERATOR":
            if own or len(other) != 1:
                raise Refused("the tree step does not combine its element with the one further")
            return (lambda a, b: f"({a}) {COMPOUND[op]} ({b})"), target.root, etype
        if len(own) != 1 or len(other) != 1:
            raise Refused("the tree step does not combine its element with the one further")
        held = [src.span(a.cursor) for a in own + other]
        outside = [k for k in walk(rhs) if not any(x <= src.span(k)[0] and src.span(k)[1] <= y for x, y in held)]
        calls = [k for k in outside if kind(k) == "CALL_EXPR"]
        binops = [k for k in outside if kind(k) == "BINARY_OPERATOR"]
        ok = (len(calls) == 1 and calls[0].spelling in FUNCTIONS and not binops) or \
            (not calls and len(binops) == 1 and src.operator(binops[0]) in ("+", "*", "&", "|", "^"))
        if not ok:
            raise Refused(f"the tree step `{squash(src.src(s))[:50]}` is not one associative operation of the two")
        text = src.src(rhs)
        (a0, a1), (b0, b1) = src.span(own[0].cursor), src.span(other[0].cursor)

        def combine(a, b, text=text, rs=rs, spans=((a0, a1), (b0, b1))):
            out = text
            for (x, y), new in sorted(zip(spans, (a, b)), reverse=True):
                out = out[:x - rs] + f"({new})" + out[y - rs:]
            return out
        return combine, target.root, etype

    def _reads_after(self, src, mem: Memory, env, loop, array) -> None:
        ls, le = src.span(loop)
        for a in mem.accesses(src.body):
            if a.root != array or a.write and a.indices or ls <= src.span(a.cursor)[0] < le:
                continue
            try:
                zero = len(a.indices) == 1 and poly(src, a.indices[0], env) == {}
            except Refused:
                zero = False
            if not zero:
                raise Refused(f"`{squash(src.src(a.cursor))[:40]}` reads the tree's array at an element other than "
                              "0: the shuffles leave the others as partial results")

    def space(self, src, spec, launch):
        self._match(src, spec, launch)
        return {}

    def apply(self, src, spec, launch, params):
        m = self._match(src, spec, launch)
        s, e = src.span(m["loop"])
        cond_s, cond_e = src.span(list(m["loop"].get_children())[1])
        tid, var, arr = m["tid"], m["var"], m["array"]
        line = src.text[src.text.rfind("\n", 0, s) + 1:s]
        ind = line if not line.strip() else ""
        head = src.text[s:cond_s]                       # `for (unsigned s = blockDim.x / 2; `
        rest = src.text[cond_e:e]                      # `; s >>= 1) { ... }`
        first_part = head[:head.index("(") + 1] + "; "            # the counter is declared before the loops
        steps = [f"mepgen_v = {m['combine']('mepgen_v', f'__shfl_down_sync(0xffffffffu, mepgen_v, {o})')};"
                 for o in (16, 8, 4, 2, 1)]
        warp = [f"if ({var} == 32 && blockDim.x >= 32) {{"]
        if m["barrier_first"]:
            warp.append("    __syncthreads();")
        warp += [f"    if (({tid}) < 32) {{",
                 f"        {m['etype']} mepgen_v = {m['combine'](f'{arr}[{tid}]', f'{arr}[({tid}) + 32]')};",
                 *[f"        {st}" for st in steps],
                 f"        if (({tid}) == 0) {arr}[0] = mepgen_v;",
                 "    }",
                 "    __syncthreads();",
                 "} else {",
                 f"    {first_part}{m['cond']}{rest}".replace("\n", "\n    "),
                 "}"]
        text = "\n".join(["{", f"{ind}    {m['init']}",
                          f"{ind}    {first_part}{var} > 32{rest}".replace("\n", "\n    "),
                          *[f"{ind}    {w}" for w in warp], f"{ind}}}"])
        return Rewrite(src.replace([(s, e, text)]),
                       f"warp reduction: the last steps of the tree over {arr} (32 elements apart down to 1) as warp "
                       f"shuffles, one barrier instead of six")
