"""A winner's new block size, written back where the application spells its launch configuration.

The MEP's mep.yaml says how the kernel was launched in the MEP; a winner may come with a different block
size (the optimizer's Proposal.launch, saved beside its kernel.cu as mep.yaml). At each launch site the
block expression as written decides where the change lands:
- a macro used only by this kernel's launch sites: its `#define` gets the new value;
- a macro other code uses too (BLOCK_SIZE): a new macro `<KERNEL>_BLOCK` is defined above the kernel and
  replaces it at this kernel's launch sites, in the block and in the grid computation that divides by it;
- a literal: replaced at the site.
A grid that does not follow from the block size (a warp per row needs 32x the threads) cannot be written
back faithfully from the MEP's size symbols alone; patch refuses it with the site, so a person edits it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from .. import cexpr
from ..errors import MepgenError
from ..spec import Spec
from ..cexpr import top_level_spans

Edit = tuple[int, int, bytes]  # start, end, replacement, in the kernel's file


@dataclass
class LaunchChange:
    edits: list[Edit] = field(default_factory=list)
    prelude: str = ""                 # `#define` lines inserted above the kernel
    notes: list[str] = field(default_factory=list)


def _dims(spec: Spec, exprs: list[str], values: dict) -> list[int] | None:
    out = [cexpr.evaluate(e, values) for e in exprs]
    return None if any(v is None for v in out) else out + [1] * (3 - len(out))


def _word(name: str) -> re.Pattern:
    return re.compile(rf"\b{re.escape(name)}\b")


def launch_change(inventory: dict, kernel: dict, spec: Spec, new_launch: dict | None, source: bytes) -> LaunchChange:
    """Edits of the kernel's file that give its launch sites the winner's block size."""
    change = LaunchChange()
    if not new_launch:
        return change
    sizes = dict(spec.sizes)
    new_sizes = {**sizes, **new_launch.get("sizes", {})}
    old_block, new_block = _dims(spec, spec.launch.block, sizes), _dims(spec, [str(x) for x in new_launch["block"]], new_sizes)
    old_grid = _dims(spec, spec.launch.grid, sizes)
    new_grid = _dims(spec, [str(x) for x in new_launch.get("grid", spec.launch.grid)], new_sizes)
    if None in (old_block, new_block, old_grid, new_grid):
        raise MepgenError("the winner's launch configuration cannot be evaluated from the MEP's sizes")
    if str(new_launch.get("shared_mem", spec.launch.shared_mem)) != str(spec.launch.shared_mem):
        raise MepgenError("the winner changes the dynamic shared memory of the launch; patch does not write that back")
    if old_block == new_block:
        if old_grid != new_grid:
            raise MepgenError(_grid_refusal(kernel, old_grid, new_grid))
        return change
    if old_block[1:] != [1, 1] or new_block[1:] != [1, 1]:
        raise MepgenError("the winner changes a multi-dimensional block; patch writes back 1-D block sizes only")
    # the grid must follow from the block size: the same grid expression with the block symbol replaced
    block_expr = spec.launch.block[0]
    symbol = block_expr.strip() if re.fullmatch(r"[A-Za-z_]\w*", block_expr.strip()) else None
    if symbol is not None:
        implied = _dims(spec, spec.launch.grid, {**sizes, symbol: new_block[0]})
        if implied != new_grid:
            raise MepgenError(_grid_refusal(kernel, implied, new_grid))
    elif old_grid != new_grid:
        raise MepgenError(_grid_refusal(kernel, old_grid, new_grid))
    sites = kernel["launch_sites"]
    if any(s["file"] != kernel["file"] for s in sites):
        raise MepgenError(f"{kernel['qualified_name']} is launched from another file than {kernel['file']}; patch "
                          f"writes launch changes back only next to the kernel")
    text = source.decode()
    macros = inventory.get("macros", {})
    value = str(new_block[0])
    for s in sites:
        written = (s["block"] or "").strip()
        inner = re.fullmatch(r"dim3\s*\((.*)\)", written)
        written = inner.group(1).strip() if inner else written
        if re.fullmatch(r"\d+[uU]?", written):
            _replace_in_site(change, text, s, written, value)
            change.notes.append(f"{s['file']}:{s['line']}: block {written} -> {value}")
        elif written in macros:
            _macro_site(change, inventory, kernel, text, s, written, value)
        else:
            raise MepgenError(f"{s['file']}:{s['line']}: the block `{written}` is neither a literal nor a macro; "
                              f"set it to {value} by hand")
    return change


def _grid_refusal(kernel: dict, old, new) -> str:
    s = kernel["launch_sites"][0]
    return (f"the winner launches {new[0]}x{new[1]}x{new[2]} blocks where the block size alone gives "
            f"{old[0]}x{old[1]}x{old[2]}; patch cannot write that grid back at {s['file']}:{s['line']}: edit the launch "
            f"by hand (the winner's mep.yaml has the expression)")


def _block_span(text: str, site: dict) -> tuple[int, int]:
    """Where the block argument of the launch is written: the second item of <<<...>>>, or the third
    argument of cudaLaunchKernel(func, grid, block, ...)."""
    start, end = site["start_byte"], site["end_byte"]
    body = text[start:end]
    if site["kind"] == "triple_chevron":
        a, b, item = body.find("<<<") + 3, body.find(">>>"), 1
    else:
        a, b, item = body.find("(") + 1, body.rfind(")"), 2
    spans = top_level_spans(body[a:b])
    if len(spans) <= item:
        raise MepgenError(f"{site['file']}:{site['line']}: cannot find the block expression in the launch")
    lo, hi = spans[item]
    return start + a + lo, start + a + hi


def _replace_in_site(change: LaunchChange, text: str, site: dict, old: str, new: str) -> None:
    """Replace `old` (a macro name or a literal) inside the site's block argument by `new`."""
    lo, hi = _block_span(text, site)
    written = text[lo:hi]
    replaced = re.sub(rf"(?<![\w.]){re.escape(old)}(?![\w.])", new, written)
    if replaced == written:
        raise MepgenError(f"{site['file']}:{site['line']}: `{old}` is not in the block expression `{written}`")
    change.edits.append((lo, hi, replaced.encode()))


