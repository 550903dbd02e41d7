"""A small read-only table staged in shared memory: the block copies it once at the kernel's start, then every
read of the table inside the kernel's loops is served by shared memory instead of a global load per iteration
(a coefficient matrix, a filter, a lookup table read by every thread again and again).

Proof, on the kernel's syntax tree (not its spelling):
- the parameter is an input of mep.yaml (`role: in`) and the kernel never writes through it: every use of it is
  `p[index]` or the initializer of a local pointer (`T *h = (T *) p;`, never reassigned) whose every use is
  `h[index]`; anything else (arithmetic on it, passed to a function, `*p`, a write) is refused by name;
- it is read inside a loop (a read once per thread gains nothing over the cache);
- its extent, mep.yaml's count (in elements of the parameter's type), is an expression the kernel can compute:
  each size symbol is a scalar parameter that mep.yaml sets to it, or a macro of kernel.cu; it is at most
  `MAX_BYTES` for the MEP's sizes. The shared copy holds that many elements; where the application passes a
  larger table at run time (a larger size), the kernel reads the global table as before (one uniform test).

Every thread of the block reaches the copy and its barrier: they are the kernel's first statements. The reads
are the same values (a copy of a table nothing writes during the kernel): results are bit-identical.
"""
from __future__ import annotations

import re

from ...spec import itemsize
from .analysis import element_type, squash
from .base import Rewrite, Transformation
from .kernel_expr import in_kernel
from .source import Refused, kind, walk
from .warp_uniform import POSITION, thread_dependent, through

MAX_BYTES = 16 * 1024
TINY = 8          # a loop of fewer iterations (a literal bound) reads too little to pay for a block's copy
_LOOPS = ("FOR_STMT", "WHILE_STMT", "DO_STMT", "CXX_FOR_RANGE_STMT")


def _parents(root) -> dict:
    out = {}
    for c in walk(root):
        for k in c.get_children():
            out[k.hash] = c
    return out


def _subscript_base(c, parents) -> object | None:
    """The ARRAY_SUBSCRIPT_EXPR whose base is `c` (through casts), None if `c` is used otherwise."""
    node = c
    p = parents.get(node.hash)
    while p is not None and kind(p) in ("UNEXPOSED_EXPR", "PAREN_EXPR"):
        node, p = p, parents.get(p.hash)
    if p is not None and kind(p) == "ARRAY_SUBSCRIPT_EXPR" and list(p.get_children())[0].hash == node.hash:
        return p
    return None


def _strided(src, loop, dependent: set[str]) -> bool:
    """Whether the loop's header (what precedes its body) uses the thread's or block's position."""
    kids = list(loop.get_children())
    body = src.span(kids[-1])[0] if kids else src.span(loop)[1]
    header = src.expand(src.text[src.span(loop)[0]:body])
    if POSITION.search(header) is not None or set(re.findall(r"[A-Za-z_]\w*", header)) & dependent:
        return True
    tiny = re.search(r"<=?\s*\(?\s*(\d+)\s*\)?\s*;", header)      # `k < 3`: a few reads, unrolled anyway
    return tiny is not None and int(tiny.group(1)) < TINY


