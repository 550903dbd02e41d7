"""128-bit loads and stores for element-wise grid-stride loops: each step of the loop moves 4 elements of
every array through one 16-byte access (float4/int4-wide: `ld.global.v4`), then a scalar tail loop
handles the n % 4 elements left, so the kernel stays correct for any n.

The vector is a local `struct __align__(16) { T c[4]; }` of the kernel's own element type, so a template
kernel (cg::axpy<T>) stays valid for every instantiation: 4-byte elements give one 128-bit access,
8-byte ones two (still aligned). Each lane runs the original loop body with `p[i]` read from / written to
the vector and `i` redeclared, so the arithmetic per element is unchanged (no tolerance needed).

Applies to exactly: one grid-stride loop `for (int i = blockIdx.x*blockDim.x + threadIdx.x; i < n;
i += stride)` (after pure declarations such as `stride = blockDim.x * gridDim.x`) whose every pointer
use is `p[i]` on a kernel parameter that mep.yaml gives its own cudaMalloc buffer (256-byte aligned), of
4-byte elements, where n evaluates to a multiple of 4 for the MEP's sizes. Refuses a pointer offset or
passed along anywhere (`x + k`, `&x[i]`, `x[i + 1]`): the lane mapping is not provable. The vector path runs
only where every array is 16-byte aligned at run time (one warp-uniform test), the original loop otherwise:
the MEP's cudaMalloc buffers always pass it, but the application may call the patched kernel on `x + 1`.
"""
from __future__ import annotations

import re
import textwrap

from ...spec import itemsize
from .analysis import size_expr, body_statements, bound_value, canonical_loop, check_pure, element_type, is_global_index, \
    is_grid_stride, squash, vector_store, without_int_casts
from .base import Rewrite, Transformation
from .source import Refused, kind, walk

LANES = 4


