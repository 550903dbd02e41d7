"""Thread coarsening: a one-element-per-thread kernel makes each thread handle C elements, and the grid
shrinks by C (fewer blocks to schedule, index arithmetic and guards amortized, more loads in flight).

`strided` layout: thread k of a block handles base + c * blockDim.x (c < C), so a warp still touches
consecutive elements on every step (coalesced); `consecutive`: C neighbouring elements per thread.
The kernel's statements after its index declaration run in a loop over c with the index redeclared
per step (same name and type); each `return` becomes `continue` (it ended one element's work).

Applies to exactly: `t = blockIdx.x*blockDim.x + threadIdx.x;` declared first, then statements that
guard every element against the problem size: an early `if (t >= X) return;` (after pure declarations)
or a final `if (t < X) {...}`. Without such a guard the smaller grid rounded up could reach indices the
original launch never covered, so the rewrite refuses. Also refuses grid-stride loops (a thread already
handles several elements), shared memory and barriers, other uses of the block geometry, a `return`
loops per element (threads that already have work gain nothing and the grid loses parallelism; it
also keeps every `return` outside a loop, where `continue` ends exactly one element), and 2D/3D launches.
"""
from __future__ import annotations

import re

from .analysis import body_statements, squash, thread_index_var, uses_block_geometry
from .base import Rewrite, Transformation
from .source import Refused, kind, walk

FACTORS = [2, 4, 8]
LAYOUTS = ["strided", "consecutive"]


class Coarsen(Transformation):
    def __init__(self):
        super().__init__("coarsen", "C elements per thread, the grid divided by C",
                         {"factor": 4, "layout": "strided"})

    def _match(self, src, spec, launch):
        if len(launch["block"]) != 1 or len(launch["grid"]) != 1:
            raise Refused("the launch is not 1D")
        if "gridDim" in src.src(src.body):
            raise Refused("the kernel has a grid-stride loop (gridDim): each thread already handles several elements")
        var, decl = thread_index_var(src)
        stmts = body_statements(src.body)
        if not stmts or src.span(stmts[0]) != src.span(decl):
            raise Refused(f"the thread index {var} is not the kernel's first statement")
        rest = stmts[1:]
        if not rest:
            raise Refused("the kernel does nothing after its thread index")
        if src.shared_arrays() or "__syncthreads" in src.calls():
            raise Refused("the kernel uses shared memory or barriers")
        if src.nodes("FOR_STMT", "WHILE_STMT", "DO_STMT"):
            raise Refused("the kernel loops per element: its threads already have work, and fewer of them "
                          "would cut the parallelism (coarsening is for element-wise kernels)")
        geometry = uses_block_geometry(src, skip=[decl])
        if geometry:
            raise Refused(f"the kernel uses {geometry[0]} beyond its thread index")
        for w in src.writes():
            target = list(w.get_children())[0] if list(w.get_children()) else w
            if squash(src.src(target)) == var:
                raise Refused(f"the kernel assigns its thread index {var}")
        self._guard(src, var, rest)
        return var, decl, rest

    @staticmethod
    def _guard(src, var, rest) -> None:
        """An element guard against the problem size: early exit, or the whole tail under `t < X`."""
        for i, s in enumerate(rest):
            if kind(s) == "DECL_STMT" and not src.writes(s) and \
                    not any(kind(c) == "CALL_EXPR" for c in walk(s)):
                continue
            if kind(s) != "IF_STMT":
                break
            kids = list(s.get_children())
            cond = kids[0]
            if kind(cond) != "BINARY_OPERATOR" or len(list(cond.get_children())) != 2:
                break
            left, right = (squash(src.src(k)) for k in cond.get_children())
            op = src.operator(cond)
            early = len(kids) == 2 and any(kind(c) == "RETURN_STMT" for c in body_statements(kids[1])[:1])
            if early and ((left == var and op in (">=", ">")) or (right == var and op in ("<=", "<"))):
                return
            if len(kids) == 2 and i == len(rest) - 1 and \
                    ((left == var and op in ("<", "<=")) or (right == var and op in (">", ">="))):
                return
            break
        raise Refused(f"no guard of the thread index {var} against the problem size (`if ({var} >= n) return;` "
                      f"or `if ({var} < n) {{...}}`): a coarsened grid could reach indices never launched")

    def space(self, src, spec, launch):
        self._match(src, spec, launch)
        return {"factor": FACTORS, "layout": LAYOUTS}

    def apply(self, src, spec, launch, params):
        var, decl, rest = self._match(src, spec, launch)
        c = int(params.get("factor", 4))
        layout = params.get("layout", "strided")
        decl_text = src.src(decl).rstrip().rstrip(";")
        m = re.match(rf"^(.*?)\b{re.escape(var)}\s*=", decl_text, re.S)
        vtype = m.group(1).strip() if m and m.group(1).strip() else "const int"
        if layout == "strided":
            base = f"blockIdx.x * blockDim.x * {c} + threadIdx.x"
            step = "mepgen_base + mepgen_c * blockDim.x"
        elif layout == "consecutive":
            base = f"(blockIdx.x * blockDim.x + threadIdx.x) * {c}"
            step = "mepgen_base + mepgen_c"
        else:
            raise Refused(f"unknown layout {layout}")
        ds, de = src.span(decl)
        de = de + 1 if src.text[de:de + 1] == ";" else de
        head = (f"// mepgen coarsen: {c} elements per thread ({layout})\n"
                f"    const long long mepgen_base = (long long){base};\n"
                f"    #pragma unroll\n"
                f"    for (int mepgen_c = 0; mepgen_c < {c}; ++mepgen_c) {{\n"
                f"    {vtype} {var} = {step};")
        edits = [(ds, de, head)]
        for r in src.nodes("RETURN_STMT"):
            edits.append((*src.span(r), "continue"))
        end = src.span(src.body)[1] - 1            # the body's closing brace
        edits.append((end, end, "    }\n"))
        text = src.replace(edits)
        grid = f"(({launch['grid'][0]}) + {c} - 1) / {c}"
        return Rewrite(text, f"thread coarsening: {c} elements per thread ({layout}, the kernel's statements in a "
                             f"loop over them, `return` -> `continue`), grid divided by {c}",
                       {"grid": [grid], "block": list(launch["block"]), "shared_mem": str(launch.get("shared_mem", "0"))})
