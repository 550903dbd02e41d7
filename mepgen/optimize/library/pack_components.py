"""A thread's adjacent components through one vector access: where a thread reads (or writes) the K elements
`p[K*q + c0]` ... `p[K*q + c0 + K - 1]` of one pointer parameter in a run of straight-line statements (the two
halves of an interleaved complex number, the four channels of an RGBA pixel, x/y/z/w of a particle), the K scalar
accesses become one access of K * sizeof(T) bytes (4, 8 or 16: `ld.global.v2`/`.v4`, one 32-bit store for four
bytes).

    const float re = x[2 * k];              mepgen_pk0 mepgen_v0;                     // union { float c[2]; uint2 w; }
    const float im = x[2 * k + 1];    ->    <x[2*k] as one 8-byte load, or element by element where unaligned>
                                            const float re = mepgen_v0.c[0];
                                            const float im = mepgen_v0.c[1];

Proven on the access model (memory_roots.Memory) and the index polynomials (affine.poly, the kernel's local
constants substituted), never on the spelling:
- each access is `p[index]` on a pointer parameter `p` (not volatile), unconditional in its statement (no `?:`,
  `&&`/`||` or condition above it), one index whose polynomial is R + c with the same R for every component, R's
  coefficients all multiples of K and every name it reads an integer, and the K constants c0..c0+K-1 with c0 a
  multiple of K: the group's first element is aligned to the vector whenever `p` is (checked at run time anyway);
- the statements from the first access of the group to its last (the run) are straight-line: no if, loop, switch,
  return, break, continue, goto, lambda or asm in them, and no call that may have side effects (a barrier or fence
  included), so when the run starts it runs to its end;
- loads: no write in the run may reach p's memory (another parameter mep.yaml gives a buffer of its own, a shared
  or local array; an atomic counts as a write, a pointer of unknown origin as any memory), so reading every
  component before the run reads what each load read;
- stores: each one is a statement `p[index] = value;`, and nothing else in the run reads or writes memory that may
  be p's, so writing every component after the run leaves memory as the K stores left it;
- the names every index reads (and `p`) are declared before the run and not assigned in it, so the indices have the
  same values before, during and after it.
The vector access runs only where its address is aligned to the vector (a test per group, the same in every thread
of the launch when `p` is the same, as a parameter is); elsewhere each component is read or written by itself.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from ...spec import itemsize
from .affine import local_constants, poly
from .analysis import element_type, pure_call, squash
from .base import Rewrite, Transformation
from .cursors import _past_semicolon, _unwrap
from .hoist_loads import unconditional
from .memory_roots import Memory, _id
from .source import Refused, kind, walk

#: the vector widths in bytes one access may move (ld/st .v4.b32, .v2.b32, .b32)
WIDTHS = (16, 8, 4)
#: the word each width moves as, whatever the element type: the components share its bytes (a union), so bytes and
#: halves move as one 32-bit access where a struct of them would be copied member by member
WORD = {16: "uint4", 8: "uint2", 4: "unsigned int"}
#: statements or expressions after which the rest of a run might not run, or runs more than once
CONTROL = ("IF_STMT", "FOR_STMT", "WHILE_STMT", "DO_STMT", "SWITCH_STMT", "RETURN_STMT", "BREAK_STMT",
           "CONTINUE_STMT", "GOTO_STMT", "INDIRECT_GOTO_STMT", "LAMBDA_EXPR", "ASM_STMT", "GCC_ASM_STMT",
           "MS_ASM_STMT", "CXX_TRY_STMT", "CXX_THROW_EXPR")
_INTEGER = {"BOOL", "CHAR_U", "UCHAR", "CHAR16", "CHAR32", "USHORT", "UINT", "ULONG", "ULONGLONG", "UINT128",
            "CHAR_S", "SCHAR", "WCHAR", "SHORT", "INT", "LONG", "LONGLONG", "INT128", "ENUM"}


@dataclass
class Group:
    compound: object                 # the compound statement whose run holds the group
    first: int                       # index of the run's first statement among the compound's children
    last: int
    param: str
    store: bool
    width: int                       # bytes moved by the one access
    parts: list = field(default_factory=list)     # component k -> the accesses (cursors) of p[R + c0 + k]


def _top(mem: Memory, cursor):
    """(statement, compound): the statement of the innermost compound statement that holds `cursor`."""
    node, p = cursor, mem.parent.get(_id(cursor))
    while p is not None and kind(p) != "COMPOUND_STMT":
        node, p = p, mem.parent.get(_id(p))
    return (node, p) if p is not None else (None, None)


def _names(src, cursor, env: dict, seen=None) -> list:
    """The name references an index reads, through the local constants it was read through (`base` of `p[base + 1]`
    and the names of `base`'s initializer)."""
    seen = set() if seen is None else seen
    out = []
    for n in walk(cursor):
        if kind(n) in ("DECL_REF_EXPR", "MEMBER_REF_EXPR") and _id(n) not in seen:
            seen.add(_id(n))
            out.append(n)
            if kind(n) == "DECL_REF_EXPR" and n.spelling in env:
                out += _names(src, env[n.spelling], env, seen)
    return out


class PackComponents(Transformation):
    def __init__(self):
        super().__init__("pack_components", "a thread's adjacent components through one 4/8/16-byte access")

    # --- the analysis -------------------------------------------------------------------------------------------

    def _candidates(self, src, spec, mem, reasons) -> dict:
        """(compound, param, store, R) -> {constant c: [(access cursor, statement position)]}."""
        env = local_constants(src, src.body, set())
        builtin = _builtin_elements(src)
        pointers = {p.name: p for p in src.params if p.pointer and p.name in builtin}
        dtypes = {p.name: p.dtype for p in spec.params}
        groups: dict = {}
        for a in mem.accesses(src.body):
            p = pointers.get(a.via) if a.via == a.root else None
            if p is None or len(a.indices) != 1 or a.member:
                continue
            if "volatile" in p.type or not dtypes.get(p.name) or itemsize(dtypes[p.name]) not in (1, 2, 4, 8):
                continue
            if not re.fullmatch(rf"\s*{re.escape(p.name)}\s*\[[\s\S]*\]\s*", src.src(a.cursor)):
                continue                                    # spelled through a macro
            stmt, compound = _top(mem, a.cursor)
            if stmt is None or not unconditional(src, mem, a, {_id(stmt)}):
                continue
            if a.write:
                kids = list(stmt.get_children())
                if kind(stmt) != "BINARY_OPERATOR" or src.operator(stmt) != "=" or \
                        _id(_unwrap(kids[0])) != _id(a.cursor):
                    continue                                # `p[i] += v`, `&p[i]`, `x = p[i] = v`: not a plain store
            try:
                pl = poly(src, a.indices[0], env)
            except Refused as e:
                reasons.append(f"{squash(src.src(a.cursor))[:40]}: {e}")
                continue
            if not all(_integer(n) for n in _names(src, a.indices[0], env)):
                continue
            rest = tuple(sorted((m, c) for m, c in pl.items() if m != ()))
            pos = [_id(s) for s in compound.get_children()].index(_id(stmt))
            key = (_id(compound), p.name, a.write, rest)
            groups.setdefault(key, {"compound": compound, "parts": {}})["parts"].setdefault(pl.get((), 0), []).append(
                (a.cursor, pos))
        return groups

    def _run_ok(self, src, mem, g: Group, index_cursors) -> str | None:
        """Why the run of `g` may not be read or written at once, or None."""
        run = list(g.compound.get_children())[g.first:g.last + 1]
        for s in run:
            bad = next((n for n in walk(s) if kind(n) in CONTROL), None)
            if bad is not None:
                return f"`{squash(src.src(bad))[:40]}` between the components may skip or repeat a part of the run"
            call = next((c for c in walk(s) if kind(c) == "CALL_EXPR" and not pure_call(src, c)), None)
            if call is not None:
                return f"the run calls `{call.spelling or squash(src.src(call))[:30]}`, which may have side effects"
        mine = {_id(c) for part in g.parts for c, _ in part}
        for s in run:
            for acc in mem.accesses(s):
                if _id(acc.cursor) in mine or not mem.may_alias(acc.root, g.param):
                    continue
                if acc.write or g.store:
                    return f"`{squash(src.src(acc.cursor))[:40]}` in the run may touch {g.param}'s components"
        names = {g.param} | {n.spelling for c in index_cursors for n in walk(c)
                             if kind(n) == "DECL_REF_EXPR"}
        for s in run:
            for n in walk(s):
                if kind(n) == "VAR_DECL" and n.spelling in names:
                    return f"{n.spelling}, which an index reads, is declared in the run"
            for w in src.writes(s):
                kids = list(w.get_children())
                target = squash(src.src(kids[0])) if kids else ""
                if target in names:
                    return f"{target}, which an index reads, is assigned in the run"
        return None

    def _groups(self, src, spec, reasons: list[str] | None = None) -> list[Group]:
        """The groups to pack; Refused, with the first reason of `reasons` (every one kept there), when none is."""
        mem = Memory(src, spec)
        reasons = [] if reasons is None else reasons
        out: list[Group] = []
        dtypes = {p.name: p.dtype for p in spec.params}
        for (_, name, store, rest), found in self._candidates(src, spec, mem, reasons).items():
            size = itemsize(dtypes[name])
            consts = found["parts"]
            taken: set = set()
            for width in WIDTHS:
                k = width // size
                if k not in (2, 4) or any(c % k for _, c in rest):
                    continue
                for c0 in sorted(consts):
                    span = range(c0, c0 + k)
                    if c0 % k or any(c not in consts or c in taken for c in span):
                        continue
                    parts = [consts[c] for c in span]
                    positions = [pos for part in parts for _, pos in part]
                    g = Group(found["compound"], min(positions), max(positions), name, store, width, parts)
                    if store and any(len(part) != 1 for part in parts):
                        reasons.append(f"a component of {name} is stored twice in one run")
                        continue
                    why = self._run_ok(src, mem, g, [_index(c) for part in parts for c, _ in part])
                    if why:
                        reasons.append(why)
                        continue
                    taken |= set(span)
                    out.append(g)
        if not out:
            raise Refused("no run of straight-line statements reads or writes a thread's adjacent components "
                          "(p[K*q + c], c = 0..K-1) of one array" + (f" ({reasons[0]})" if reasons else ""))
        return out

    def space(self, src, spec, launch):
        self._groups(src, spec)
        return {}

    # --- the rewrite --------------------------------------------------------------------------------------------

    def apply(self, src, spec, launch, params):
        groups = self._groups(src, spec)
        pointers = {p.name: p for p in src.params if p.pointer}
        replace, before, after = [], {}, {}
        said = []
        for n, g in enumerate(groups):
            t = element_type(pointers[g.param].type)
            k = len(g.parts)
            pack, var = f"mepgen_pk{n}", f"mepgen_{'s' if g.store else 'v'}{n}"
            idx = [squash(src.src(_index(part[0][0]))) for part in g.parts]
            at = f"&{g.param}[{idx[0]}]"
            aligned = f"reinterpret_cast<unsigned long long>({at}) % {g.width} == 0"
            run = list(g.compound.get_children())
            start = _line_start(src, run[g.first])
            ind = src.text[start:src.span(run[g.first])[0]]
            word = WORD[g.width]
            head = [f"union {pack} {{ {t} c[{k}]; {word} w; }};", f"{pack} {var};"]
            if g.store:
                end = _past_semicolon(src.text, src.span(run[g.last])[1])
                tail = f"\n{ind}if ({aligned}) *reinterpret_cast<{word}*>({at}) = {var}.w;\n{ind}else {{ " + \
                    " ".join(f"{g.param}[{i}] = {var}.c[{j}];" for j, i in enumerate(idx)) + " }"
                after.setdefault(end, []).append(tail)
            else:
                head += [f"if ({aligned}) {var}.w = *reinterpret_cast<const {word}*>({at});",
                         "else { " + " ".join(f"{var}.c[{j}] = {g.param}[{i}];" for j, i in enumerate(idx)) + " }"]
            before.setdefault(start, []).append("".join(f"{ind}{h}\n" for h in head))
            for j, part in enumerate(g.parts):
                replace += [(*src.span(c), f"{var}.c[{j}]") for c, _ in part]
            said.append(f"{k} {'stores to' if g.store else 'loads of'} {g.param}[{idx[0]}..] as one {g.width}-byte "
                        f"access")
        # at one offset, a run's stores land before the next run's loads start
        edits = replace + [(p, p, "".join(after.get(p, [])) + "".join(before.get(p, [])))
                           for p in sorted(set(before) | set(after))]
        return Rewrite(src.replace(edits), "packed components: " + "; ".join(said) +
                       " (element by element where the address is not aligned to the vector)")


#: element types a union may hold as they are (a class such as __half may have no trivial constructor)
_BUILTIN = _INTEGER - {"ENUM"} | {"FLOAT", "DOUBLE", "HALF", "FLOAT16"}


def _builtin_elements(src) -> set[str]:
    """The pointer parameters whose element type is a built-in number."""
    out = set()
    for c in src.fn.get_children():
        t = c.type.get_canonical() if kind(c) == "PARM_DECL" else None
        if t is not None and t.kind.name == "POINTER" and t.get_pointee().get_canonical().kind.name in _BUILTIN:
            out.add(c.spelling)
    return out


def _integer(name) -> bool:
    """Whether a name an index reads holds an integer (a struct or pointer it reads through holds one in the member
    that is read, which is checked in turn)."""
    t = name.type.get_canonical()
    if t.kind.name in ("LVALUEREFERENCE", "RVALUEREFERENCE"):
        t = t.get_pointee().get_canonical()
    return t.kind.name in _INTEGER or kind(name) == "DECL_REF_EXPR" and t.kind.name in ("RECORD", "POINTER")


def _index(access):
    return list(access.get_children())[1]


def _line_start(src, stmt) -> int:
    a = src.span(stmt)[0]
    s = src.text.rfind("\n", 0, a) + 1
    return s if not src.text[s:a].strip() else a