class VectorLoads(Transformation):
    def __init__(self):
        super().__init__("vector_loads", "128-bit vector loads/stores with a scalar tail", {})

    def _match(self, src, spec):
        if src.shared_arrays() or "__syncthreads" in src.calls():
            raise Refused("the kernel uses shared memory or barriers")
        if src.nodes("RETURN_STMT"):
            raise Refused("the kernel returns early")
        stmts = body_statements(src.body)
        loops = [s for s in stmts if kind(s) == "FOR_STMT"]
        if len(loops) != 1 or len(src.nodes("FOR_STMT", "WHILE_STMT", "DO_STMT")) != 1:
            raise Refused("not exactly one loop (an element-wise grid-stride loop)")
        loop_c = loops[0]
        strides = {}
        for s in stmts:
            if s is loop_c or src.span(s) == src.span(loop_c):
                continue
            if kind(s) != "DECL_STMT" or src.span(s)[0] > src.span(loop_c)[0]:
                raise Refused(f"a statement other than a declaration around the loop: `{squash(src.src(s))[:50]}`")
            for v in s.get_children():
                init = list(v.get_children())
                if init:
                    check_pure(src, init[-1], f"the declaration of {v.spelling}")
                    strides[v.spelling] = squash(src.src(init[-1]))
        loop = canonical_loop(src, loop_c)
        # integer casts of the index's parts (`(size_t)blockIdx.x * ...`) are read through: the vector loop and the
        # tail copy the loop's own start and step, casts and all
        if not (is_global_index(without_int_casts(loop.lo)) or
                is_global_index(without_int_casts(strides.get(squash(loop.lo), "")))):
            raise Refused(f"the loop does not start at the global thread index: `{squash(loop.lo)}`")
        step = squash(loop.step)
        if not (is_grid_stride(without_int_casts(step)) or is_grid_stride(without_int_casts(strides.get(step, "")))):
            raise Refused(f"the loop is not a grid-stride loop (step `{step}`)")
        n = self._count(spec, size_expr(src, spec, loop.hi) or loop.hi, bound_value(src, spec, loop.hi))
        if n % LANES:
            raise Refused(f"the element count `{squash(loop.hi)}` is {n} for the MEP's sizes, not a multiple of {LANES}")
        accesses, reads, writes, top = self._accesses(src, spec, loop)
        return dict(loop=loop, accesses=accesses, reads=reads, writes=writes, top=top)

    @staticmethod
    def _count(spec, hi: str, bound: int | None = None) -> int:
        """The loop's element count for the MEP: a scalar parameter's value, an expression of the sizes, else
        `bound` (analysis.bound_value: the bound with its scalars' values and kernel.cu's macros, `rows*cols`)."""
        h = squash(hi)
        try:
            p = spec.param(h)
            value = spec.size(p.value) if p.role == "scalar" and p.value else None
        except KeyError:
            value = spec.size(h)
        if value is None:
            value = bound
        if value is None:
            raise Refused(f"the loop bound `{h}` has no value for the MEP's sizes (divisibility not provable)")
        return value

    def _accesses(self, src, spec, loop, loop_only: bool = False):
        """The loop's accesses `p[i]` to pointer parameters. `loop_only`: only the pointers the loop itself
        touches count, and atomics on anything but a pointer parameter (a shared-memory copy) are allowed."""
        pointers = {p.name for p in src.params if p.pointer}
        if loop_only:
            pointers &= {c.spelling for c in walk(loop.body) if kind(c) == "DECL_REF_EXPR"}
        if not pointers:
            raise Refused("the loop accesses no pointer parameter")
        atomics = set()
        for c in walk(loop.body):
            if kind(c) == "CALL_EXPR" and c.spelling.startswith("atomic"):
                target = [squash(src.src(a)) for a in list(c.get_arguments())[:1]]
                base = re.match(r"&\s*(\w+)\s*\[", target[0]) if target else None
                if not loop_only or base is None or base.group(1) in pointers:
                    raise Refused(f"the loop body calls {c.spelling}")
                atomics.add(src.span(c))
        stores = [c for c in walk(loop.body) if vector_store(src, c)]      # `a[i] = make_float2(...)`
        for c in walk(loop.body):
            if kind(c) == "CALL_EXPR" and src.span(c) in atomics:
                for a in c.get_arguments():
                    check_pure(src, a, f"the {c.spelling}'s arguments")
            elif kind(c) == "CALL_EXPR" and any(c is t for t in stores):
                for k in list(c.get_children())[2:]:             # the value stored (the target is counted below)
                    check_pure(src, k, "the value stored")
            elif kind(c) == "CALL_EXPR" and not any(a[0] <= src.span(c)[0] < a[1] for a in atomics) and \
                    not any(src.span(t)[0] <= src.span(c)[0] < src.span(t)[1] for t in stores):
                check_pure(src, c, "the loop body")
        subs = {}
        for c in walk(src.body):
            if kind(c) != "ARRAY_SUBSCRIPT_EXPR":
                continue
            base, index = list(c.get_children())
            name = squash(src.src(base))
            if name not in pointers:
                continue
            if squash(src.src(index)) != loop.var or not (src.span(loop.body)[0] <= src.span(c)[0] <
                                                         src.span(loop.body)[1]):
                raise Refused(f"`{squash(src.src(c))}` is not the loop's own element {name}[{loop.var}]")
            before = src.text[:src.span(c)[0]].rstrip()
            if before.endswith("&"):
                raise Refused(f"the kernel takes the address of {squash(src.src(c))}")
            subs[src.span(c)[0]] = (name, c)
        for c in walk(src.body):
            if kind(c) == "DECL_REF_EXPR" and c.spelling in pointers and src.span(c)[0] not in subs:
                raise Refused(f"pointer {c.spelling} is used other than as {c.spelling}[{loop.var}] "
                              f"(offset or passed along): its alignment is not provable")
        names = sorted({n for n, _ in subs.values()})
        if not names:
            raise Refused("the loop accesses no pointer parameter")
        roles = {p.name: p for p in spec.params}
        for n in names:
            p = roles.get(n)
            if p is None or p.role == "scalar":
                raise Refused(f"mep.yaml gives {n} no cudaMalloc buffer of its own: alignment not provable")
            if p.dtype is None or itemsize(p.dtype) != 4:
                raise Refused(f"{n} is {p.dtype}: 128-bit vectors of {LANES} need 4-byte elements")
        written, top = set(), set()
        body = body_statements(loop.body)
        for c in stores:        # a struct's store: its target is written (at the top level: by every lane)
            m = re.fullmatch(r"(\w+)\s*\[.*\]", squash(src.src(list(c.get_children())[0])))
            if m and m.group(1) in names:
                written.add(m.group(1))
                if any(c is s or src.span(c) == src.span(s) for s in body):
                    top.add(m.group(1))
        for w in src.writes(loop.body):
            target = squash(src.src(list(w.get_children())[0])) if list(w.get_children()) else ""
            # `a[i] = ...`, or a member of a struct element, `a[i].x = ...` (a partial store: the element is read
            # first, whoever writes it)
            m = re.fullmatch(r"(\w+)\s*\[[^\[\]]*\](\s*\.\s*\w+)*", target)
            if m and m.group(1) in names:
                written.add(m.group(1))
                if any(w is s or src.span(w) == src.span(s) for s in body) and src.operator(w) == "=" and \
                        not m.group(2):
                    top.add(m.group(1))
            elif kind(w) == "UNARY_OPERATOR" and any(n in src.refs(w) for n in names):
                raise Refused(f"`{squash(src.src(w))}` increments an array element")
        read = set()
        targets = {src.span(list(w.get_children())[0])[0] for w in src.writes(loop.body)
                   if list(w.get_children()) and src.operator(w) == "="}
        targets |= {src.span(list(c.get_children())[0])[0] for c in stores}
        for start, (n, c) in subs.items():
            is_target = start in targets
            if not is_target:
                read.add(n)
        return subs, read, written, top

    def space(self, src, spec, launch):
        self._match(src, spec)
        return {}

    def apply(self, src, spec, launch, params):
        m = self._match(src, spec)
        s, e = src.span(m["loop"].cursor)
        e += _semicolon(src, m["loop"])
        text = src.replace([(s, e, vector_loop(src, m, aligned_test=True))])
        return Rewrite(text, f"vector loads: {', '.join(sorted({n for n, _ in m['accesses'].values()}))} moved "
                             f"{LANES} elements per 128-bit access, scalar tail for n % {LANES}; where a buffer is not "
                             f"16-byte aligned at run time the original loop runs")

    def loop_accesses(self, src, spec, loop) -> dict:
        """For a rewrite that vectorizes one grid-stride loop of a larger kernel (privatize_histogram): the
        loop's accesses, as `vector_loop` takes them; Refused where its pointers are not all `p[i]`."""
        accesses, reads, writes, top = self._accesses(src, spec, loop, loop_only=True)
        return dict(loop=loop, accesses=accesses, reads=reads, writes=writes, top=top)


