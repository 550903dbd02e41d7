"""A winner's new launch configuration, written back where the application spells it.

The MEP's mep.yaml says how the kernel was launched in the MEP; a winner may come with a different block
size or shape and grid (the optimizer's Proposal.launch, saved beside its kernel.cu as mep.yaml). When only
a 1-D block size changes and the grid follows from it, the change lands where the block is spelled:
- a macro used only by this kernel's launch sites: its `#define` gets the new value;
- a macro other code uses too (BLOCK_SIZE): a new macro `<KERNEL>_BLOCK` is defined above the kernel and
  replaces it at this kernel's launch sites, in the block and in the grid computation that divides by it;
- a literal: replaced at the site.
Otherwise (a warp per row needs 32x the threads, a column split a 2-D block) the new block goes into a new
macro `<KERNEL>_BLOCK` (`dim3(32, 8)` for a shape) and the winner's grid is written at the site, its size
symbols spelled as the site spells them (spelling.py: MAT_N is `nrows` there): in the initializer of the
local the launch names (`const int blocks = ...`; a `dim3` declaration when the grid has several
dimensions) when nothing but this kernel's launches reads that local, else in the launch itself (heatcg's
cg_solve sizes axpy, dot and xpay with one `blocks`: only axpy's launches change). A grid over a symbol the
site cannot spell is refused with the site.
A captured MEP's launch is the recorded run's numbers, never written as such (captured_launch.py). The edits at a
site go through launch_sites.py; a grid local that other code reads is never changed: the launch gets its grid.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

from .. import cexpr
from ..errors import MepgenError
from ..spec import LAUNCH_FACTS, Spec, load_spec
from .captured_launch import captured_change, guard_param, numbers
from .launch_sites import LaunchChange, arg_span, macro_site, only_our_grids_read, replace_in_site
from .spelling import respell, site_spelling

def _dims(spec: Spec, exprs: list[str], values: dict) -> list[int] | None:
    out = [cexpr.evaluate(e, values) for e in exprs]
    return None if any(v is None for v in out) else out + [1] * (3 - len(out))


def launch_change(inventory: dict, kernel: dict, spec: Spec, new_launch: dict | None, source: bytes,
                  read=None) -> LaunchChange:
    """Edits that give the kernel's launch sites the winner's launch: of the kernel's file (`source`), and of the
    other files that launch it (`read(file)`: that file as extracted), each site in the file that holds it. A
    macro of mepgen's own (`<KERNEL>_BLOCK`) is defined above the kernel; a file that launches the kernel
    elsewhere gets the same definition (under #ifndef) right above its first launch of the kernel."""
    sites = kernel["launch_sites"]
    others = sorted({s["file"] for s in sites if s["file"] != kernel["file"]})
    if not others:
        return _launch_change(inventory, kernel, spec, new_launch, source)
    if read is None:
        raise MepgenError(f"{kernel['qualified_name']} is launched from another file than {kernel['file']} "
                          f"({others[0]}): patch needs that file to write the launch there")
    change = _launch_change(inventory, {**kernel, "launch_sites": [s for s in sites if s["file"] == kernel["file"]]},
                            spec, new_launch, source)
    for f in others:
        text = read(f)
        mine = [s for s in sites if s["file"] == f]
        part = _launch_change(inventory, {**kernel, "launch_sites": mine}, spec, new_launch, text)
        edits = list(part.edits)
        if part.prelude:
            first = min(s["start_byte"] for s in mine)
            at = text.rfind(b"\n", 0, first) + 1
            own = f"{kernel['name'].upper()}_BLOCK"
            define = re.search(rf"#define {own} (.*)", part.prelude).group(1)
            edits.append((at, at, f"#ifndef {own}  // launch block chosen by mepgen for {kernel['qualified_name']}\n"
                                  f"#define {own} {define}\n#endif\n".encode()))
        change.others[f] = edits
        change.notes += part.notes
    return change


def _launch_change(inventory: dict, kernel: dict, spec: Spec, new_launch: dict | None, source: bytes) -> LaunchChange:
    """The edits of one file (`source`) holding the launch sites `kernel["launch_sites"]`."""
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
    if old_block == new_block and old_grid == new_grid:
        return change
    sites = kernel["launch_sites"]
    if not sites:
        return change
    text = source.decode()
    if numbers(spec) and old_grid != new_grid:     # a captured launch: its grid holds for the recorded run only
        captured_change(change, inventory, kernel, old_block, new_block, old_grid, new_grid,
                        [str(x) for x in new_launch.get("grid", spec.launch.grid)], text,
                        guard_param(spec, new_launch.get("facts")))
        return change
    if not _block_explains_grid(spec, sizes, old_block, new_block, old_grid, new_grid):
        _write_launch(change, inventory, kernel, spec, new_launch, new_block, text)
        return change
    macros = inventory.get("macros", {})
    value = str(new_block[0])
    for s in sites:
        written = (s["block"] or "").strip()
        inner = re.fullmatch(r"dim3\s*\((.*)\)", written)
        written = inner.group(1).strip() if inner else written
        if re.fullmatch(r"\d+[uU]?", written):
            replace_in_site(change, text, s, written, value)
            change.notes.append(f"{s['file']}:{s['line']}: block {written} -> {value}")
        elif written in macros:
            macro_site(change, inventory, kernel, text, s, written, value)
        else:
            raise MepgenError(f"{s['file']}:{s['line']}: the block `{written}` is neither a literal nor a macro; "
                              f"set it to {value} by hand")
    return change


def _block_explains_grid(spec: Spec, sizes: dict, old_block, new_block, old_grid, new_grid) -> bool:
    """A 1-D block size change whose grid is the old grid expression with the new block size in it."""
    if old_block == new_block or old_block[1:] != [1, 1] or new_block[1:] != [1, 1]:
        return False
    block_expr = spec.launch.block[0].strip()
    if re.fullmatch(r"[A-Za-z_]\w*", block_expr):
        return _dims(spec, spec.launch.grid, {**sizes, block_expr: new_block[0]}) == new_grid
    return old_grid == new_grid


def _write_launch(change: LaunchChange, inventory: dict, kernel: dict, spec: Spec, new_launch: dict,
                  new_block: list[int], text: str) -> None:
    """The winner's block (in a new macro) and grid (spelled for each site) written at every launch site."""
    macros = set(inventory.get("macros", {}))
    winner_sizes = {**spec.sizes, **new_launch.get("sizes", {})}
    symbols = set(winner_sizes)
    changed = {k: str(v) for k, v in winner_sizes.items() if spec.sizes.get(k) != v}
    dims = [str(x) for x in new_launch.get("grid", spec.launch.grid)]
    # the block is pinned in a macro when it changes, and also when the new grid no longer names the symbol
    # the block is spelled with (a warp per row: `(nrows * 32 + 256 - 1) / 256` assumes 256 threads)
    block_symbols = {t for b in spec.launch.block for t in re.findall(r"[A-Za-z_]\w*", b)}
    block_changed = _dims(spec, spec.launch.block, spec.sizes) != new_block or \
        not any(re.search(rf"(?<![\w.]){re.escape(t)}(?![\w.])", d) for t in block_symbols for d in dims)
    shape = [str(v) for v in (new_block[:2] if new_block[2] == 1 else new_block)]
    shape = shape[:1] if shape[1:] == ["1"] else shape
    own = f"{kernel['name'].upper()}_BLOCK"
    if block_changed:
        spelled = shape[0] if len(shape) == 1 else f"dim3({', '.join(shape)})"
        change.prelude = f"// launch block chosen by mepgen for {kernel['qualified_name']}\n#define {own} {spelled}\n\n"
        change.notes.append(f"new macro {own} = {spelled} is the block at the launch sites of {kernel['name']}")
    for site in kernel["launch_sites"]:
        where = f"{site['file']}:{site['line']}"
        spelling = {**site_spelling(spec, site), **changed}
        grid = []
        for d in dims:
            text_d, missing = respell(d, spelling, symbols, macros)
            if missing:
                raise MepgenError(f"{where}: the winner's grid `{d}` uses {', '.join(sorted(set(missing)))}, which "
                                  f"the launch there does not spell; edit the launch by hand")
            grid.append(text_d)
        while len(grid) > 1 and grid[-1].strip() == "1":
            grid.pop()
        if block_changed:
            lo, hi = arg_span(text, site, 1)
            change.edits.append((lo, hi, own.encode()))
        _write_grid(change, text, site, grid, kernel["launch_sites"])


def _write_grid(change: LaunchChange, text: str, site: dict, grid: list[str], sites: list[dict]) -> None:
    """The new grid in the initializer of the local the launch names, when nothing but this kernel's launches
    reads that local (written once for all of them); otherwise, and for a grid written inline, in the launch."""
    where = f"{site['file']}:{site['line']}"
    written = (site.get("grid") or "").strip()
    new = grid[0] if len(grid) == 1 else f"dim3({', '.join(grid)})"
    decl = None
    if written in site.get("locals", {}):
        for m in re.finditer(rf"(?<![\w.]){re.escape(written)}\s*=\s*([^;]*);", text[:site["start_byte"]]):
            decl = m
        if decl is not None and " ".join(decl.group(1).split()) != " ".join(site["locals"][written].split()):
            decl = None
    # declared otherwise (`dim3 grid(1, n);`), or not found: the launch itself gets the grid, below
    if decl is not None:
        if len(grid) == 1:
            edit = (decl.start(1), decl.end(1), new.encode())
        else:
            stmt = max(text.rfind(c, 0, decl.start()) for c in ";{}") + 1
            stmt += len(text[stmt:decl.start()]) - len(text[stmt:decl.start()].lstrip())
            edit = (stmt, decl.end(), f"const dim3 {written}({', '.join(grid)});".encode())
        same = [e for e in change.edits if e[:2] == edit[:2]]
        if only_our_grids_read(text, decl.end(), written, sites) and all(e == edit for e in same):
            if not same:        # one declaration for several launches of the kernel: written once
                change.edits.append(edit)
                change.notes.append(f"{where}: grid {written} = {new}")
            return
        # the local also serves other code, or an earlier launch of the kernel wrote it in its own spelling
        # (that launch keeps reading it): this launch gets its grid itself
    lo, hi = arg_span(text, site, 0)
    change.edits.append((lo, hi, new.encode()))
    shared = f" (the launch itself gets the grid; the local `{written}` stays as it is for other code)" if written in \
        site.get("locals", {}) else ""
    change.notes.append(f"{where}: grid {text[lo:hi]} -> {new}{shared}")


def read_launch(path: Path) -> dict | None:
    """The launch section of a winner's mep.yaml (beside its kernel.cu), if there is one, with `facts`: its
    launch_facts.json (what optimize proved about the launch; {} where there is none or it does not parse)."""
    if not path.is_file():
        return None
    s = load_spec(path)
    try:
        facts = json.loads((path.parent / LAUNCH_FACTS).read_text())
    except (OSError, ValueError):
        facts = {}      # no facts: a launch patch needs none unless the site's grid is not spelled with its block
    return {"grid": s.launch.grid, "block": s.launch.block, "shared_mem": s.launch.shared_mem, "sizes": s.sizes,
            "facts": facts if isinstance(facts, dict) else {}}
