"""A winner measured at one launch of a kernel that the application launches differently elsewhere.

An MEP reproduces one launch: the one static completion took from a site, or the one a capture recorded. When the
kernel's launch sites spell different blocks (shuffle's transpose, launched with blocks of 8, 16 and 32 from three
sites), a winner was verified at one of those configurations only. Two changes cannot hold at the others, and are
refused with the sites:
- a new launch configuration: written at every site it would replace each site's own block (and the work
  decomposition it stands for) with the one launch the MEP measured;
- a `__launch_bounds__` below a block another site launches with: that launch fails ("too many resources requested
  for launch").
And wherever the sites spell different grids, a block-coarsened winner whose loop stops at a fixed grid (the MEP's
site's literal or macro, not a kernel parameter) is refused: it would do too little or too much at the others.
The same holds for a site in a loop that changes its block or grid from round to round (extract's `varies`), and
for the configurations a capture saw the application launch the kernel with (`launch.observed` of
a captured MEP, where there were several: one site in a loop over block sizes spells one block but launches many):
`check_observed` refuses a new block, a `__launch_bounds__` below the largest block launched, and a fixed-bound
coarsening where the grids differ. Other changes of the kernel's text are the same code at every site; the application's own check after patching
(`mepgen tune`, `patch.validate_command`) is what runs them there.
"""
from __future__ import annotations

import re

from .. import cexpr
from ..errors import MepgenError


def _squash(text: str | None) -> str:
    return re.sub(r"\s+", "", text or "")


def _macro_values(macros: dict[str, str]) -> dict[str, int]:
    """The application's macros that are integers."""
    return {k: v for k, v in ((k, cexpr.evaluate(v, {})) for k, v in macros.items()) if v is not None}


def _dims(block: str, macros: dict[str, str]) -> tuple[int, int, int] | None:
    """A site's block as written (`dim3(16, 16)`, `256`, `BLOCK`) in numbers, where literals and macros give it."""
    inner = re.fullmatch(r"dim3\s*\((.*)\)", block.strip(), re.S)
    parts = [p for p in (inner.group(1) if inner else block).split(",") if p.strip()]
    values = _macro_values(macros)
    dims = [cexpr.evaluate(p.strip(), values) for p in parts]
    if not dims or len(dims) > 3 or any(v is None for v in dims):
        return None
    return tuple(dims + [1] * (3 - len(dims)))


def _threads(block: str, macros: dict[str, str]) -> int | None:
    dims = _dims(block, macros)
    return None if dims is None else dims[0] * dims[1] * dims[2]


def _block_key(site: dict, macros: dict[str, str]):
    """What makes two sites' blocks the same: their numbers where they have them (`dim3(256)` and `256` are one
    block), else their spelling."""
    return _dims(site.get("block") or "", macros) or _squash(site.get("block"))


def launch_bounds_of(text: str, name: str, macros: dict[str, str]) -> int | None:
    """The maximum threads per block `__launch_bounds__` gives kernel `name` in `text` (None: no such attribute,
    or not a number)."""
    base = name.split("::")[-1]
    for m in re.finditer(r"__launch_bounds__\s*\(\s*([^,)]+)", text):
        after = text[m.end():m.end() + 400]
        if re.search(rf"\b{re.escape(base)}\s*\(", after.split("{", 1)[0]):
            return cexpr.evaluate(m.group(1).strip(), _macro_values(macros))
    return None


#: the bound block coarsening writes (optimize/library/coarsen_blocks.py): the MEP's grid, where the kernel stops
_COARSEN_BOUND = re.compile(r"if \(mepgen_b >= \(unsigned int\)\((.*)\)\) break;\s*// past the original grid")


def fixed_bound(variant_text: str, kernel: dict) -> str | None:
    """The grid a block-coarsened winner stops at, where it is a fixed value (literals, macros: the MEP's launch
    site's own spelling) rather than one each launch gives (a kernel parameter, blockDim); None otherwise."""
    m = _COARSEN_BOUND.search(variant_text)
    if m is None:
        return None
    names = set(re.findall(r"(?<![\w.])[A-Za-z_]\w*", m.group(1)))
    params = {p["name"] for p in kernel.get("params") or []}
    return None if names & params or "blockDim" in names else m.group(1).strip()


