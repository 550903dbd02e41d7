"""Vector loads and stores for one-element-per-thread kernels: each thread handles V consecutive elements along x (V =
4 floats or ints, 2 doubles: one 16-byte access per array where the original made V 4- or 8-byte ones), and the
grid along x shrinks by V (as coarsen's does). 2D and 3D launches too: y and z stay the same for every lane.

Proof, on the shared access model (memory_roots.Memory for the roots and what is written, affine.poly with the
kernel's local constants substituted for the index), never on the spelling:
- the kernel declares one element index `i` whose polynomial is exactly `blockIdx.x * blockDim.x + threadIdx.x`
  (the block size may be spelled as the launch's own block macro), after pure declarations only; nothing after it
  reads threadIdx.x, blockIdx.x or gridDim.x, nor a local computed from them; declarations after it that the lanes
  share (`int y = blockIdx.y * blockDim.y + threadIdx.y;`) are kept before the lanes; no loop per element (its
  threads already have work: a quarter of them would cut the parallelism), no shared memory, barrier or warp-level
  call, no early return;
- it guards its work with `if (i < X && T...)` (X and the terms T the same for every lane: nothing declared per
  lane, no memory read) and the launch's threads along x cover X for the MEP's sizes, or it has no such guard and
  the original grid is an expression the kernel can compute (kernel_expr.in_kernel): chunks stop at either bound,
  and a partial chunk runs the original work lane by lane;
- an array goes through vectors where its access is unconditional (no if, loop, ternary, `&&`/`||` above it in the
  work), names the pointer parameter itself (not a cast copy), is not passed to a function, an atomic or a member
  of an element, and has an index whose polynomial is `i + c` with c the same for every lane (scalar parameters,
  template parameters, kernel.cu's macros, y/z thread geometry) and a constant part that is a multiple of V. A
  written array must have every access so, and all at one c where it is also read (a lane never reads what
  another lane writes); a read-only one keeps its other reads (gathers, reads under a condition) scalar. No array
  that goes through vectors may share memory with one that is written (mep.yaml gives each its own buffer). Lane
  l of the chunk at g0 = (global x thread) * V touches element g0 + l + c: the vector at `p + c + g0`, aligned when
  `p + c` is (tested at run time; the original work runs lane by lane where it fails).

Each lane runs the kernel's own statements with `i` redeclared and the vector arrays' accesses read from / written
to the lane's register element: the arithmetic per element is unchanged (results are bit-identical).
"""
from __future__ import annotations

import re
import textwrap

from ...spec import itemsize
from .affine import local_constants, poly
from .analysis import body_statements, bound_value, check_pure, element_type, squash, warp_level
from .base import Rewrite, Transformation
from .coarsen_blocks import _bare, _conjuncts
from .kernel_expr import in_kernel
from .cursors import _whole_lines
from .memory_roots import Memory, leaves
from .source import Refused, kind, walk

BYTES = 16
LANES = [4, 2]
#: x's thread geometry: the lanes split it; y and z stay the same for every lane of a thread
_X_GEOMETRY = {"threadIdx.x", "blockIdx.x", "gridDim.x"}
_SAME_FOR_LANES = {"threadIdx.y", "threadIdx.z", "blockIdx.y", "blockIdx.z", "blockDim.x", "blockDim.y", "blockDim.z",
                   "gridDim.y", "gridDim.z"}
_BRANCHES = ("IF_STMT", "CONDITIONAL_OPERATOR", "FOR_STMT", "WHILE_STMT", "DO_STMT", "SWITCH_STMT",
             "CXX_FOR_RANGE_STMT")
#: element types whose size the kernel's text fixes (checked against mep.yaml's dtype)
_SIZES = {"float": 4, "int": 4, "unsigned": 4, "unsigned int": 4, "double": 8, "long long": 8, "char": 1,
          "unsigned char": 1, "short": 2, "__half": 2, "half": 2}


def _flip(op: str) -> str:
    return {">": "<", ">=": "<="}.get(op, op)