def _semicolon(src, loop) -> int:
    """1 where the loop's body is one statement without braces whose `;` lies just past the cursors' extent."""
    end = src.span(loop.body)[1]
    return 1 if kind(loop.body) != "COMPOUND_STMT" and src.text[end:end + 1] == ";" else 0


def vector_loop(src, m: dict, aligned_test: bool = False) -> str:
    """The text replacing the loop `m["loop"]`: a loop over 128-bit vectors of its arrays, then the original loop
    as a scalar tail. `aligned_test`: the vector path only where every array is 16-byte aligned at run time
    (a warp-uniform test), the original loop otherwise."""
    loop, ind = m["loop"], "    "
    etype = {n: element_type(src.param(n).type) for n, _ in m["accesses"].values()}
    vtypes = {t: f"mepgen_vec{i}" for i, t in enumerate(sorted(set(etype.values())))}
    lane = "mepgen_l"
    body_s, body_e = src.span(loop.body)
    body_e += _semicolon(src, loop)          # a body without braces: its statement's `;` (outside the cursor)
    edits = [(s - body_s, s - body_s + len(src.src(c)), f"mepgen_{n}.c[{lane}]")
             for s, (n, c) in m["accesses"].items()]
    body = src.text[body_s:body_e]
    for a, b, new in sorted(edits, reverse=True):
        body = body[:a] + new + body[b:]
    if kind(loop.body) == "COMPOUND_STMT":       # the statements, re-indented inside the lane loop
        body = textwrap.dedent(body.strip()[1:-1].strip("\n")).strip()
    body = "\n".join(f"{ind * 3}{line}".rstrip() for line in body.splitlines())
    init = src.src(list(loop.cursor.get_children())[0])
    var_type = re.match(rf"^(.*?)\b{re.escape(loop.var)}\s*=", init, re.S)
    var_type = var_type.group(1).strip() if var_type else "int"
    names = sorted(etype)
    lines = ["{", f"{ind}// mepgen vector_loads: {LANES} elements per 128-bit access, then a scalar tail"]
    lines += [f"{ind}struct __align__(16) {v} {{ {t} c[{LANES}]; }};" for t, v in vtypes.items()]
    itype = var_type.replace("const ", "").strip() or "int"      # the counter's own type (int, size_t...)
    lines += [f"{ind}const {itype} mepgen_n4 = ({loop.hi}) / {LANES};",
              f"{ind}for ({itype} mepgen_q = {loop.lo}; mepgen_q < mepgen_n4; mepgen_q += {loop.step}) {{"]
    for n in names:
        v = vtypes[etype[n]]
        if n in m["reads"] or n not in m["top"]:
            const = "const " if n not in m["writes"] else ""
            lines.append(f"{ind * 2}{const}{v} mepgen_{n} = reinterpret_cast<const {v}*>({n})[mepgen_q];")
        else:
            lines.append(f"{ind * 2}{v} mepgen_{n};")
    lines += [f"{ind * 2}#pragma unroll",
              f"{ind * 2}for (int {lane} = 0; {lane} < {LANES}; ++{lane}) {{",
              f"{ind * 3}const {itype} {loop.var} = mepgen_q * {LANES} + {lane};",
              f"{ind * 3}(void){loop.var};",
              body,
              f"{ind * 2}}}"]
    lines += [f"{ind * 2}reinterpret_cast<{vtypes[etype[n]]}*>({n})[mepgen_q] = mepgen_{n};"
              for n in names if n in m["writes"]]
    lines += [f"{ind}}}",
              f"{ind}for ({var_type} {loop.var} = mepgen_n4 * {LANES} + ({loop.lo}); {loop.var} < {loop.hi}; "
              f"{loop.var} += {loop.step}) {src.text[body_s:body_e]}",
              "}"]
    if not aligned_test:
        return "\n".join(lines)
    test = " && ".join(f"(reinterpret_cast<unsigned long long>({n}) & 15) == 0" for n in names)
    original = src.text[src.span(loop.cursor)[0]:src.span(loop.cursor)[1] + _semicolon(src, loop)]
    vector = textwrap.indent("\n".join(lines[1:-1]), ind)        # one level deeper, continuation lines too
    return "\n".join([f"if ({test}) {{", vector, f"{ind}}} else {{", ind + textwrap.indent(original, ind), f"{ind}}}"])