def _loop_rounds(kernel: dict, changes_launch: bool, variant_text: str, original_text: str,
                 macros: dict[str, str], observed: bool) -> None:
    """A site inside a loop that changes its block or grid from round to round (`for (t = 64; t <= 256; t *= 2)
    k<<<n / t, t>>>`; extract's `varies`): the MEP measured one round. Where a capture saw the rounds' configurations
    (`observed`), check_observed judges bounds and coarsening by their numbers."""
    sites = [s for s in kernel.get("launch_sites") or [] if s.get("varies")]
    if not sites:
        return
    name = kernel["qualified_name"]
    bound = launch_bounds_of(variant_text, name, macros)
    new_bound = bound is not None and bound != launch_bounds_of(original_text, name, macros)
    fixed = fixed_bound(variant_text, kernel)
    for s in sites:
        varies = s["varies"]
        where = f"{s['file']}:{s['line']}"
        changing = sorted({v for d in ("grid", "block") for v in varies.get(d, [])})
        if changes_launch and changing:
            raise MepgenError(f"{where} launches {name} in a loop that changes {', '.join(changing)} from one round "
                              "to the next; the winner's launch was measured at one round and would replace every "
                              "round's: patch a winner that keeps the launch, or set the launch by hand")
        if observed:
            continue
        if varies.get("block") and new_bound:
            raise MepgenError(f"the winner gives {name} __launch_bounds__({bound}), but {where} launches it with a block "
                              f"that changes in its loop ({', '.join(varies['block'])}): a larger round would fail")
        if varies.get("grid") and fixed is not None:
            raise MepgenError(f"the winner's block coarsening stops at the grid of one round ({fixed}), but {where} "
                              f"launches {name} with a grid that changes in its loop ({', '.join(varies['grid'])})")


def check(kernel: dict, changes_launch: bool, variant_text: str, original_text: str, macros: dict[str, str],
          observed: bool = False) -> None:
    """MepgenError naming the sites when the winner cannot hold at launches the MEP did not measure (`observed`: a
    capture saw several configurations, launch.observed)."""
    _loop_rounds(kernel, changes_launch, variant_text, original_text, macros, observed)
    sites = kernel.get("launch_sites") or []
    name = kernel["qualified_name"]
    bound = fixed_bound(variant_text, kernel)
    grids = {_squash(s.get("grid")) for s in sites}
    if bound is not None and len(grids) > 1:
        raise MepgenError(f"the winner's block coarsening stops at the grid of the launch its MEP measured ({bound}), "
                          f"but {name}'s {len(sites)} launch sites spell other grids ("
                          + ", ".join(f"{s['file']}:{s['line']} grid {_squash(s.get('grid')) or '?'}" for s in sites)
                          + "): it would do too little or too much there")
    blocks = {_block_key(s, macros) for s in sites}
    if len(sites) < 2 or len(blocks) < 2:
        return
    listed = ", ".join(f"{s['file']}:{s['line']} block {_squash(s.get('block')) or '?'}" for s in sites)
    if changes_launch:
        raise MepgenError(f"{name} is launched with different blocks at {len(sites)} sites ({listed}); the winner "
                          "changes the launch, which its MEP measured at one of them: patch the kernel's text with a "
                          "winner that keeps the launch, or set each site's launch by hand")
    bound = launch_bounds_of(variant_text, name, macros)
    if bound is None or bound == launch_bounds_of(original_text, name, macros):
        return
    over = [s for s in sites if (_threads(s.get("block") or "", macros) or bound + 1) > bound]
    if over:
        raise MepgenError(f"the winner gives {name} __launch_bounds__({bound}), but "
                          + ", ".join(f"{s['file']}:{s['line']} launches it with block {_squash(s.get('block'))}"
                                      for s in over)
                          + " (more threads, or a number patch cannot tell): that launch would fail")


def _configs(observed: list[dict]) -> str:
    shown = ", ".join(f"grid {tuple(o['grid'])} block {tuple(o['block'])} ({o.get('launches', '?')} launches)"
                      for o in observed[:6])
    return shown + (f" and {len(observed) - 6} more" if len(observed) > 6 else "")


def check_observed(name: str, launch, winner_block: list[str] | None, variant_text: str, original_text: str,
                   kernel: dict, macros: dict[str, str]) -> None:
    """MepgenError where the winner cannot hold at the configurations the application was seen launching the kernel
    with (`launch`: the MEP's spec.Launch; `winner_block`: the winner's block where it changes the launch)."""
    observed = launch.observed
    if len(observed) < 2:
        return
    blocks = launch.observed_blocks()
    if winner_block is not None and len(blocks) > 1 and [str(x) for x in winner_block] != list(launch.block):
        raise MepgenError(f"the application launched {name} with {len(blocks)} different blocks ({_configs(observed)}); "
                          "the winner's new block was measured at one of them only: patch a winner that keeps the "
                          "launch, or set each launch by hand")
    bound = launch_bounds_of(variant_text, name, macros)
    most = max(b[0] * b[1] * b[2] for b in blocks)
    if bound is not None and bound != launch_bounds_of(original_text, name, macros) and most > bound:
        raise MepgenError(f"the winner gives {name} __launch_bounds__({bound}), but the application launched it with "
                          f"blocks of up to {most} threads ({_configs(observed)}): those launches would fail")
    fixed = fixed_bound(variant_text, kernel)
    if fixed is not None and len(launch.observed_grids()) > 1:
        raise MepgenError(f"the winner's block coarsening stops at the grid of the launch its MEP measured ({fixed}), "
                          f"but the application launched {name} with other grids ({_configs(observed)}): it would do "
                          "too little or too much there")