class VectorElements(Transformation):
    def __init__(self):
        super().__init__("vector_elements", "V consecutive elements per thread through 16-byte vector accesses",
                         {"lanes": 4})

    # --- the analysis --------------------------------------------------------------------------------------

    def _match(self, src, spec, launch, lanes: int) -> dict:
        if src.shared_arrays() or any(c.startswith("__syncthreads") for c in src.calls()):
            raise Refused("the kernel uses shared memory or barriers (a thread's lanes would cross them)")
        warp = warp_level(src)
        if warp:
            raise Refused(f"the kernel depends on which threads form a warp ({warp[0]})")
        env = local_constants(src, src.body, set())
        stmts = body_statements(src.body)
        var, at, g = self._index(src, spec, launch, stmts, env)
        prefix = stmts[:at]
        # a local declared before the index and assigned in the work (`float acc = 0; ... acc += ...`) is one
        # element's state: each lane declares its own copy (where nothing else before the lanes reads it)
        fresh = []
        for k, s in enumerate(prefix):
            names = {v.spelling for v in s.get_children() if kind(v) == "VAR_DECL"}
            if any(v.spelling not in env and not self._geometric(src, v, env, x_only=True)
                   for v in s.get_children() if kind(v) == "VAR_DECL") and \
                    not any(names & src.refs(o) for o in prefix[k + 1:] + [stmts[at]]):
                fresh.append(s)
        prefix = [s for s in prefix if s not in fresh]
        # what else before the index differs between lanes: x's thread geometry (`int tx = threadIdx.x;`) and
        # state that could not move into the lanes; the work may not read either
        lane_names = {var} | {v.spelling for s in prefix + fresh for v in s.get_children()
                              if kind(v) == "VAR_DECL" and (s in fresh or self._geometric(src, v, env))}
        hoisted, rest, movable, leading = [], [], True, True
        # a local the work assigns (`float acc = 1.0f; ... acc += ...`) or takes the address of is one element's
        # state however it starts: each lane declares its own, never one copy shared by the lanes
        state = _assigned(src, spec, stmts[at + 1:])
        for s in stmts[at + 1:]:
            leading = leading and kind(s) == "DECL_STMT"
            if not leading:
                rest.append(s)
                continue
            try:
                check_pure(src, s, "a declaration")
                pure = True
            except Refused:
                pure = False
            if movable and pure and not self._lane_dependent(src, s, lane_names) and \
                    not {v.spelling for v in s.get_children() if kind(v) == "VAR_DECL"} & state:
                hoisted.append(s)          # the same for every lane: declared once, before the lanes
            else:
                lane_names |= {v.spelling for v in s.get_children() if kind(v) == "VAR_DECL"}
                movable = movable and pure
                rest.append(s)
        if not rest:
            raise Refused("the kernel does nothing per element after its element index")
        for s in rest + hoisted:
            for c in walk(s):
                if kind(c) == "MEMBER_REF_EXPR" and squash(src.src(c)) in _X_GEOMETRY:
                    raise Refused(f"the kernel uses {squash(src.src(c))} beyond its element index {var}")
                if kind(c) == "DECL_REF_EXPR" and c.spelling in lane_names - {var} and c.referenced is not None \
                        and any(c.referenced == v for p_ in prefix for v in p_.get_children()):
                    raise Refused(f"the kernel uses {c.spelling} (x's thread index, or state set before the element "
                                  f"index that the lanes cannot each have) beyond its element index")
        loops = [c for s in rest for c in walk(s) if kind(c) in ("FOR_STMT", "WHILE_STMT", "DO_STMT",
                                                                 "CXX_FOR_RANGE_STMT")]
        if loops:
            raise Refused("the work loops per element: its threads already have work, a quarter of them would cut "
                          "the parallelism for the few accesses outside the loop")
        why = leaves(rest)
        if why:
            raise Refused(f"the work leaves early ({why}): every lane must run it to the end")
        body = src.text[src.span(stmts[0])[0]:src.span(src.body)[1]]
        directive = re.search(r"^[ \t]*#[ \t]*(?!pragma\b)\w+", body, re.M)
        if directive:        # the statements move into the lanes: a directive between them would not follow
            raise Refused(f"a preprocessor directive among the kernel's statements: `{directive.group(0).strip()}`")
        before = {v.spelling for s in prefix + hoisted for v in s.get_children() if kind(v) == "VAR_DECL"}
        guard = self._guard(src, spec, launch, rest, var, before, lane_names)
        work = rest[:-1] + body_statements(list(rest[-1].get_children())[1]) if guard else rest
        arrays, reasons = self._arrays(src, spec, rest, work, var, env, g, lanes)
        if not arrays:
            raise Refused("no array goes through vectors: " + ("; ".join(reasons[:3]) or
                                                                "the work accesses no pointer parameter's element"))
        return dict(var=var, index=stmts[at], fresh=fresh, hoisted=hoisted, rest=rest, guard=guard, work=work,
                    arrays=arrays, reasons=reasons)

    def _lane_dependent(self, src, c, lane_names) -> bool:
        return bool(src.refs(c) & lane_names) or any(kind(k) == "MEMBER_REF_EXPR" and squash(src.src(k)) in
                                                     _X_GEOMETRY for k in walk(c))

    def _index(self, src, spec, launch, stmts, env) -> tuple[str, int, dict]:
        """The element index: the first top-level declaration whose value is the global thread index along x."""
        block = squash(src.expand(str(launch["block"][0]))).strip("() ")
        for at, s in enumerate(stmts):
            if kind(s) != "DECL_STMT":
                break
            decls = list(s.get_children())
            for v in decls:
                init = [k for k in v.get_children() if kind(k) not in ("TYPE_REF", "NAMESPACE_REF")]
                if not init or v.spelling not in env:
                    continue
                try:
                    p = poly(src, init[-1], env)
                except Refused:
                    continue
                if self._is_global(p, block):
                    if len(decls) != 1:
                        raise Refused(f"the element index {v.spelling} is declared together with other variables")
                    return v.spelling, at, p
            check_pure(src, s, "a declaration before the element index")
        raise Refused("no element index (`blockIdx.x * blockDim.x + threadIdx.x` as the access model reads it) "
                      "declared among the kernel's first declarations")

    @staticmethod
    def _is_global(p: dict, block: str) -> bool:
        """`p` is blockIdx.x * (blockDim.x, or the launch's block as written: a macro, a size symbol or the number a
        macro expands to) + threadIdx.x."""
        blocks = {("blockDim.x", "blockIdx.x"), tuple(sorted(("blockIdx.x", block)))}
        literal = block.isdigit() and p.get(("blockIdx.x",)) == int(block)
        return len(p) == 2 and p.get(("threadIdx.x",)) == 1 and (literal or any(p.get(m) == 1 for m in blocks))

    def _geometric(self, src, decl, env, x_only: bool = False) -> bool:
        """Whether a local declared before the index may differ between the lanes' elements (it reads x's thread or
        block index, or, unless `x_only`, is assigned later or declared without a value)."""
        init = [k for k in decl.get_children() if kind(k) not in ("TYPE_REF", "NAMESPACE_REF")]
        if not init:
            return not x_only
        return any(kind(c) == "MEMBER_REF_EXPR" and squash(src.src(c)) in _X_GEOMETRY
                   for c in walk(init[-1])) or (decl.spelling not in env and not x_only)

    def _guard(self, src, spec, launch, rest, var, before, lane_names):
        """The guard of the work: a final `if (...) {...}` whose condition is a conjunction of `var < X` (or `<=`)
        and terms the same for every lane (no memory read, nothing declared per lane): {"bound": (X, op) or None,
        "terms": [the other terms' text]}. None where the last statement is no such guard (the original grid then
        bounds the chunks). Refused where the launch may not cover X."""
        last = rest[-1]
        kids = list(last.get_children())
        if kind(last) != "IF_STMT" or len(kids) != 2:
            return None
        bound, terms = None, []
        for term in _conjuncts(src, kids[0]):
            t = _bare(term)
            if bound is None and kind(t) == "BINARY_OPERATOR":
                a, b = list(t.get_children())
                op = src.operator(t)
                if squash(src.src(b)) == var and op in (">", ">="):
                    a, b, op = b, a, _flip(op)
                if squash(src.src(a)) == var and op in ("<", "<="):
                    if self._lane_dependent(src, b, lane_names) or _reads(src, b) or \
                            not self._declared(src, b, before):
                        return None
                    bound = (b, op)
                    continue
            if self._lane_dependent(src, t, lane_names) or _reads(src, t) or not self._declared(src, t, before):
                return None
            terms.append(squash(src.src(term)))
        if bound is None:
            return {"bound": None, "terms": terms}
        b, op = bound
        gx, bx = spec.size(str(launch["grid"][0])), spec.size(str(launch["block"][0]))
        if gx is None or bx is None:
            raise Refused(f"the launch along x (`{launch['grid'][0]}` x `{launch['block'][0]}`) has no value for the "
                          "MEP's sizes (whether it covers the guard's bound is not provable)")
        threads = gx * bx
        value = bound_value(src, spec, src.src(b))
        if value is None:
            raise Refused(f"the guard's bound `{squash(src.src(b))}` has no value for the MEP's sizes "
                          "(whether the launch covers it is not provable)")
        if threads < value + (op == "<="):
            raise Refused(f"the launch's {threads} threads along x do not cover the guard's bound {value}: a "
                          "shrunk grid rounded up would handle elements the original never did")
        return {"bound": (squash(src.src(b)), op), "terms": terms}

    @staticmethod
    def _declared(src, c, before: set) -> bool:
        """Every local `c` reads is declared before the lanes (a parameter, or a declaration kept there)."""
        return all(k.spelling in before for k in walk(c) if kind(k) == "DECL_REF_EXPR" and k.referenced is not None
                   and kind(k.referenced) == "VAR_DECL")

    def _arrays(self, src, spec, rest, work, var, env, g, lanes: int) -> tuple[dict, list]:
        """Pointer parameter -> {c (key) -> (c's text, [access cursors])} for the arrays that go through vectors,
        and the reasons the others do not."""
        mem = Memory(src, spec)
        top = {_key(src, s) for s in work}
        invariant = {p.name for p in src.params if not p.pointer} | set(src.template_values()) | \
            {k.spelling for k in src.fn.get_children() if kind(k) == "TEMPLATE_NON_TYPE_PARAMETER"} | \
            set(src.macros())
        params = {p.name: p for p in src.params if p.pointer}
        accesses = [a for s in rest for a in mem.accesses(s)]
        written = {a.root for a in accesses if a.write and a.root is not None}
        by_root, bad, scalar = {}, {}, {}
        for a in accesses:
            if a.root is None or a.root not in params:
                continue
            name = a.root
            if name in bad:
                continue
            why = self._why_not(src, mem, a, var, env, g, top, invariant, lanes)
            if isinstance(why, str):
                if name in written:             # every access of a written array must be a lane's own element
                    bad[name] = why
                    by_root.pop(name, None)
                else:                           # a read-only array: this read stays a scalar load
                    scalar.setdefault(name, why)
                continue
            key, c_text = why
            by_root.setdefault(name, {}).setdefault(key, [c_text, [], set()])
            by_root[name][key][1].append(a.cursor)
            by_root[name][key][2].add("w" if a.write else "r")
        for name, why in scalar.items():
            if name not in by_root and name not in bad:
                bad[name] = why
        roles = {p.name: p for p in spec.params}
        for name, groups in list(by_root.items()):
            modes = set().union(*(g_[2] for g_ in groups.values()))
            why = None
            if "w" in modes and "r" in modes and len(groups) > 1:
                why = f"{name} is written and read at {len(groups)} offsets (a lane could read another's write)"
            p = roles.get(name)
            size = itemsize(p.dtype) if p is not None and p.role != "scalar" and p.dtype else None
            etype = element_type(params[name].type)
            if size is None:
                why = why or f"mep.yaml gives {name} no buffer with a dtype of its own"
            elif _SIZES.get(etype, size) != size:
                why = why or f"{name} is {etype} but mep.yaml's dtype is {p.dtype}"
            elif size > BYTES // 2:
                why = why or f"{name}'s {size}-byte elements make no vector of two"
            if why is None:
                # a lane's write must not reach memory another array's vector holds, nor another's write this one
                others = {a.root for a in accesses} if name in written else written | \
                    {a.root for a in accesses if a.write}
                other = sorted((o for o in others - {name} if mem.may_alias(name, o)), key=str)
                if other:
                    why = f"{name} may share memory with {other[0] or 'a pointer the kernel computes'}, which " \
                          f"{'the kernel touches' if name in written else 'is written'}"
            if why:
                bad[name] = why
                del by_root[name]
        for name in list(by_root):
            by_root[name] = {"groups": by_root[name], "size": itemsize(roles[name].dtype),
                             "type": element_type(params[name].type), "written": name in written}
        return by_root, [f"{n}: {w}" for n, w in bad.items()]

    def _why_not(self, src, mem, a, var, env, g, top, invariant, lanes):
        if a.via != a.root:
            return f"accessed through {a.via or 'a computed pointer'}, not the parameter itself"
        if not a.indices:
            return "passed along, offset or dereferenced (where in it is not modelled)"
        if len(a.indices) != 1 or a.member:
            return f"`{squash(src.src(a.cursor))[:40]}` is not one whole element"
        node, p = a.cursor, mem.parent.get(a.cursor)
        while p is not None and _key(src, node) not in top:
            if kind(p) in _BRANCHES or (kind(p) == "BINARY_OPERATOR" and src.operator(p) in ("&&", "||")):
                return f"`{squash(src.src(a.cursor))[:40]}` runs under a condition or in a loop"
            if kind(p) == "CALL_EXPR" and p.spelling.startswith("atomic"):
                return f"`{squash(src.src(a.cursor))[:40]}` is an atomic's target"
            if kind(p) == "UNARY_OPERATOR" and squash(src.src(p)).startswith("&"):
                return f"the kernel takes the address of `{squash(src.src(a.cursor))[:40]}`"
            node, p = p, mem.parent.get(p)
        if _key(src, node) not in top:
            return f"`{squash(src.src(a.cursor))[:40]}` is outside the element's work"
        try:
            p_ = poly(src, a.indices[0], env)
        except Refused as e:
            return str(e)
        if any(p_.get(m) != c for m, c in g.items()):
            return f"`{squash(src.src(a.cursor))[:40]}` is not at {var} + an offset the same for every thread"
        rest = {m: c for m, c in p_.items() if m not in g}
        for m in rest:
            for at in m:
                if at.split(".")[0] not in invariant and at not in _SAME_FOR_LANES:
                    return f"`{squash(src.src(a.cursor))[:40]}`'s offset uses {at}, which may differ between lanes"
        if rest.get((), 0) % lanes:
            return f"`{squash(src.src(a.cursor))[:40]}` is {rest[()]} elements off a chunk of {lanes} (never aligned)"
        return tuple(sorted(rest.items())), _offset(rest)

    # --- the rewrite ---------------------------------------------------------------------------------------

    def _lanes(self, arrays) -> list[int]:
        widest = max(a["size"] for a in arrays.values())
        return [v for v in LANES if v * widest <= BYTES]

    def space(self, src, spec, launch):
        ok, first = [], None
        for v in LANES:
            try:
                m = self._match(src, spec, launch, v)
            except Refused as e:
                first = first or e
                continue
            if v in self._lanes(m["arrays"]):
                ok.append(v)
        if not ok:
            raise first or Refused(f"{LANES[-1]} lanes of the widest element exceed {BYTES} bytes")
        return {"lanes": ok}

    def first_point(self, src, spec, launch):
        return {"lanes": self.space(src, spec, launch)["lanes"][0]}

    def apply(self, src, spec, launch, params):
        v = int(params.get("lanes", LANES[0]))
        m = self._match(src, spec, launch, v)
        if v not in self._lanes(m["arrays"]):
            raise Refused(f"{v} lanes of the widest element exceed {BYTES} bytes")
        guard = m["guard"] or {"bound": None, "terms": []}
        if guard["bound"] is not None:
            bound, op = guard["bound"]
            limit = f"(long long)({bound})" + (" + 1" if op == "<=" else "")
        else:
            limit = f"(long long)({in_kernel(src, spec, launch['grid'][0], launch)}) * blockDim.x"
        hoisted = "\n".join(src.text[src.span(s)[0]:_end(src, s)] for s in m["hoisted"])
        edits = [(*src.span(m["index"]), (hoisted + "\n    " if hoisted else "") +
                  self._body(src, m, v, limit, guard["terms"]))]
        edits += [(*_whole_lines(src, s), "") for s in m["fresh"] + m["hoisted"] + m["rest"]]
        text = src.replace(edits)
        grid = [f"(({launch['grid'][0]}) + {v} - 1) / {v}"] + list(launch["grid"][1:])
        names = ", ".join(sorted(m["arrays"]))
        scalar = f"; scalar still: {'; '.join(m['reasons'])}" if m["reasons"] else ""
        return Rewrite(text, f"vector accesses: {v} consecutive elements per thread, {names} through "
                             f"{v}-element vectors (a lane-by-lane path where a chunk is partial or a pointer "
                             f"unaligned), grid divided by {v}{scalar}",
                       {"grid": grid, "block": list(launch["block"]), "shared_mem": str(launch.get("shared_mem", "0"))})

    def _body(self, src, m, v, limit, terms) -> str:
        ind = "    "
        index = m["index"]
        itype = re.match(rf"^(.*?)\b{re.escape(m['var'])}\s*=", src.src(index), re.S)
        itype = (itype.group(1).strip() if itype else "") or "int"
        if re.search(r"\bauto\b", itype):         # the type `auto` took from blockIdx.x * blockDim.x + threadIdx.x
            decl = next(v for v in index.get_children() if kind(v) == "VAR_DECL")
            itype = ("const " if "const" in itype.split() else "") + \
                decl.type.get_canonical().spelling.replace("const ", "")
        types, vecs, edits = {}, {}, []
        for n, (name, arr) in enumerate(sorted(m["arrays"].items())):
            vt = types.setdefault((arr["type"], arr["size"]), f"mepgen_vec{len(types)}")
            for k, (key, (c_text, cursors, modes)) in enumerate(sorted(arr["groups"].items())):
                reg = f"mepgen_{name}{k}"
                vecs[reg] = (name, vt, c_text, modes, arr["type"], arr["size"])
                edits += [(src.span(c), f"{reg}.c[mepgen_l]") for c in cursors]
        # the lane count is written once, and every size through sizeof: no other number in the kernel that could be
        # read as a baked-in block size (launch_config then still retunes the block of the rewrite)
        out = ["// mepgen vector_elements: mepgen_lanes consecutive elements per thread through vector accesses",
               f"constexpr int mepgen_lanes = {v};"]
        out += [f"struct __align__(sizeof({t}) * mepgen_lanes) {vt} {{ {t} c[mepgen_lanes]; }};"
                for (t, size), vt in types.items()]
        out.append("const long long mepgen_g0 = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * mepgen_lanes;")
        aligned = " && ".join(dict.fromkeys(
            f"(reinterpret_cast<unsigned long long>({_at(name, c)}) % sizeof({vt})) == 0"
            for name, vt, c, modes, t, size in vecs.values()))
        same = "".join(f" && ({t})" for t in terms)
        out.append(f"if (mepgen_g0 + mepgen_lanes <= {limit}{same} && {aligned}) {{")
        for reg, (name, vt, c, modes, t, size) in vecs.items():
            if "r" in modes:
                const = "" if "w" in modes else "const "
                out.append(f"{ind}{const}{vt} {reg} = *reinterpret_cast<const {vt}*>({_at(name, c)} + mepgen_g0);")
            else:
                out.append(f"{ind}{vt} {reg};")
        out += [f"{ind}#pragma unroll", f"{ind}for (int mepgen_l = 0; mepgen_l < mepgen_lanes; ++mepgen_l) {{",
                f"{ind * 2}{itype} {m['var']} = mepgen_g0 + mepgen_l;", f"{ind * 2}(void){m['var']};"]
        out += [ind * 2 + line for line in _statements(src, m["fresh"], []).splitlines()]
        out += [ind * 2 + line for line in _statements(src, m["work"], edits).splitlines()]
        out.append(f"{ind}}}")
        out += [f"{ind}*reinterpret_cast<{vt}*>({_at(name, c)} + mepgen_g0) = {reg};"
                for reg, (name, vt, c, modes, t, size) in vecs.items() if "w" in modes]
        # the lane-by-lane path (a partial chunk, a pointer off alignment) stays a loop: it is rare, and unrolled it
        # would copy the work V times more (cfd's time step: PTX 55 -> 22 ld.global, the vector path unchanged)
        out += ["} else {", f"{ind}#pragma unroll 1",
                f"{ind}for (int mepgen_l = 0; mepgen_l < mepgen_lanes; ++mepgen_l) {{",
                f"{ind * 2}if (mepgen_g0 + mepgen_l >= {limit}) break;" if not (m["guard"] or {}).get("bound") else "",
                f"{ind * 2}{itype} {m['var']} = mepgen_g0 + mepgen_l;"]
        out += [ind * 2 + line for line in _statements(src, m["fresh"], []).splitlines()]
        out += [ind * 2 + line for line in _statements(src, m["rest"], []).splitlines()]
        out += [f"{ind}}}", "}"]
        return "\n".join(ln for ln in out if ln != "").replace("\n", "\n" + ind)


