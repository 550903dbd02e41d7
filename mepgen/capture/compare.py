"""Static completion against a capture: where the MEP `mepgen mep` inferred disagrees with what a run recorded.

Both describe the same launch of a kernel; a disagreement is either a static guess the run refutes (a grid that
evaluates to another size, a scalar placeholder, a role) or a difference the capture explains (an allocation
rounded up beyond the count the kernel uses). Each is one line naming the field, both values and, where it is
known, why.
"""
from __future__ import annotations

from dataclasses import dataclass

from .. import cexpr
from ..spec import Spec


@dataclass
class Disagreement:
    field: str
    static: str
    captured: str
    why: str = ""

    def line(self) -> str:
        return f"{self.field}: static {self.static}, captured {self.captured}" + (f" ({self.why})" if self.why else "")


def _dims(exprs: list[str], sizes: dict) -> list[int | None]:
    return ([cexpr.evaluate(e, sizes) for e in exprs] + [1, 1, 1])[:3]


def compare(static: Spec, manifest: dict) -> list[Disagreement]:
    """Every field where the static MEP and the capture disagree (launch, scalars and sizes, counts, roles, dtypes)."""
    out: list[Disagreement] = []
    sizes = static.sizes
    for key in ("grid", "block"):
        want = list(manifest[key])
        got = _dims(getattr(static.launch, key), sizes)
        if got != want:
            out.append(Disagreement(f"launch.{key}", f"{getattr(static.launch, key)} = {got}", str(want),
                                    "static completion could not evaluate it" if None in got else ""))
    smem = cexpr.evaluate(static.launch.shared_mem, sizes)
    if smem != manifest["shared_mem"]:
        out.append(Disagreement("launch.shared_mem", f"{static.launch.shared_mem} = {smem}", str(manifest["shared_mem"])))
    by_name = {p["name"]: p for p in manifest["params"]}
    for p in static.params:
        mp = by_name.get(p.name)
        if mp is None:
            out.append(Disagreement(f"params.{p.name}", "present", "absent", "the sources changed since the capture"))
            continue
        if p.role == "scalar":
            if mp["kind"] != "value":
                continue
            v = cexpr.evaluate(p.value, sizes) if mp.get("value") is not None and isinstance(mp["value"], int) else None
            if isinstance(mp.get("value"), bool) or mp.get("value") is None:
                continue
            if isinstance(mp["value"], int):
                if v != mp["value"]:
                    out.append(Disagreement(f"params.{p.name}", f"{p.value} = {v}", str(mp["value"]),
                                            _placeholder(static, p.name)))
            else:
                sv = _float(p.value)
                if sv is None or abs(sv - mp["value"]) > 1e-6 * max(1.0, abs(mp["value"])):
                    out.append(Disagreement(f"params.{p.name}", str(p.value), repr(mp["value"]),
                                            _placeholder(static, p.name)))
            continue
        if mp["kind"] != "buffer":
            out.append(Disagreement(f"params.{p.name}", f"a {p.role} buffer", f"a {mp['kind']} pointer"))
            continue
        if p.dtype and p.dtype != mp["dtype"] and mp["dtype"] != "uint8":
            out.append(Disagreement(f"params.{p.name}.dtype", p.dtype, mp["dtype"]))
        n = cexpr.evaluate(p.count, sizes)
        if n != mp["count"]:
            why = ("the allocation is larger than the static count (rounded up or shared); the kernel may use fewer"
                   if n is not None and n < mp["count"] else "")
            if p.lanes and p.dtype != mp["dtype"]:
                why = "counted in different units (records vs bytes)"
            out.append(Disagreement(f"params.{p.name}.count", f"{p.count} = {n}", str(mp["count"]), why))
        if p.role == "in" and mp["written"]:
            out.append(Disagreement(f"params.{p.name}.role", "in", f"written ({mp['changed_elements']} elements changed)",
                                    "the static analysis missed a write"))
        elif p.role in ("out", "inout") and not mp["written"]:
            out.append(Disagreement(f"params.{p.name}.role", p.role, "not changed by this launch",
                                    "it may write the values it already held, or write only on other launches"))
    return out


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
