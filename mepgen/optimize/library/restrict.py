"""`__restrict__` on the kernel's pointer parameters and `__ldg` for elements of read-only buffers, so
the compiler may keep loads in registers across stores and route read-only data through the
non-coherent cache.

`__restrict__` is a top-level qualifier of the parameter: the kernel's type and signature stay the same.
It promises the buffers do not overlap, so the analysis refuses when two pointer parameters can be the
same buffer: when mep.yaml does not give each its own buffer, or when the kernel derives one pointer
from another. Nothing to do when every pointer is already restricted and every read-only read is `__ldg`.
"""
from __future__ import annotations

from .analysis import squash
from .base import Rewrite, Transformation
from .source import Refused, kind, walk


def unrestricted_pointers(src, spec) -> list:
    """The pointer parameters that may take `__restrict__` and do not have it yet; Refused when two of them
    could be the same buffer (mep.yaml gives one no buffer of its own, or the kernel derives a pointer)."""
    pointers = [p for p in src.params if p.pointer]
    if len(pointers) < 1:
        raise Refused("the kernel has no pointer parameters")
    roles = {p.name: p.role for p in spec.params}
    for p in pointers:
        if p.name not in roles or roles[p.name] == "scalar":
            raise Refused(f"mep.yaml gives pointer {p.name} no buffer of its own: it may alias another")
    for c in src.nodes("VAR_DECL"):
        if c.type.get_canonical().kind.name == "POINTER" and \
                any(p.name in src.refs(c) for p in pointers):
            raise Refused(f"the kernel derives pointer {c.spelling} from a parameter (aliasing unknown)")
    return [p for p in pointers if "__restrict__" not in p.type and "restrict" not in p.type]


def restrict_edits(src, params) -> list:
    """Text edits that put `__restrict__` after the `*` of each parameter in `params`."""
    edits = []
    for p in params:
        star = p.start + src.text[p.start:p.end].rfind("*") + 1
        # `T *a` -> `T * __restrict__ a`: the qualifier must not run into the name
        after = "" if star < len(src.text) and src.text[star] in " \t\n" else " "
        edits.append((star, star, " __restrict__" + after))
    return edits


class Restrict(Transformation):
    def __init__(self):
        super().__init__("restrict_ldg", "__restrict__ pointers and __ldg read-only loads", {})

    def _plan(self, src, spec):
        add = unrestricted_pointers(src, spec)
        roles = {p.name: p.role for p in spec.params}
        written = set()
        for w in src.writes():
            target = list(w.get_children())[0] if list(w.get_children()) else w
            written |= {n.spelling for n in walk(target) if kind(n) == "DECL_REF_EXPR"}
        for c in src.nodes("CALL_EXPR"):
            if c.spelling.startswith("atomic"):
                written |= {n.spelling for n in walk(c) if kind(n) == "DECL_REF_EXPR"}
        loads = []
        for c in src.nodes("ARRAY_SUBSCRIPT_EXPR"):
            base = squash(src.src(list(c.get_children())[0]))
            p = src.param(base)
            s0 = src.span(c)[0]
            if src.text[max(0, s0 - 8):s0].replace(" ", "").endswith("__ldg(&"):
                continue                       # already a read-only load
            if p is not None and p.pointer and base not in written and roles.get(base) == "in":
                loads.append(c)
        loads = [c for c in loads if not any(src.span(o)[0] <= src.span(c)[0] and src.span(c)[1] <= src.span(o)[1]
                                             and o is not c for o in loads)]
        if not add and not loads:
            raise Refused("every pointer is already __restrict__ and no read-only load is left")
        return add, loads

    def space(self, src, spec, launch):
        self._plan(src, spec)
        return {"ldg": [True, False]}

    def apply(self, src, spec, launch, params):
        add, loads = self._plan(src, spec)
        edits = restrict_edits(src, add)
        if params.get("ldg", True):
            for c in loads:
                s, e = src.span(c)
                edits.append((s, e, f"__ldg(&{src.text[s:e]})"))
        else:
            loads = []
        what = []
        if add:
            what.append("__restrict__ on " + ", ".join(p.name for p in add))
        if loads:
            what.append(f"{len(loads)} read-only load(s) through __ldg")
        if not what:
            raise Refused("nothing to change with ldg off")
        return Rewrite(src.replace(edits), "restrict/read-only: " + "; ".join(what) +
                       " (buffers are distinct in mep.yaml)")