def _assigned(src, spec, stmts) -> set[str]:
    """Locals that `stmts` assign or increment (memory_roots' reading of a write's target), or take the address of."""
    mem = Memory(src, spec)
    out = set()
    for s in stmts:
        out |= mem.assigned_names(s)
        out |= {n.spelling for c in walk(s) if kind(c) == "UNARY_OPERATOR" and squash(src.src(c)).startswith("&")
                for n in walk(c) if kind(n) == "DECL_REF_EXPR"}
    return out


def _reads(src, c) -> bool:
    return any(kind(k) in ("ARRAY_SUBSCRIPT_EXPR", "CALL_EXPR") or
               (kind(k) == "UNARY_OPERATOR" and squash(src.src(k)).startswith("*")) for k in walk(c))


def _key(src, c) -> tuple:
    return (*src.span(c), kind(c))


def _offset(p: dict) -> str:
    """C text of an offset polynomial in 64-bit arithmetic (the original may compute it in `long`)."""
    parts = []
    for m, c in sorted(p.items()):
        factors = [f"(long long)({a})" for a in m]
        parts.append(" * ".join(([] if c == 1 and factors else [f"{c}LL"]) + factors))
    return " + ".join(parts) or "0"


def _at(name: str, c: str) -> str:
    return name if c == "0" else f"({name} + ({c}))"


def _end(src, stmt) -> int:
    end = src.span(stmt)[1]
    rest = src.text[end:]
    stripped = rest.lstrip(" \t")
    return end + (len(rest) - len(stripped)) + 1 if stripped.startswith(";") else end


def _statements(src, stmts: list, edits: list) -> str:
    """The statements' text (with their `;`), the edits ((start, end), new) inside them applied, dedented."""
    out = []
    for s in stmts:
        a, b = src.span(s)[0], _end(src, s)
        piece = src.text[a:b]
        for (s0, e0), new in sorted((e for e in edits if a <= e[0][0] < b), reverse=True):
            piece = piece[:s0 - a] + new + piece[e0 - a:]
        lines = piece.splitlines()
        if len(lines) > 1:
            piece = lines[0] + "\n" + textwrap.dedent("\n".join(lines[1:]))
        out.append(piece)
    return "\n".join(out)
