"""Histogram privatization: atomics on a small global array become atomics on a per-block copy in shared
memory, merged into the global array once per block (contention moves from L2 to each SM).

Applies to a grid-stride loop whose body is one `atomicAdd(&bins[INDEX], VALUE)` on a kernel parameter
whose element count in mep.yaml is a compile-time size of at most 8192 elements (32 KiB of shared
memory) and of an element type shared-memory atomics support. Refuses when the kernel already uses
shared memory or barriers, returns early, or when the loop holds anything else.

`vec=4` (the default where it applies) also reads the loop's input arrays 128 bits at a time (vector_loads'
loop: four elements per access, then the original loop as a scalar tail for n % 4), under a run-time test
that every such array is 16-byte aligned (warp-uniform; the original loop otherwise). Measured first by hand
on the H200 (bench/results/histogram_variants.md): label_counts 30.8 -> 19.4 us with vec4 at the same grid;
more copies per block or warp-aggregated atomics (__match_any_sync) did not help, aggregation cost 2-4x.
"""
from __future__ import annotations

from .analysis import body_statements, canonical_loop, check_pure, is_global_index, is_grid_stride, squash
from .base import Rewrite, Transformation
from .source import KernelSource, Refused, kind, walk
from .vector_loads import VectorLoads, vector_loop

MAX_BINS = 8192
LOCAL = "mepgen_hist"
TYPES = {"uint32": "unsigned int", "int32": "int", "float32": "float", "uint64": "unsigned long long"}


class Privatize(Transformation):
    def __init__(self):
        super().__init__("privatize_histogram", "per-block shared-memory histogram, merged once per block",
                         {"vec": 4})

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
        try:
            self._vectorized(self._privatized(src, spec)[0], spec)
        except Refused:
            return {"vec": [1]}
        return {"vec": [4, 1]}

    def apply(self, src, spec, launch, params):
        vec = int(params.get("vec", 1))         # a chain recorded before `vec` replays as it was measured
        if vec not in (1, 4):
            raise Refused(f"vec {vec}: 1 or 4")
        text, base, p = self._privatized(src, spec)
        note = ""
        if vec == 4:
            text, names = self._vectorized(text, spec)
            note = f"; {', '.join(names)} read 128 bits at a time where 16-byte aligned (run-time test)"
        return Rewrite(text, f"privatized histogram: atomics on {base} go to a per-block shared copy "
                             f"({p.count} x {TYPES[p.dtype]}), merged into {base} once per block{note}")

    def _privatized(self, src, spec):
        loop, call, base, index, value, p = self._match(src, spec)
        ctype, count = TYPES[p.dtype], f"({p.count})"
        s, e = src.span(call)
        new_call = f"atomicAdd(&{LOCAL}[{index}], {src.src(value)})"
        ls, le = src.span(loop.cursor)
        loop_text = src.text[ls:s] + new_call + src.text[e:le]
        tail = ";" if src.text[le:le + 1] == ";" else ""
        block = (f"__shared__ {ctype} {LOCAL}[{count}];\n"
                 f"    for (int mepgen_b = threadIdx.x; mepgen_b < {count}; mepgen_b += blockDim.x) "
                 f"{LOCAL}[mepgen_b] = 0;\n    __syncthreads();\n    {loop_text}{tail}\n    __syncthreads();\n"
                 f"    for (int mepgen_b = threadIdx.x; mepgen_b < {count}; mepgen_b += blockDim.x) {{\n"
                 f"        if ({LOCAL}[mepgen_b] != 0) atomicAdd(&{base}[mepgen_b], {LOCAL}[mepgen_b]);\n    }}")
        return src.replace([(ls, le + len(tail), block)]), base, p

    @staticmethod
    def _vectorized(text, spec) -> tuple[str, list[str]]:
        """The privatized kernel with its counting loop reading 128-bit vectors; Refused where vector_loads'
        rules (every input array accessed as p[i] only, 4-byte elements, its own buffer) do not hold."""
        src = KernelSource(text, spec)
        loops = [c for c in src.nodes("FOR_STMT")
                 if any(kind(a) == "CALL_EXPR" and a.spelling == "atomicAdd" and LOCAL in src.src(a)
                        for a in walk(c)) and "mepgen_b" not in src.src(c)]
        if len(loops) != 1:
            raise Refused("the counting loop was not found in the privatized kernel")
        m = VectorLoads().loop_accesses(src, spec, canonical_loop(src, loops[0]))
        s, e = src.span(loops[0])
        return src.replace([(s, e, vector_loop(src, m, aligned_test=True))]), \
            sorted({n for n, _ in m["accesses"].values()})
