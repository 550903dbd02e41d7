"""Histogram privatization: atomics on a small global array become atomics on a per-block copy in shared
memory, merged into the global array once per block (contention moves from L2 to each SM).

Applies to a grid-stride loop whose body is one `atomicAdd(&bins[INDEX], VALUE)` on a kernel parameter
whose element count in mep.yaml is a compile-time size of at most 8192 elements (32 KiB of shared
memory) and of an element type shared-memory atomics support. Refuses when the kernel already uses
shared memory or barriers, returns early, or when the loop holds anything else.
"""
from __future__ import annotations

from .analysis import body_statements, canonical_loop, check_pure, is_global_index, is_grid_stride, squash
from .base import Rewrite, Transformation
from .source import Refused, kind, walk

MAX_BINS = 8192
TYPES = {"uint32": "unsigned int", "int32": "int", "float32": "float", "uint64": "unsigned long long"}


class Privatize(Transformation):
    def __init__(self):
        super().__init__("privatize_histogram", "per-block shared-memory histogram, merged once per block", {})

    def _match(self, src, spec):
        if src.shared_arrays() or "__syncthreads" in src.calls():
            raise Refused("the kernel already uses shared memory or barriers")
        if src.nodes("RETURN_STMT"):
            raise Refused("the kernel returns early (every thread must reach the barriers)")
        loops = src.nodes("FOR_STMT")
        if len(loops) != 1:
            raise Refused("not exactly one loop")
        loop = canonical_loop(src, loops[0])
        if not is_global_index(loop.lo) or not is_grid_stride(loop.step):
            if not (is_grid_stride(loop.step) or src.text.count(squash(loop.step)) > 0 and
                    any("gridDim" in src.src(c) for c in walk(src.body) if kind(c) == "VAR_DECL"
                        and c.spelling == squash(loop.step))):
                raise Refused("the loop is not a grid-stride loop over the input")
        stmts = body_statements(loop.body)
        if len(stmts) != 1 or kind(stmts[0]) != "CALL_EXPR" or stmts[0].spelling != "atomicAdd":
            raise Refused("the loop body is not a single atomicAdd")
        call = stmts[0]
        args = list(call.get_arguments())
        target = squash(src.src(args[0]))
        if not target.startswith("&") or "[" not in target:
            raise Refused(f"atomicAdd on `{target}`, not on an array element")
        base = target[1:target.index("[")].strip()
        index = src.text[src.span(args[0])[0]:src.span(args[0])[1]]
        index = index[index.index("[") + 1:index.rindex("]")]
        for a in args[1:]:
            check_pure(src, a, "the atomic's value")
        try:
            p = spec.param(base)
        except KeyError:
            raise Refused(f"{base} is not a kernel parameter") from None
        n = spec.size(p.count)
        if n is None or n > MAX_BINS:
            raise Refused(f"{base} has {p.count} elements: not a compile-time count of at most {MAX_BINS}")
        if p.dtype not in TYPES:
            raise Refused(f"{base} is {p.dtype}: no shared-memory atomicAdd for it")
        for c in src.writes():
            if base in src.refs(c):
                raise Refused(f"{base} is also written outside the atomic")
        return loop, call, base, index, args[1], p

    def space(self, src, spec, launch):
        self._match(src, spec)
        return {}

    def apply(self, src, spec, launch, params):
        loop, call, base, index, value, p = self._match(src, spec)
        ctype, count = TYPES[p.dtype], f"({p.count})"
        local = "mepgen_hist"
        s, e = src.span(call)
        new_call = f"atomicAdd(&{local}[{index}], {src.src(value)})"
        ls, le = src.span(loop.cursor)
        loop_text = src.text[ls:s] + new_call + src.text[e:le]
        tail = ";" if src.text[le:le + 1] == ";" else ""
        block = (f"__shared__ {ctype} {local}[{count}];\n"
                 f"    for (int mepgen_b = threadIdx.x; mepgen_b < {count}; mepgen_b += blockDim.x) "
                 f"{local}[mepgen_b] = 0;\n    __syncthreads();\n    {loop_text}{tail}\n    __syncthreads();\n"
                 f"    for (int mepgen_b = threadIdx.x; mepgen_b < {count}; mepgen_b += blockDim.x) {{\n"
                 f"        if ({local}[mepgen_b] != 0) atomicAdd(&{base}[mepgen_b], {local}[mepgen_b]);\n    }}")
        text = src.replace([(ls, le + len(tail), block)])
        return Rewrite(text, f"privatized histogram: atomics on {base} go to a per-block shared copy "
                             f"({p.count} x {ctype}), merged into {base} once per block")