class StageTable(Transformation):
    def __init__(self):
        super().__init__("stage_table", "a small read-only table read in loops staged in shared memory once per block")

    def _tables(self, src, spec) -> list[dict]:
        why, out = [], []
        params = {p.name: p for p in spec.params}
        parents = _parents(src.body)
        for prm in src.params:
            sp = params.get(prm.name)
            if not prm.pointer or sp is None or sp.role == "scalar":
                continue
            try:
                out.append(self._table(src, spec, prm, sp, parents))
            except Refused as e:
                why.append(f"{prm.name}: {e}")
        if not out:
            raise Refused("no small read-only table read in a loop" + (f" ({'; '.join(why)})" if why else ""))
        return out

    def _table(self, src, spec, prm, sp, parents) -> dict:
        if sp.role != "in":
            raise Refused(f"mep.yaml's role is {sp.role}, not in")
        if sp.dtype is None or spec.size(sp.count) is None:
            raise Refused("its element count has no value for the MEP's sizes")
        lanes = sp.lanes or 1
        n = spec.size(sp.count) // lanes
        nbytes = spec.size(sp.count) * itemsize(sp.dtype)
        if nbytes > MAX_BYTES:
            raise Refused(f"{nbytes} bytes: larger than the {MAX_BYTES} a block stages")
        names, reads = {prm.name}, []
        aliases = {}
        for c in walk(src.body):                       # local pointers initialised from the table
            if kind(c) == "VAR_DECL":
                init = [k for k in c.get_children() if kind(k) not in ("TYPE_REF", "NAMESPACE_REF")]
                if init and kind(through(init[-1])) == "DECL_REF_EXPR" and through(init[-1]).spelling == prm.name \
                        and "*" in src.src(c).split("=")[0]:
                    aliases[c.spelling] = c
        written = {squash(src.src(list(w.get_children())[0])) for w in src.writes() if list(w.get_children())}
        for a in aliases:
            if a in written:
                raise Refused(f"the local pointer {a} to it is reassigned")
        names |= set(aliases)
        for c in walk(src.body):
            if kind(c) != "DECL_REF_EXPR" or c.spelling not in names:
                continue
            if c.spelling == prm.name and any(src.span(d)[0] <= src.span(c)[0] < src.span(d)[1]
                                              for d in aliases.values()):
                continue           # the alias's initializer
            sub = _subscript_base(c, parents)
            if sub is None:
                raise Refused(f"`{c.spelling}` is used other than as {c.spelling}[index]")
            if any(src.span(sub)[0] == src.span(list(w.get_children())[0])[0] for w in src.writes()
                   if list(w.get_children())) or src.text[:src.span(sub)[0]].rstrip().endswith("&"):
                raise Refused(f"`{squash(src.src(sub))}` is written or its address taken")
            reads.append(sub)
        if not reads:
            raise Refused("the kernel does not read it")
        loops = src.nodes(*_LOOPS)
        enclosing = [[l for l in loops if src.span(l)[0] <= src.span(r)[0] < src.span(l)[1]] for r in reads]
        if not any(enclosing):
            raise Refused("read only outside loops (once per thread: the cache serves it as well)")
        dependent = thread_dependent(src)
        if not any(ls and not any(_strided(src, l, dependent) for l in ls) for ls in enclosing):
            raise Refused("read in loops that stride over threads (each thread reads its own part: staging would "
                          f"read all of it in every block) or of fewer than {TINY} iterations")
        return {"param": prm, "n": n, "extent": self._extent(src, spec, sp.count, lanes),
                "type": element_type(prm.type)}

    @staticmethod
    def _extent(src, spec, count: str, lanes: int) -> str:
        """mep.yaml's count as an expression of the kernel (its scalar parameters, kernel.cu's macros)."""
        try:
            out = in_kernel(src, spec, count)
        except Refused as e:
            raise Refused(f"its extent {e}") from None
        return f"({out}) / {lanes}" if lanes > 1 else f"({out})"

    def space(self, src, spec, launch):
        self._tables(src, spec)
        return {}

    def apply(self, src, spec, launch, params):
        """The parameter is renamed (`mepgen_in_p`) and a local of its own name and type points at the staged copy:
        every use, those inside macros included, reads the copy without being edited."""
        tables = self._tables(src, spec)
        lines, edits = [], []
        tid = "(threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x"
        threads = "blockDim.x * blockDim.y * blockDim.z"
        for t in tables:
            prm = t["param"]
            p, ty, cap, g = prm.name, t["type"], t["n"], f"mepgen_in_{prm.name}"
            decl = src.text[prm.start:prm.end]
            at = prm.start + decl.rindex(p)
            edits.append((at, at + len(p), g))
            lines += [f"    __shared__ {ty} mepgen_tbl_{p}[{cap}];",
                      f"    const long long mepgen_n_{p} = (long long)({t['extent']});",
                      f"    if (mepgen_n_{p} <= {cap}) {{",
                      f"        for (long long q = {tid}; q < mepgen_n_{p}; q += {threads})",
                      f"            mepgen_tbl_{p}[q] = {g}[q];",
                      "    }"]
        lines.append("    __syncthreads();")
        for t in tables:
            p, cap = t["param"].name, t["n"]
            lines.append(f"    {t['param'].type} {p} = mepgen_n_{p} <= {cap} ? mepgen_tbl_{p} : mepgen_in_{p};")
        at = src.span(src.body)[0] + 1
        edits.append((at, at, "\n    // mepgen stage_table: small read-only tables copied to shared memory once per "
                              "block\n" + "\n".join(lines) + "\n"))
        names = ", ".join(f"{t['param'].name} ({t['n']} x {t['type']})" for t in tables)
        return Rewrite(src.replace(edits), f"staged tables: {names} copied to shared memory once per block and read "
                                           f"there in the loops (the global table where the run's is larger)")
