"""The capture plan: what the injector must record, derived from the inventory, and its plain-text file.

The injector cannot parse C++ types, so the plan tells it, per kernel parameter in order, whether the argument is a
pointer (copy the allocation behind it) or a value (record its bytes), and which `__constant__`/`__device__`
symbols the kernel reads (copy them before the launch). What a replay cannot reproduce faithfully is refused here,
before the application runs: texture and surface objects, texture references, `__managed__` globals.

One run records several kernels: a :class:`RunPlan` holds one :class:`CapturePlan` per kernel (its parameters,
constants and which launch: an index, or the longest) and what applies to the whole run (the output folder, the
byte limit, how deep pointers are followed). Each parameter says whether it may hold device pointers (`scan`): a
struct passed by value, a pointer to pointers or to structs; numeric elements are never scanned.

The file is tab-separated lines under a `mepgen-capture-plan 2` header (read by `read_plan` in
injector/capture.cpp); see :meth:`RunPlan.render`.
"""
from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import MepgenError
from .names import KernelChoice, variable_symbols

PLAN_HEADER = "mepgen-capture-plan 2"
DEFAULT_SCAN_DEPTH = 2
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
    scan: bool = False           # its bytes (value) or its elements (pointer) may hold device pointers


@dataclass
class PlanConstant:
    name: str                    # qualified name
    symbols: list[str]           # module symbol names to try
    space: str                   # constant | device
    declaration: str = ""        # as written in the source (for the element type and count)


@dataclass
class CapturePlan:
    """What to record of one kernel."""
    choice: KernelChoice
    out_dir: Path
    params: list[PlanParam]
    constants: list[PlanConstant] = field(default_factory=list)
    launch: int = 0
    after_ms: float | None = None
    max_bytes: int = DEFAULT_MAX_BYTES
    exit_after: bool = False
    start_epoch_ms: float = 0.0
    longest: bool = False

    def rows(self, t: int) -> list[list[str]]:
        c = self.choice
        rows = [["target", str(t), c.kernel["qualified_name"], c.template_args, c.mangled,
                 "longest" if self.longest else str(self.launch)]]
        rows += [["param", str(t), str(i), p.kind, "1" if p.scan else "0", p.name] for i, p in enumerate(self.params)]
        rows += [["constant", str(t), k.name, *k.symbols] for k in self.constants]
        return rows

    def render(self) -> str:
        """The plan file of a run that records this kernel alone."""
        return RunPlan(self.out_dir, [self], after_ms=self.after_ms, max_bytes=self.max_bytes,
                       exit_after=self.exit_after, start_epoch_ms=self.start_epoch_ms).render()

    def write(self, path: Path) -> Path:
        self.start_epoch_ms = self.start_epoch_ms or time.time() * 1000.0
        Path(path).write_text(self.render())
        return Path(path)


@dataclass
class RunPlan:
    """One run of the application that records several kernels (target T's record lands in out_dir/kT/)."""
    out_dir: Path
    targets: list[CapturePlan]
    after_ms: float | None = None
    max_bytes: int = DEFAULT_MAX_BYTES
    exit_after: bool = False
    start_epoch_ms: float = 0.0
    scan_depth: int = DEFAULT_SCAN_DEPTH
    gpu_times_only: bool = False

    def render(self) -> str:
        """The plan file's text: one record per line, fields separated by tabs (so no field may hold either)."""
        rows = [["out", str(self.out_dir)], ["after_ms", str(-1 if self.after_ms is None else self.after_ms)],
                ["start_epoch_ms", f"{self.start_epoch_ms:.3f}"], ["max_bytes", str(self.max_bytes)],
                ["exit_after", "1" if self.exit_after else "0"], ["scan_depth", str(self.scan_depth)]]
        if self.gpu_times_only:
            rows.append(["gpu_times_only", "1"])
        for t, target in enumerate(self.targets):
            rows += target.rows(t)
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
              after_ms: float | None = None, max_bytes: int = DEFAULT_MAX_BYTES, exit_after: bool = False,
              longest: bool = False) -> CapturePlan:
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
    typedefs = typedef_map(app_root, k)
    params = []
    for p in k["params"]:
        ctype = p.get("type") or p.get("written", "")
        if _TEXTURE_TYPES.search(ctype) or _TEXTURE_TYPES.search(p.get("written", "")):
            raise MepgenError(f"cannot capture {q}: parameter '{p['name']}' is a texture or surface object "
                              f"({ctype}), whose backing array and sampling state a replay cannot reproduce")
        if p.get("is_reference"):
            raise MepgenError(f"cannot capture {q}: parameter '{p['name']}' is a reference ({ctype})")
        kind = "pointer" if p.get("is_pointer") else "value"
        params.append(PlanParam(p["name"], kind, ctype, p.get("pointee_type"), p.get("struct"),
                                scan=may_hold_pointers(p, kind, typedefs)))
    constants = []
    for g in k.get("closure", {}).get("globals", []):
        space = g.get("space")
        if space == "managed":
            raise MepgenError(f"cannot capture {q}: it uses the __managed__ variable {g['qualified_name']}, "
                              "which a replay cannot place the same way")
        if space in ("constant", "device") and g.get("variable_template"):
            raise MepgenError(f"cannot capture {q}: it reads the variable template {g['qualified_name']}, whose "
                              "instantiations' symbols capture does not look up yet (`mepgen mep` completes it "
                              "statically)")
        if space in ("constant", "device"):
            constants.append(PlanConstant(g["qualified_name"], variable_symbols(g["qualified_name"]), space,
                                          _declaration(app_root, g)))
    return CapturePlan(choice, Path(out_dir).resolve(), params, constants, launch=launch, after_ms=after_ms,
                       max_bytes=max_bytes, exit_after=exit_after, longest=longest)


_NUMERIC = re.compile(r"^(?:(?:un)?signed\s+)?(?:char|short|int|long|long\s+long|float|double|bool|half|__half|"
                      r"__nv_bfloat16|size_t|u?int(?:8|16|32|64)_t|ptrdiff_t|unsigned)$|^(?:float|double|u?int|u?char|"
                      r"u?short|u?long|u?longlong|half)[1-4]$")


def may_hold_pointers(p: dict, kind: str, typedefs: dict[str, str] | None = None) -> bool:
    """Whether a parameter's bytes (a value) or elements (a pointer) can hold device pointers the capture must
    follow: anything but numbers and vectors of numbers (`float`, `int2`, `size_t`, an enum)."""
    if kind == "value":
        if p.get("enum"):
            return False
        if p.get("struct"):
            return not _numeric(p["struct"], typedefs)     # float4 by value holds no pointer
        return not _numeric(p.get("type") or p.get("written", ""), typedefs)
    written = p.get("type") or p.get("written", "")
    if written.count("*") > 1:              # float** : an array of device pointers
        return True
    return not _numeric(p.get("pointee_type") or "", typedefs)


def _numeric(t: str, typedefs: dict[str, str] | None) -> bool:
    from .convert import bare_type
    for _ in range(4):
        t = bare_type((typedefs or {}).get(t, t))
    t = t.split("::")[-1] if t.startswith("std::") else t
    return bool(_NUMERIC.match(" ".join(t.split())))


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
