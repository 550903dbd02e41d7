"""What every transformation of the library provides: an analysis that refuses when unsafe, a rewrite,
its tunable parameters with their legal values, and a one-line explanation for the trajectory.

A rewrite keeps the kernel's name and signature (the patch stage puts it back into the application) and
states any launch configuration it needs explicitly (`Rewrite.launch`, over the spec's size symbols).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ...spec import Spec
from .launch_facts import dim3_components
from .source import KernelSource, Refused


@dataclass
class Rewrite:
    text: str                      # the whole new kernel.cu
    explanation: str               # one line: what changed and why
    launch: dict | None = None     # the full launch it needs {"grid", "block", "shared_mem"}; None: unchanged
    nvcc_flags: list[str] = field(default_factory=list)   # extra nvcc flags the candidate is built with


@dataclass
class Transformation:
    """Subclasses implement `space` (the analysis: raise Refused, else the tunables) and `apply`."""
    name: str = ""
    summary: str = ""
    defaults: dict = field(default_factory=dict)

    def space(self, src: KernelSource, spec: Spec, launch: dict) -> dict[str, list]:
        """The legal values of each tunable parameter where the rewrite applies; Refused where it does not."""
        raise NotImplementedError

    def apply(self, src: KernelSource, spec: Spec, launch: dict, params: dict) -> Rewrite:
        raise NotImplementedError

    def first_point(self, src: KernelSource, spec: Spec, launch: dict) -> dict:
        """The point tried first where the rewrite applies (the tuning starts its walk there): the defaults, unless
        a transformation derives a better start from the kernel and its sizes."""
        return self.defaults

    def leads(self, src: KernelSource, spec: Spec) -> bool:
        """Whether this kernel's own text puts the transformation forward (catalog.in_order: right after the
        catalog's first): a limited time per kernel may leave room for only a few candidates."""
        return False


def current_launch(spec: Spec, launch: dict | None) -> dict:
    """The launch a rewrite starts from: the parent's override, else mep.yaml's."""
    base = {"grid": list(spec.launch.grid), "block": list(spec.launch.block),
            "shared_mem": str(spec.launch.shared_mem or "0")}
    merged = {**base, **(launch or {})}
    merged["grid"], merged["block"] = dim3_components(merged["grid"]), dim3_components(merged["block"])
    return one_dimensional(merged, spec)


def one_dimensional(launch: dict, spec: Spec) -> dict:
    """The launch without trailing dimensions written as 1 in both grid and block (`dim3 block(256, 1)` on a
    grid of `(n + 255) / 256, 1` is a 1D launch): threadIdx.y and blockIdx.y are 0 either way, so the kernel
    computes the same, and the transformations that need a 1D launch see one. Only a literal 1: an
    expression that is 1 for the MEP's sizes (`(ny + 15) / 16` with a small ny) may not be for others."""
    grid, block = list(launch["grid"]), list(launch["block"])
    one = lambda v: str(v).strip().strip("()").strip().rstrip("uUlL") == "1"
    while max(len(grid), len(block)) > 1:
        d = max(len(grid), len(block)) - 1
        g = one(grid[d]) if d < len(grid) else True
        b = one(block[d]) if d < len(block) else True
        if not (g and b):
            break
        grid, block = grid[:d] or grid[:1], block[:d] or block[:1]
    return {**launch, "grid": grid, "block": block}


def block_threads(spec: Spec, launch: dict) -> int | None:
    """Threads per block when the block expression is a compile-time value over the size symbols."""
    total = 1
    for d in launch["block"]:
        v = spec.size(str(d))
        if v is None:
            return None
        total *= v
    return total


def several_blocks(spec: Spec) -> str | None:
    """Why no candidate may change the block: the application launched the kernel with several (a capture's
    `launch.observed`), the MEP measuring one of them, and patch would write one block for all; None otherwise."""
    blocks = spec.launch.observed_blocks()
    if len(blocks) < 2:
        return varying_block(spec)
    shown = ", ".join("x".join(str(v) for v in b if v > 1 or b == (1, 1, 1)) for b in blocks[:6])
    return (f"the application launched this kernel with {len(blocks)} different blocks ({shown}"
            f"{', ...' if len(blocks) > 6 else ''}; launch.observed): a new block would replace all of them")


