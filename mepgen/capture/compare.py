"""Static completion against a capture: where the MEP `mepgen mep` inferred disagrees with what a run recorded.

Both describe the same launch of a kernel; a difference is either a static claim the run refutes (a role, a
count or grid static completion derived) or a difference the capture explains (an allocation rounded up beyond the
count the kernel uses, two parameters the application pointed into one allocation). Where static completion had
no value of its own - the field or a size symbol it uses is a todo (a placeholder such as 1048576 or a grid of 1)
- the difference says so (`static_todo`, the todo's field): that is static completion admitting it did not know,
not a disagreement. Each is one line naming the field, both values and, where it is known, why.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from .. import cexpr
from ..spec import Spec, itemsize

_SIZE_REF = re.compile(r"\bsizes\.(\w+)")


@dataclass
class Disagreement:
    field: str
    static: str
    captured: str
    why: str = ""
    static_todo: str = ""       # the static MEP's todo behind its value ("sizes.N", "launch"), or "default" (a value
                                # static completion states is a default): a placeholder, not a disagreement

    @property
    def placeholder(self) -> bool:
        return bool(self.static_todo)

    def line(self) -> str:
        return (f"{self.field}: static {self.static}, captured {self.captured}" + (f" ({self.why})" if self.why else "")
                + ("" if not self.static_todo else " [static placeholder: a stated default]"
                   if self.static_todo == "default" else f" [static placeholder: todo {self.static_todo}]"))


class _Todos:
    """Which of the static MEP's values are placeholders: fields with a todo, and size symbols a todo names."""

    def __init__(self, static: Spec):
        self.fields = [t.field for t in static.todo]
        self.symbols: dict[str, str] = {}
        for t in static.todo:
            if t.field.startswith("sizes."):
                self.symbols.setdefault(t.field[len("sizes."):], t.field)
            for sym in _SIZE_REF.findall(t.reason):
                self.symbols.setdefault(sym, t.field)
        for i, p in enumerate(static.params):       # a count todo: the symbols of that count are its placeholders
            if f"params[{i}].count" in self.fields:
                for sym in cexpr.names(str(p.count or "")):
                    self.symbols.setdefault(sym, f"params[{i}].count")

    def of(self, fields: list[str], *exprs) -> str:
        """The todo behind a value: one of `fields` itself, else a placeholder size symbol the expressions use."""
        for f in fields:
            if f in self.fields:
                return f
        for e in exprs:
            for sym in sorted(cexpr.names(str(e or ""))):
                if sym in self.symbols:
                    return self.symbols[sym]
        return ""


def _dims(exprs: list[str], sizes: dict) -> list[int | None]:
    return ([cexpr.evaluate(e, sizes) for e in exprs] + [1, 1, 1])[:3]


