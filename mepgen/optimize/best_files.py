"""The winner's files beside `best/kernel.cu` (summary.py writes that one): `best/mep.yaml` with the winner's launch
and nvcc flags, and `best/launch_facts.json`, what the original kernel proves about a captured launch, which
`mepgen patch --from` reads to write a new launch in the application's own terms."""
from __future__ import annotations

import json
from pathlib import Path

from ..evaluate.launchcfg import launch_from, with_flags, with_launch
from ..mep.render import render_yaml
from ..spec import LAUNCH_FACTS
from ..workspace import write_atomic
from .library.literal_launch import guard_fact, is_literal, per_thread
from .library.source import KernelSource, Refused


def write_launch(spec, launch: dict | None, path: Path, flags=(), original: str | None = None,
                 chain: list | None = None) -> None:
    """best/mep.yaml: the MEP's spec with the winner's launch and extra nvcc flags (build.nvcc_flags), which
    `mepgen patch --from` reads beside kernel.cu (it writes the launch back and prints the flags). Where the MEP's
    launch is a captured run's numbers and the winner changes it, best/launch_facts.json says what the kernel
    (`original`, the MEP's kernel.cu) proves about it: `guard` (literal_launch.guard_fact), by which patch writes
    the new block where the site's grid is not spelled with it; with `per_thread` K where the winning `chain`
    ((source, transformations) per attempt, literal_launch.per_thread) makes K elements per thread of each one
    and the winner's 1-D grid is exactly ceil(N / (block * K)) for the MEP's N."""
    new = launch_from(spec, launch) if launch else None
    (path.parent / LAUNCH_FACTS).unlink(missing_ok=True)       # an earlier winner's facts (a resumed run)
    if new is not None or flags:
        what = [w for w, on in (("launch configuration", new is not None), ("nvcc flags", bool(flags))) if on]
        out = with_flags(with_launch(spec, new) if new is not None else spec, list(flags))
        write_atomic(path, render_yaml(out, [f"the winner's {' and '.join(what)} ({spec.kernel.name})"]))
    if new is not None and original and is_literal({"grid": spec.launch.grid, "block": spec.launch.block}):
        try:
            fact = guard_fact(KernelSource(original, spec), spec)
        except Refused:
            fact = None
        if fact is not None:
            k = winner_per_thread(spec, new, fact, chain)
            if k is not None and k > 1:
                fact["per_thread"] = k
            write_atomic(path.parent / LAUNCH_FACTS, json.dumps({"guard": fact}, indent=1) + "\n")


def winner_per_thread(spec, launch, fact: dict, chain) -> int | None:
    """The winner's elements per thread (literal_launch.per_thread of its chain), where its 1-D launch is exactly
    ceil(N / (block * K)) blocks for the value the MEP gives the guard's bound N; None otherwise."""
    k = per_thread(chain or [])
    if k is None or len(launch.grid) != 1 or len(launch.block) != 1:
        return None
    n, grid, block = (spec.size(str(v)) for v in (spec.params[fact["index"]].value, launch.grid[0], launch.block[0]))
    if not all(isinstance(v, int) and v > 0 for v in (n, grid, block)) or grid != -(-n // (block * k)):
        return None
    return k