def varying_block(spec: Spec) -> str | None:
    """Why the block is not one number: a loop around the launch site changes it each round (a static MEP reproduces
    the first round; no capture told the others), None otherwise."""
    names = spec.launch.varies.get("block")
    if not names or spec.launch.observed:
        return None
    return (f"the launch site's block ({', '.join(names)}) changes in the loop around it; this MEP reproduces one "
            "round, and a capture (`mepgen capture`) would tell the others")


def launch_held(spec: Spec, new_launch: dict | None) -> str | None:
    """Why a candidate with `new_launch` cannot be patched (patch/site_launches.py refuses it): a new block where the
    application launched the kernel with several, or any new launch where a loop around a static MEP's site changes
    its grid or block each round; None where it can."""
    if new_launch is None:
        return None
    new_block = [str(x) for x in new_launch["block"]] != spec.launch.block
    several = several_blocks(spec) if new_block else None
    if several:
        return several
    return loop_rounds(spec) if new_block or [str(x) for x in new_launch["grid"]] != spec.launch.grid else None


def loop_rounds(spec: Spec) -> str | None:
    """Why no launch may change: a loop around a static MEP's launch site changes its grid or block each round."""
    names = sorted({n for v in spec.launch.varies.values() for n in v})
    if not names or spec.launch.observed:
        return None
    return (f"the loop around the launch site changes {', '.join(names)} each round; this MEP reproduces one "
            "round, and a new launch would replace every round's")


def bound_threads(spec: Spec, launch: dict) -> int | None:
    """The thread count a `__launch_bounds__` must allow: the launch's block, or the largest block the application
    was seen launching the kernel with (launch.observed) where that is larger."""
    n = block_threads(spec, launch)
    seen = [b[0] * b[1] * b[2] for b in spec.launch.observed_blocks()]
    return None if n is None else max([n, *seen])


def launch_threads(spec: Spec, launch: dict) -> int | None:
    """Threads of the whole launch (grid x block) when every dimension is a value over the size symbols."""
    block = block_threads(spec, launch)
    grid = block_threads(spec, {"block": launch["grid"]})
    return None if block is None or grid is None else block * grid


def _in_space(t, src, spec, launch, params: dict) -> None:
    """Refused where a parameter of `params` is not a value the transformation's space offers for this kernel. A
    chain replayed from another kernel (a pattern: inherit.py) carries that kernel's points: a 2D block `32x4` on a
    1-D launch is no point here (applying it anyway raised ValueError: an internal error on a real application)."""
    if not hasattr(t, "space"):
        return
    try:
        space = t.space(src, spec, launch)
    except Refused:          # a space may refuse on heuristics (too few threads to coarsen) where an explicit point
        return               # still applies: apply decides, as before
    for key, value in params.items():
        offered = space.get(key) if isinstance(space, dict) else None
        if offered is not None and value not in offered:
            raise Refused(f"its {key} {value!r} is not one this kernel offers ({', '.join(map(str, offered))})")


class StepRefused(Refused):
    """A step of a chain that does not apply here; `step` names its transformation."""

    def __init__(self, step: str, why: str):
        super().__init__(why)
        self.step = step


def apply_chain(catalog: dict, text: str, spec: Spec, chain: list[dict],
                launch: dict | None = None) -> tuple[str, dict | None, list[str]]:
    """Library steps `[{"name": ..., "params": {...}}]` applied in order to the kernel text `text`: the new text,
    the launch override (None: unchanged) and the extra nvcc flags the steps need. `catalog`: transformation
    name -> Transformation. StepRefused for a step this library lacks or that does not apply."""
    flags: list[str] = []
    for step in chain:
        name = step.get("name", "?")
        t = catalog.get(name)
        if t is None:
            raise StepRefused(name, "not in this mepgen's library")
        src, here, params = KernelSource(text, spec), current_launch(spec, launch), step.get("params") or {}
        try:
            _in_space(t, src, spec, here, params)
            rw = t.apply(src, spec, here, params)
        except Refused as e:
            raise StepRefused(name, str(e)) from None
        except (KeyError, ValueError, TypeError) as e:   # a chain from the pattern store may come from another
            raise StepRefused(name, f"its parameters {params} do not fit this kernel or this mepgen "   # version
                                    f"({type(e).__name__}: {e})") from None
        text, launch, flags = rw.text, (rw.launch if rw.launch is not None else launch), flags + list(rw.nvcc_flags)
    return text, launch, flags