def compare(static: Spec, manifest: dict) -> list[Disagreement]:
    """Every field where the static MEP and the capture differ (launch, scalars and sizes, counts, roles, dtypes);
    those where the static value is a placeholder carry the todo behind it (`static_todo`)."""
    out: list[Disagreement] = []
    sizes = static.sizes
    todos = _Todos(static)
    for key in ("grid", "block"):
        want = list(manifest[key])
        exprs = getattr(static.launch, key)
        got = _dims(exprs, sizes)
        if got != want:
            out.append(Disagreement(f"launch.{key}", f"{exprs} = {got}", str(want),
                                    "static completion could not evaluate it" if None in got else "",
                                    todos.of(["launch"], *exprs)))
    smem = cexpr.evaluate(static.launch.shared_mem, sizes)
    if smem != manifest["shared_mem"]:
        out.append(Disagreement("launch.shared_mem", f"{static.launch.shared_mem} = {smem}", str(manifest["shared_mem"]),
                                static_todo=todos.of(["launch"], static.launch.shared_mem)))
    by_name = {p["name"]: p for p in manifest["params"]}
    sharing = {int(a["id"]): a.get("params") or [] for a in manifest.get("allocations", [])}
    for i, p in enumerate(static.params):
        mp = by_name.get(p.name)
        at = f"params[{i}]"
        if mp is None:
            out.append(Disagreement(f"params.{p.name}", "present", "absent", "the sources changed since the capture"))
            continue
        if p.role == "scalar":
            if mp["kind"] != "value":
                continue
            v = cexpr.evaluate(p.value, sizes) if mp.get("value") is not None and isinstance(mp["value"], int) else None
            if isinstance(mp.get("value"), bool) or mp.get("value") is None:
                continue
            todo = todos.of([f"{at}.value"], p.value)
            if isinstance(mp["value"], int):
                if v != mp["value"]:
                    out.append(Disagreement(f"params.{p.name}", f"{p.value} = {v}", str(mp["value"]),
                                            _placeholder(static, p.name), todo or _default(p)))
            else:
                sv = _float(p.value)
                if sv is None or abs(sv - mp["value"]) > 1e-6 * max(1.0, abs(mp["value"])):
                    out.append(Disagreement(f"params.{p.name}", str(p.value), repr(mp["value"]),
                                            _placeholder(static, p.name), todo or _default(p)))
            continue
        if mp["kind"] != "buffer":
            why = ("the application passed a null pointer in this launch (the kernel does not dereference it there, "
                   "or checks for it)" if mp["kind"] == "null" else "")
            out.append(Disagreement(f"params.{p.name}", f"a {p.role} buffer", f"a {mp['kind']} pointer", why))
            continue
        if p.dtype and p.dtype != mp["dtype"] and mp["dtype"] != "uint8":
            out.append(Disagreement(f"params.{p.name}.dtype", p.dtype, mp["dtype"],
                                    static_todo=todos.of([f"{at}.dtype"])))
        n = cexpr.evaluate(p.count, sizes)
        if n != mp["count"]:
            why = ("the allocation is larger than the static count (rounded up or shared); the kernel may use fewer"
                   if n is not None and n < mp["count"] else "")
            if p.lanes and p.dtype != mp["dtype"]:
                why = "counted in different units (records vs bytes)"
            elif mp["dtype"] == "uint8" and p.dtype and p.dtype != "uint8":
                why = (f"the capture counts bytes (its elements have no numeric type, e.g. pointers): {mp['count']} "
                       f"bytes are {mp['count'] // itemsize(p.dtype)} {p.dtype} elements")
            out.append(Disagreement(f"params.{p.name}.count", f"{p.count} = {n}", str(mp["count"]), why,
                                    todos.of([f"{at}.count", f"{at}.dtype"] if mp["dtype"] == "uint8" and p.dtype != "uint8"
                                             else [f"{at}.count"], p.count)))
        others = [x for x in sharing.get(int(mp.get("allocation", -1)), []) if x != p.name]
        if p.role == "in" and mp["written"]:
            why = (f"{', '.join(others)} point(s) into the same allocation in the application (aliased): the launch "
                   "wrote it through them" if others else "the static analysis missed a write")
            out.append(Disagreement(f"params.{p.name}.role", "in", f"written ({mp['changed_elements']} elements changed)",
                                    why))
        elif p.role in ("out", "inout") and not mp["written"]:
            out.append(Disagreement(f"params.{p.name}.role", p.role, "not changed by this launch",
                                    "it may write the values it already held, or write only on other launches"))
    return out


def notes_from_comments(yaml_text: str) -> dict[str, str]:
    """The notes mep.yaml writes as a comment above each parameter (`  # NAME: note`): they say which values are
    stated defaults ("0.5f is a safe default") rather than derived."""
    notes: dict[str, str] = {}
    section = None
    for line in yaml_text.splitlines():
        if line and not line[0].isspace() and not line.startswith("#"):
            section = line.split(":", 1)[0]
        m = re.match(r"\s+# (\w+): (.*)$", line)
        if m and section == "params":
            notes[m[1]] = m[2]          # the comment nearest above the parameter says it
    return notes


def _default(p) -> str:
    """A static value that is a stated default, not a derived one ("0.5f, a safe default")."""
    return "default" if p.note and ("default" in p.note or "placeholder" in p.note) else ""


def _placeholder(static: Spec, name: str) -> str:
    idx = next((i for i, p in enumerate(static.params) if p.name == name), None)
    todo = [t for t in static.todo if t.field.startswith(f"params[{idx}]")]
    if todo:
        return "static completion had left it a todo"
    p = static.params[idx] if idx is not None else None
    if p is not None and p.note and "default" in p.note:
        return f"static completion used a default: {p.note}"
    return ""


def _float(text) -> float | None:
    t = str(text).strip().rstrip("fF")
    try:
        return float(t)
    except ValueError:
        return None
