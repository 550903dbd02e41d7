"""`mepgen optimize KERNEL --dry-run`: the library's plan for an MEP without a GPU.

Every transformation of the library is asked whether it applies to the MEP's kernel.cu; each that applies
contributes the first point the proposer would try (its defaults first), rewritten into a candidate folder
(`kernel.cu`, and `launch.json` when the rewrite changes the launch); each that does not says why.
Nothing is built or run: the candidates are what `mepgen optimize` would hand the evaluator first.
"""
from __future__ import annotations

import json
import random
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from ..spec import Spec
from .library.base import current_launch, launch_held
from .library.catalog import all_transformations, in_order
from .library.source import KernelSource, Refused
from .library.tuning import suggest

#: transformations that change what a thread does or how data moves (not a flag, qualifier or launch tweak)
STRUCTURAL = {"tile_matmul", "tile_stencil", "stencil_rows", "tile_window", "warp_per_row", "warp_row_passes", "spread_loop", "split_argmax", "tile_argmax",
              "privatize_histogram",
              "split_columns", "swap_axes", "unflatten", "scalar_replace", "vector_loads", "coarsen", "grid_stride",
              "stage_table", "coarsen_blocks", "spread_iterations", "pack_components",
              "fuse_updates", "hoist_loads", "warp_reduce", "warp_atomics", "vector_elements"}


@dataclass
class Plan:
    kernel: str
    candidates: list[dict] = field(default_factory=list)   # {"name", "params", "change", "launch", "folder"}
    refusals: dict[str, str] = field(default_factory=dict)  # transformation -> why it does not apply
    todo: int = 0                                            # open todo items of mep.yaml (sizes may not hold)

    @property
    def structural(self) -> list[str]:
        return [c["name"] for c in self.candidates if c["name"] in STRUCTURAL]

    def to_dict(self) -> dict:
        return {"kernel": self.kernel, "candidates": self.candidates, "refusals": self.refusals,
                "structural": self.structural, "todo": self.todo}


def plan(spec: Spec, text: str, out: Path | None = None, transformations=None) -> Plan:
    """The library's first candidates for `text` (kernel.cu) and its refusals; candidates written under `out`."""
    result = Plan(spec.kernel.id, todo=len(spec.todo))
    try:
        src = KernelSource(text, spec)
    except Refused as e:
        result.refusals["*"] = str(e)
        return result
    launch = current_launch(spec, None)
    if out is not None and out.exists():
        shutil.rmtree(out)
    applicable = []
    for t in transformations if transformations is not None else all_transformations():
        try:
            space = t.space(src, spec, launch)
            points = suggest(space, {}, 1, random.Random(0), "hillclimb", t.first_point(src, spec, launch))
            if not points:
                raise Refused("no legal parameter point")
            rw = t.apply(src, spec, launch, points[0])
            held = launch_held(spec, rw.launch)       # as the proposer refuses it (library/proposer.py)
            if held:
                raise Refused(held)
            applicable.append((t, points[0], rw))
        except Refused as e:
            result.refusals[t.name] = str(e)
    for t, point, rw in in_order(applicable, src, spec, of=lambda a: a[0]):
        cand = {"name": t.name, "params": point, "change": rw.explanation, "launch": rw.launch,
                "nvcc_flags": list(rw.nvcc_flags), "folder": None}
        if out is not None:
            folder = out / f"{len(result.candidates):02d}-{t.name}"
            folder.mkdir(parents=True)
            (folder / "kernel.cu").write_text(rw.text)
            if rw.launch is not None or rw.nvcc_flags:
                (folder / "launch.json").write_text(json.dumps({"launch": rw.launch, "nvcc_flags": rw.nvcc_flags},
                                                               indent=1) + "\n")
            cand["folder"] = str(folder)
        result.candidates.append(cand)
    return result


def report(p: Plan) -> str:
    lines = [f"{p.kernel}: {len(p.candidates)} candidate(s), {len(p.structural)} structural"]
    if p.todo:
        lines.append(f"  note: mep.yaml has {p.todo} open todo item(s): what depends on their values may change "
                     f"once they are set, and `mepgen optimize` refuses to run until they are")
    for c in p.candidates:
        params = ", ".join(f"{k}={v}" for k, v in sorted(c["params"].items())) or "-"
        lines.append(f"  try     {c['name']:<20} {params:<28} {c['change']}")
        if c["folder"]:
            lines.append(f"          -> {c['folder']}/kernel.cu")
    for name, why in p.refusals.items():
        lines.append(f"  refuses {name:<20} {why}")
    return "\n".join(lines)