def _macro_site(change: LaunchChange, inventory: dict, kernel: dict, text: str, site: dict, macro: str,
                value: str) -> None:
    own = f"{kernel['name'].upper()}_BLOCK"
    users = len(_word(macro).findall(text))
    m = re.search(rf"^[ \t]*#[ \t]*define[ \t]+{re.escape(macro)}[ \t]+(\S+)", text, re.M)
    only_here = m is not None and users == len(kernel["launch_sites"]) + 1 and \
        macro not in {x["name"] for x in kernel["closure"]["macros"]}
    if only_here:  # the macro exists for this kernel's launches alone: its definition changes
        if not any(e[0] == m.start(1) for e in change.edits):
            change.edits.append((m.start(1), m.end(1), value.encode()))
            change.notes.append(f"#define {macro} {m.group(1)} -> {value}")
        return
    if not change.prelude:
        change.prelude = f"// block size chosen by mepgen for {kernel['qualified_name']} ({macro} is shared)\n" \
                         f"#define {own} {value}\n\n"
        change.notes.append(f"new macro {own} = {value} replaces {macro} at the launch sites of {kernel['name']}")
    _replace_in_site(change, text, site, macro, own)
    # the grid: the site's grid expression, or the local it names, divides by the macro too
    grid = (site["grid"] or "").strip()
    local = site.get("locals", {}).get(grid)
    target, where = (local, text.rfind(local, 0, site["start_byte"])) if local else (grid, site["start_byte"] +
                                                                                     text[site["start_byte"]:site["end_byte"]].find(grid))
    if target and where >= 0 and _word(macro).search(target):
        new = _word(macro).sub(own, target)
        if not any(e[0] == where for e in change.edits):
            change.edits.append((where, where + len(target), new.encode()))


def read_launch(path: Path) -> dict | None:
    """The launch section of a winner's mep.yaml (beside its kernel.cu), if there is one."""
    from ..spec import load_spec
    if not path.is_file():
        return None
    s = load_spec(path)
    return {"grid": s.launch.grid, "block": s.launch.block, "shared_mem": s.launch.shared_mem, "sizes": s.sizes}
