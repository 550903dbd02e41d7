"""Warp-aggregated atomics: an atomic update of one address that every thread may make (`atomicAdd(&sum, v)`,
`if (i < n) atomicAdd(total, x[i])`) is made once per warp. The threads' values are combined by warp shuffles
first, and lane 0 updates the address with the warp's result: one atomic instead of up to 32 on the same address,
which the memory system would otherwise serialize.

    if (i < n)                                   T mepgen_wa0 = 0; bool mepgen_hit0 = false;
        atomicAdd(total, x[i] * w);              if (i < n)
                                                     (mepgen_wa0 = (x[i] * w), mepgen_hit0 = true);
                                                 if (block is whole warps) {
                                                     if (__any_sync(~0u, mepgen_hit0)) { shuffles 16 ... 1;
                                                         if (lane == 0) atomicAdd(total, mepgen_wa0); }
                                                 } else if (mepgen_hit0) atomicAdd(total, mepgen_wa0);

Proof, on the syntax tree (not its spelling; warp_uniform.py says what "the same in every lane" covers):
- the call is a statement (its result unused) inside a statement that sits in a list every thread of a warp runs
  the same number of times (`converged`: the kernel's body, a uniform loop's body, a uniform branch), with only
  `if`s, switches and loops between them. Every thread of the warp reaches the end of that statement (no `return`
  or `goto` before it), where the update is made. A loop between the two (a thread's own grid-stride loop) may
  repeat the update: the thread's values are then combined in its register first (`mepgen_wa0 = mepgen_wa0 + v`);
- its address is the same in every lane (`uniform`), reads no memory and calls nothing else; it is evaluated at
  the end of that statement instead, where it has the same value;
- from the call to the end of that statement (the whole statement where a loop repeats it), nothing mentions the
  updated variable, synchronizes (barrier, fence), shuffles or makes another atomic update that is not aggregated
  the same way. Delaying the update is invisible to this thread and unordered for the others, as the atomic was;
- the operation and the element type are ones warp shuffles combine: atomicAdd on int, unsigned, long long,
  unsigned long long, float or double; atomicOr/And/Xor/Min/Max on the integer types;
- an update that one thread of the block makes (`if (threadIdx.x == 0)`) is left alone: nothing to combine.
A block that is not whole warps (its thread count not a multiple of 32) takes the original path: each thread that
reached the update makes it. Integer results are exact; a floating-point sum is added in another order, as the
atomics' own order differs from run to run: the judge's tolerance decides.
"""
from __future__ import annotations

import re

from .analysis import WARP_LEVEL, check_pure, squash
from .base import Rewrite, Transformation
from .cursors import _past_semicolon
from .memory_roots import SYNC_CALLS, parents
from .source import Refused, kind, walk
from .warp_uniform import _WRAPPERS, assigned_names, callee, converged, thread_dependent, through, uniform

OPERATIONS = {"atomicAdd": "+", "atomicOr": "|", "atomicAnd": "&", "atomicXor": "^", "atomicMin": "min",
              "atomicMax": "max"}
INTEGERS = ("int", "unsigned int", "long long", "unsigned long long")
FLOATS = ("float", "double")
_LOOPS = ("FOR_STMT", "WHILE_STMT", "DO_STMT", "CXX_FOR_RANGE_STMT")
_LANE = "(((threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x) & 31u)"
_MAXIMA = {"int": ("0x7fffffff", "(-0x7fffffff - 1)"), "unsigned int": ("0xffffffffu", "0u"),
           "long long": ("0x7fffffffffffffffLL", "(-0x7fffffffffffffffLL - 1)"),
           "unsigned long long": ("0xffffffffffffffffULL", "0ULL")}


def identity(op: str, concrete: str, ty: str) -> str:
    """The value that leaves any other unchanged under `op`, for a thread that did not reach the update."""
    if op in ("+", "|", "^"):
        return f"({ty})0"
    if op == "&":
        return f"({ty})~({ty})0"
    most, least = _MAXIMA[concrete]
    return f"({ty}){most}" if op == "min" else f"({ty}){least}"


