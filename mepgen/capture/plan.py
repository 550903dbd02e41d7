"""The capture plan: what the injector must record, derived from the inventory, and its plain-text file.

The injector cannot parse C++ types, so the plan tells it, per kernel parameter in order, whether the argument is a
pointer (copy the allocation behind it) or a value (record its bytes), and which `__constant__`/`__device__`
symbols the kernel reads (copy them before the launch). What a replay cannot reproduce faithfully is refused here,
before the application runs: texture and surface objects, texture references, `__managed__` globals.

The file is tab-separated lines under a `mepgen-capture-plan 1` header (read by `read_plan` in
injector/capture.cpp); see :func:`render`.
"""
from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import MepgenError
from .names import KernelChoice, variable_symbols

PLAN_HEADER = "mepgen-capture-plan 1"
DEFAULT_MAX_BYTES = 4 << 30

_TEXTURE_TYPES = re.compile(r"\b(cudaTextureObject_t|cudaSurfaceObject_t|CUtexObject|CUsurfObject|"
                            r"texture\s*<|surface\s*<)")


@dataclass
class PlanParam:
    name: str
    kind: str                    # pointer | value
    ctype: str                   # as the inventory spells it
    pointee: str | None = None   # pointers: the element type (may be a template parameter)
    struct: str | None = None    # by-value records: the qualified type


@dataclass
class PlanConstant:
    name: str                    # qualified name
    symbols: list[str]           # module symbol names to try
    space: str                   # constant | device
    declaration: str = ""        # as written in the source (for the element type and count)


@dataclass
class CapturePlan:
    choice: KernelChoice
    out_dir: Path
    params: list[PlanParam]
    constants: list[PlanConstant] = field(default_factory=list)
    launch: int = 0
    after_ms: float | None = None
    max_bytes: int = DEFAULT_MAX_BYTES
    exit_after: bool = False
    start_epoch_ms: float = 0.0

    def render(self) -> str:
        """The plan file's text: one record per line, fields separated by tabs (so no field may hold either)."""
        c = self.choice
        rows = [["out", str(self.out_dir)], ["kernel", c.kernel["qualified_name"]]]
        if c.template_args:
            rows.append(["template_args", c.template_args])
        if c.mangled:
            rows.append(["mangled", c.mangled])
        rows += [["launch", str(self.launch)], ["after_ms", str(-1 if self.after_ms is None else self.after_ms)],
                 ["start_epoch_ms", f"{self.start_epoch_ms:.3f}"], ["max_bytes", str(self.max_bytes)],
                 ["exit_after", "1" if self.exit_after else "0"]]
        rows += [["param", str(i), p.kind, p.name] for i, p in enumerate(self.params)]
        rows += [["constant", k.name, *k.symbols] for k in self.constants]
        for row in rows:
            bad = next((f for f in row if "\t" in f or "\n" in f), None)
            if bad is not None:
                raise MepgenError(f"the capture plan cannot hold a tab or newline in {bad!r}")
        return PLAN_HEADER + "\n" + "".join("\t".join(r) + "\n" for r in rows)

    def write(self, path: Path) -> Path:
        self.start_epoch_ms = self.start_epoch_ms or time.time() * 1000.0
        Path(path).write_text(self.render())
        return Path(path)


def _declaration(app_root: Path | None, g: dict) -> str:
    if app_root is None or "file" not in g:
        return ""
    try:
        data = (Path(app_root) / g["file"]).read_bytes()
    except OSError:
        return ""
    return data[g["start_byte"]:g["end_byte"]].decode(errors="replace")


def make_plan(choice: KernelChoice, out_dir: Path, *, app_root: Path | None = None, launch: int = 0,
              after_ms: float | None = None, max_bytes: int = DEFAULT_MAX_BYTES, exit_after: bool = False) -> CapturePlan:
    """The plan for `choice`, or a MepgenError naming what cannot be captured faithfully."""
    k = choice.kernel
    q = k["qualified_name"]
    if launch < 0:
        raise MepgenError(f"--launch must be 0 or more (got {launch})")
    if after_ms is not None and after_ms < 0:
        raise MepgenError(f"--after-ms must be 0 or more (got {after_ms})")
    if max_bytes <= 0:
        raise MepgenError(f"--max-bytes must be positive (got {max_bytes})")
    if "texture" in (k.get("features") or []):
        raise MepgenError(f"cannot capture {q}: it reads through texture references, whose bindings a replay "
                          "cannot reproduce")
    params = []
    for p in k["params"]:
        ctype = p.get("type") or p.get("written", "")
        if _TEXTURE_TYPES.search(ctype) or _TEXTURE_TYPES.search(p.get("written", "")):
            raise MepgenError(f"cannot capture {q}: parameter '{p['name']}' is a texture or surface object "
                              f"({ctype}), whose backing array and sampling state a replay cannot reproduce")
        if p.get("is_reference"):
            raise MepgenError(f"cannot capture {q}: parameter '{p['name']}' is a reference ({ctype})")
        kind = "pointer" if p.get("is_pointer") else "value"
        params.append(PlanParam(p["name"], kind, ctype, p.get("pointee_type"), p.get("struct")))
    constants = []
    for g in k.get("closure", {}).get("globals", []):
        space = g.get("space")
        if space == "managed":
            raise MepgenError(f"cannot capture {q}: it uses the __managed__ variable {g['qualified_name']}, "
                              "which a replay cannot place the same way")
        if space in ("constant", "device"):
            constants.append(PlanConstant(g["qualified_name"], variable_symbols(g["qualified_name"]), space,
                                          _declaration(app_root, g)))
    return CapturePlan(choice, Path(out_dir).resolve(), params, constants, launch=launch, after_ms=after_ms,
                       max_bytes=max_bytes, exit_after=exit_after)


def typedef_map(app_root: Path | None, kernel: dict) -> dict[str, str]:
    """The kernel closure's simple typedefs (`typedef float real_t;`, `using real_t = float;`): name -> type, so
    element types spelled through them still get a dtype."""
    out = {}
    for t in kernel.get("closure", {}).get("typedefs", []):
        text = " ".join(_declaration(app_root, t).split())
        m = re.match(r"typedef (.+?) ([A-Za-z_]\w*)$", text) or re.match(r"using ([A-Za-z_]\w*) = (.+)$", text)
        if not m:
            continue
        name, target = (m.group(2), m.group(1)) if text.startswith("typedef") else (m.group(1), m.group(2))
        out[name] = target.strip()
        out.setdefault(t.get("qualified_name", name), target.strip())
    return out