def combine(op: str, a: str, b: str) -> str:
    if op == "min":
        return f"(({b}) < ({a}) ? ({b}) : ({a}))"
    if op == "max":
        return f"(({b}) > ({a}) ? ({b}) : ({a}))"
    return f"({a}) {op} ({b})"


def arguments(call) -> list:
    args = list(call.get_arguments())
    return args if args or call.spelling else list(call.get_children())[1:]


class WarpAtomics(Transformation):
    def __init__(self):
        super().__init__("warp_atomics", "an atomic update of one address made once per warp, the threads' values "
                                         "combined by warp shuffles first")

    # --- analysis -------------------------------------------------------------------------------------------

    def _sites(self, src, spec) -> list[dict]:
        par = parents(src.body)
        assigned = assigned_names(src)
        sites, why, dependent = [], [], None
        for call in src.nodes("CALL_EXPR"):
            if callee(call) not in OPERATIONS:
                continue
            dependent = thread_dependent(src) if dependent is None else dependent
            try:
                sites.append(self._site(src, spec, par, assigned, dependent, call))
            except Refused as e:
                why.append(f"`{squash(src.src(call))[:50]}`: {e}")
        while True:                      # an update followed by one left as it is stays as it is, too
            kept = [s for s in sites if self._nothing_after(src, s, sites, why)]
            if len(kept) == len(sites):
                break
            sites = kept
        if not sites:
            raise Refused("no atomic update of one address that every thread of a warp makes"
                          + (f" ({why[0]})" if why else " (no atomicAdd, atomicOr/And/Xor or atomicMin/Max)"))
        return sites

    def _site(self, src, spec, par, assigned, dependent: set[str], call) -> dict:
        stmt = call
        p = par.get(stmt)
        while p is not None and kind(p) in _WRAPPERS:
            stmt, p = p, par.get(p)
        if not self._statement(p, stmt):
            raise Refused("its result is used (it is not a statement of its own)")
        outer, ctx, looped = self._outer(src, par, stmt, assigned)
        warp = sorted({callee(c) for c in walk(outer) if kind(c) == "CALL_EXPR" and callee(c).startswith(WARP_LEVEL)})
        if warp:                # an update aggregated already (this rewrite applied before), or the kernel's own
            raise Refused(f"its statement exchanges values within the warp already ({', '.join(warp)})")
        self._many_threads(src, par, call, outer, dependent)
        end = _past_semicolon(src.text, src.span(outer)[1])
        for c in walk(src.body):
            if kind(c) in ("RETURN_STMT", "GOTO_STMT", "INDIRECT_GOTO_STMT", "LABEL_STMT") and \
                    src.span(c)[0] < end:
                raise Refused("a `return` or `goto` before it: not every thread reaches the statement after it")
        name = callee(call)
        args = arguments(call)
        if len(args) != 2:
            raise Refused(f"{name} with {len(args)} arguments")
        addr, value = args
        op = OPERATIONS[name]
        ty, concrete = self._element(src, spec, addr)
        if concrete not in (INTEGERS + FLOATS if op == "+" else INTEGERS):
            raise Refused(f"{name} on `{concrete}`: not a type warp shuffles combine for it")
        check_pure(src, addr, "its address")
        roots = uniform(src, addr, src.span(outer)[0], assigned, ctx)
        return dict(call=call, stmt=stmt, outer=outer, end=end, addr=addr, value=value, op=op, ty=ty,
                    concrete=concrete, roots=roots, name=name, looped=looped)

    @staticmethod
    def _statement(p, stmt) -> bool:
        """Whether `stmt` is a statement of `p`: one of a block, a branch of an `if`, a loop's body or a case's;
        never a condition or a loop's header (where `for (...; atomicAdd(...) < n; )` uses its value)."""
        if p is None:
            return False
        kids = list(p.get_children())
        k = kind(p)
        if k == "COMPOUND_STMT":
            return True
        if k == "IF_STMT":
            return kids[0] != stmt
        if k in ("FOR_STMT", "WHILE_STMT", "CXX_FOR_RANGE_STMT", "CASE_STMT", "DEFAULT_STMT", "LABEL_STMT"):
            return kids[-1] == stmt
        return k == "DO_STMT" and kids[0] == stmt

    def _outer(self, src, par, stmt, assigned) -> tuple:
        """(the statement around the update that sits in a statement list every thread of a warp runs the same
        number of times, that list's context (`_converged`), whether a loop between them may repeat the update)."""
        node, looped = stmt, False
        while True:
            up = par.get(node)
            if up is None:
                raise Refused("not inside the kernel's body")
            if kind(up) == "COMPOUND_STMT":
                ctx = converged(src, par, up, assigned)
                if ctx is not None:
                    return node, ctx, looped
            elif kind(up) in _LOOPS:
                looped = True
            elif kind(up) not in ("IF_STMT", "SWITCH_STMT", "CASE_STMT", "DEFAULT_STMT"):
                raise Refused(f"inside a `{kind(up).lower()}`")
            node = up

    @staticmethod
    def _many_threads(src, par, call, outer, dependent: set[str]) -> None:
        """Refused where an `if` around the update lets one thread of the block through (`threadIdx.x == 0`): a
        single update has nothing to combine, and the shuffles would only cost."""
        node = call
        while node != outer:
            up = par.get(node)
            if up is None:
                break
            if kind(up) == "IF_STMT" and list(up.get_children())[1] == node:
                cond = src.expand(src.src(list(up.get_children())[0]))
                names = set(re.findall(r"[A-Za-z_]\w*", cond))
                if ("==" in cond or re.search(r"!\s*\(?\s*threadIdx", cond)) and "[" not in cond and \
                        ("threadIdx" in names or names & dependent):
                    raise Refused(f"made by one thread of the block (`{squash(src.src(list(up.get_children())[0]))[:40]}`"
                                  "): nothing to combine")
            node = up

    @staticmethod
    def _element(src, spec, addr) -> tuple[str, str]:
        """(the element's type as the rewrite declares it, its concrete type)."""
        t = addr.type.get_pointee()
        if not t.spelling:             # a template's dependent `&sum`: the type of what the address is taken of
            a = through(addr)
            kids = list(a.get_children()) if kind(a) == "UNARY_OPERATOR" else []
            t = kids[0].type if len(kids) == 1 and [x.spelling for x in a.get_tokens()][:1] == ["&"] else t
        if not t.spelling or "dependent" in t.spelling:     # `p + k` on a `T *p`: the pointer's element type
            pointers = [c for c in walk(addr) if kind(c) == "DECL_REF_EXPR" and c.type.spelling.rstrip().endswith("*")]
            t = pointers[0].type.get_pointee() if len(pointers) == 1 else t
        spelled = t.spelling.replace("volatile ", "").replace("const ", "").strip()
        canon = t.get_canonical().spelling.replace("volatile ", "").replace("const ", "").strip()
        canon = {"unsigned": "unsigned int", "long long int": "long long",
                 "unsigned long long int": "unsigned long long"}.get(canon, canon)
        if canon.startswith("type-parameter-"):     # a template's element type: the argument mep.yaml launches with
            every = [k for k in src.fn.get_children() if kind(k) in ("TEMPLATE_TYPE_PARAMETER",
                                                                     "TEMPLATE_NON_TYPE_PARAMETER",
                                                                     "TEMPLATE_TEMPLATE_PARAMETER")]
            args = [str(a).strip() for a in spec.kernel.template_args]
            at = next((i for i, k in enumerate(every) if k.spelling == spelled), None)
            canon = args[at] if at is not None and at < len(args) else "?"
            canon = {"unsigned": "unsigned int"}.get(canon, canon)
        return (spelled or canon), canon

    def _nothing_after(self, src, site, sites, why) -> bool:
        """Nothing between the update and the end of its outermost statement sees the delay (module doc)."""
        # a loop around the update repeats the statements before it too: the whole statement is after it then
        start = src.span(site["outer"])[0] if site["looped"] else src.span(site["call"])[1]
        moved = {s["call"].hash for s in sites}
        addresses = [src.span(s["addr"]) for s in sites if s is not site or site["looped"]]   # evaluated after
        for c in walk(site["outer"]):
            if src.span(c)[0] < start or any(a <= src.span(c)[0] < b for a, b in addresses):
                continue
            name = callee(c) if kind(c) == "CALL_EXPR" else ""
            if name in SYNC_CALLS or name.startswith("__shfl") or name.startswith("atomic") and c.hash not in moved:
                why.append(f"`{squash(src.src(site['call']))[:50]}`: `{name}` follows it in the same statement")
                return False
            if kind(c) == "DECL_REF_EXPR" and c.spelling in site["roots"]:
                why.append(f"`{squash(src.src(site['call']))[:50]}`: {c.spelling} is used after it in the same "
                           "statement")
                return False
            if kind(c) in ("GCC_ASM_STMT", "MS_ASM_STMT"):
                why.append("inline assembly follows it")
                return False
        return True

    # --- rewrite --------------------------------------------------------------------------------------------

    def space(self, src, spec, launch):
        self._sites(src, spec)
        return {}

    def apply(self, src, spec, launch, params):
        sites = self._sites(src, spec)
        edits, before, after = [], {}, {}
        first = len(re.findall(r"\bmepgen_hit\d+\s*=\s*false", src.text))     # names of an earlier application
        for k, s in enumerate(sites, start=first):
            v, hit = f"mepgen_wa{k}", f"mepgen_hit{k}"
            cs, ce = src.span(s["call"])
            value = f"({src.src(s['value'])})"
            kept = combine(s["op"], v, value) if s["looped"] else value     # a loop may repeat it: accumulated
            edits.append((cs, ce, f"({v} = {kept}, {hit} = true)"))
            os_ = src.span(s["outer"])[0]
            line = src.text.rfind("\n", 0, os_) + 1
            ind = src.text[line:os_] if not src.text[line:os_].strip() else "    "
            before.setdefault(os_, (ind, []))[1].append(
                f"{s['ty']} {v} = {identity(s['op'], s['concrete'], s['ty'])}; bool {hit} = false;")
            addr = src.src(s["addr"])
            # the lane's neighbour read once, by every lane (a shuffle inside `?:` would run in some lanes only)
            steps = f"{{ {s['ty']} mepgen_n = __shfl_down_sync(0xffffffffu, {v}, mepgen_o); " \
                    f"{v} = {combine(s['op'], v, 'mepgen_n')}; }}"
            after.setdefault(s["end"], (ind, []))[1].extend([
                "if ((blockDim.x * blockDim.y * blockDim.z) % 32u == 0u) {   // mepgen warp_atomics: whole warps",
                f"    if (__any_sync(0xffffffffu, {hit})) {{",
                "        for (int mepgen_o = 16; mepgen_o > 0; mepgen_o >>= 1)",
                f"            {steps}",
                f"        if ({_LANE} == 0u) {s['name']}({addr}, {v});",
                "    }",
                f"}} else if ({hit}) {{",
                f"    {s['name']}({addr}, {v});",
                "}"])
        for at, (ind, lines) in before.items():
            edits.append((at, at, "".join(f"{x}\n{ind}" for x in lines)))
        for at, (ind, lines) in after.items():
            edits.append((at, at, "\n" + "\n".join(f"{ind}{x}" for x in lines)))
        names = ", ".join(f"{s['name']} on `{squash(src.src(s['addr']))[:30]}`" for s in sites)
        return Rewrite(src.replace(edits), f"warp-aggregated atomics: {names} made once per warp, the threads' "
                                           f"values combined by shuffles first (one atomic instead of up to 32)")
