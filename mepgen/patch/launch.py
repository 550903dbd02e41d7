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
A captured MEP's launch is the recorded run's numbers, never written as such: a 1-D block change over the same
elements lands in the site's own grid computation (_captured_block), a grid the library wrote over the captured
number (a coarsened `((4096) + 4 - 1) / 4`) as that function of the site's grid (_captured_grid); anything else is
refused with the site. A grid local that other code reads is never changed: the launch gets its grid itself.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from .. import cexpr
from ..errors import MepgenError
from ..spec import Spec, load_spec
from ..cexpr import top_level_spans, with_block
from .spelling import respell, site_spelling

Edit = tuple[int, int, bytes]  # start, end, replacement, in the kernel's file


@dataclass
class LaunchChange:
    edits: list[Edit] = field(default_factory=list)
    prelude: str = ""                 # `#define` lines inserted above the kernel
    notes: list[str] = field(default_factory=list)
    others: dict[str, list[Edit]] = field(default_factory=dict)   # edits of launch sites in other files, by file


def _dims(spec: Spec, exprs: list[str], values: dict) -> list[int] | None:
    out = [cexpr.evaluate(e, values) for e in exprs]
    return None if any(v is None for v in out) else out + [1] * (3 - len(out))


def _word(name: str) -> re.Pattern:
    return re.compile(rf"\b{re.escape(name)}\b")


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
    if _numbers(spec) and old_grid != new_grid:     # a captured launch: its grid holds for the recorded run only
        exprs = [str(x) for x in new_launch.get("grid", spec.launch.grid)]
        if not _captured_grid(change, kernel, old_block, new_block, old_grid, new_grid, exprs, text):
            _captured_block(change, inventory, kernel, old_block, new_block, old_grid, new_grid, text)
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
            _replace_in_site(change, text, s, written, value)
            change.notes.append(f"{s['file']}:{s['line']}: block {written} -> {value}")
        elif written in macros:
            _macro_site(change, inventory, kernel, text, s, written, value)
        else:
            raise MepgenError(f"{s['file']}:{s['line']}: the block `{written}` is neither a literal nor a macro; "
                              f"set it to {value} by hand")
    return change


def _numbers(spec: Spec) -> bool:
    """The MEP's launch is numbers only (`mepgen capture` records the run's grid and block)."""
    return all(re.fullmatch(r"\(?\s*\d+\s*\)?", str(v).strip()) for v in [*spec.launch.grid, *spec.launch.block])


def _captured_block(change: LaunchChange, inventory: dict, kernel: dict, old_block, new_block, old_grid, new_grid,
                    text: str) -> None:
    """A captured MEP's grid is the recorded run's number of blocks: written at a site it would hold for that run's
    size only. A 1-D block change whose grid covers the same elements (both grids are ceil(N / block) of one N) lands
    where the site spells its block, a literal or a macro, in the block and in the grid computation that divides by
    it (the site's own terms: right for every size); anything else is refused, with the site."""
    b0, b1, g0, g1 = old_block[0], new_block[0], old_grid[0], new_grid[0]
    one_d = old_block[1:] == [1, 1] and new_block[1:] == [1, 1] and old_grid[1:] == new_grid[1:]
    if not one_d and _same_elements(old_block, new_block, old_grid, new_grid, axes=2) and old_block[2] == 1 and \
            new_block[2] == 1 and old_grid[2] == new_grid[2]:
        for s in kernel["launch_sites"]:
            _captured_2d(change, inventory, s, old_block, new_block, text, kernel["launch_sites"])
        return
    if not one_d or not _same_elements(old_block, new_block, old_grid, new_grid, axes=1):
        raise MepgenError(f"the MEP's launch is the captured run's numbers (grid {_shown(old_grid)}, block "
                          f"{_shown(old_block)}) and the winner's grid {_shown(new_grid)} with block {_shown(new_block)} "
                          f"is not the same elements in blocks of another size: written as a number it would hold "
                          f"for that run's size only; set the launch by hand")
    for s in kernel["launch_sites"]:
        where = f"{s['file']}:{s['line']}"
        written = (s["block"] or "").strip()
        inner = re.fullmatch(r"dim3\s*\((.*)\)", written)
        written = inner.group(1).strip() if inner else written
        target, at = _grid_target(text, s)
        token = re.fullmatch(r"(\d+)[uU]?", written)
        if not (token or written in inventory.get("macros", {})) or not target or \
                not _word(token.group(1) if token else written).search(target):
            raise MepgenError(f"{where}: the MEP's launch is the captured run's numbers, and the grid there "
                              f"(`{target or s.get('grid')}`) is not spelled with its block `{written}`: set the block "
                              f"to {b1} and the grid to ceil(N / {b1}) by hand")
        if token is None:
            _macro_site(change, inventory, kernel, text, s, written, str(b1))
            continue
        _replace_in_site(change, text, s, written, str(b1))
        new = with_block(target, token.group(1), b1)            # `(n + 255) / 256` -> `(n + 127) / 128`
        local = (s.get("grid") or "").strip()
        if local in s.get("locals", {}) and not _only_our_grids_read(text, at + len(target), local,
                                                                     kernel["launch_sites"]):
            lo, hi = _arg_span(text, s, 0)          # the local serves other code too: this launch gets its grid
            change.edits.append((lo, hi, new.encode()))
            change.notes.append(f"{where}: block {written} -> {b1}, grid {local} -> {new} (the local `{local}` stays "
                                f"as it is for other code)")
            continue
        if not any(e[0] == at for e in change.edits):
            change.edits.append((at, at + len(target), new.encode()))
        change.notes.append(f"{where}: block {written} -> {b1}, grid {target} -> {new}")


def _same_elements(old_block, new_block, old_grid, new_grid, axes: int) -> bool:
    """Whether, along each of the first `axes` axes, both launches are ceil(N / block) blocks of one N."""
    return all(max((g0 - 1) * b0, (g1 - 1) * b1) < min(g0 * b0, g1 * b1)
               for b0, b1, g0, g1 in zip(old_block[:axes], new_block[:axes], old_grid[:axes], new_grid[:axes]))


def _captured_2d(change: LaunchChange, inventory: dict, s: dict, old_block, new_block, text: str, sites) -> None:
    """A 2-D block change of a captured launch over the same elements (16x16 -> 32x4): at a site that spells its
    block `dim3(BX, BY)` (literals or macros of the captured values) and its grid `dim3(GX, GY)` with each axis's
    block token in it, the block becomes the winner's numbers and each grid component its own with its axis's new
    block (`(w+BLOCK_SIZE-1)/BLOCK_SIZE` -> `(w+32-1)/32`); a macro both axes share (one BLOCK_SIZE for 16x16) keeps
    its value for the rest of the code. Anything else is refused with the site."""
    where = f"{s['file']}:{s['line']}"
    wanted = f"set the block to {new_block[0]}x{new_block[1]} and each grid axis to ceil(N / its block) by hand"
    lo, hi = _arg_span(text, s, 1)
    block = re.fullmatch(r"dim3\s*\((.*)\)", text[lo:hi].strip(), re.S)
    tokens = [block.group(1)[a:b].strip() for a, b in top_level_spans(block.group(1))] if block else []
    macros = inventory.get("macros", {})
    if len(tokens) not in (2, 3) or (tokens[2:] and tokens[2] != "1") or not all(
            (re.fullmatch(r"\d+", t) and int(t) == v) or (t in macros and cexpr.evaluate(str(macros[t]), {}) == v)
            for t, v in zip(tokens, old_block)):
        raise MepgenError(f"{where}: the MEP's launch is the captured run's numbers, and the block there "
                          f"(`{text[lo:hi].strip()}`) is not dim3 of literals or macros of {old_block[0]}x{old_block[1]}: "
                          f"{wanted}")
    target, at = _grid_target(text, s)
    grid = re.fullmatch(r"dim3\s*\((.*)\)", (target or "").strip(), re.S)
    parts = [grid.group(1)[a:b].strip() for a, b in top_level_spans(grid.group(1))] if grid else []
    if len(parts) not in (2, 3) or not all(_word(t).search(c) for t, c in zip(tokens, parts)):
        raise MepgenError(f"{where}: the MEP's launch is the captured run's numbers, and the grid there "
                          f"(`{target or s.get('grid')}`) is not dim3 with each axis spelled with its block: {wanted}")
    new_parts = [with_block(c, t, v) for c, t, v in zip(parts, tokens, new_block)] + parts[2:]
    new_grid = f"dim3({', '.join(new_parts)})"
    change.edits.append((lo, hi, f"dim3({new_block[0]}, {new_block[1]})".encode()))
    local = (s.get("grid") or "").strip()
    if local in s.get("locals", {}) and not _only_our_grids_read(text, at + len(target), local, sites):
        glo, ghi = _arg_span(text, s, 0)        # the local serves other code too: this launch gets its grid
        change.edits.append((glo, ghi, new_grid.encode()))
    elif not any(e[0] == at for e in change.edits):
        change.edits.append((at, at + len(target), new_grid.encode()))
    change.notes.append(f"{where}: block {text[lo:hi].strip()} -> dim3({new_block[0]}, {new_block[1]}), grid "
                        f"{target} -> {new_grid}")


def _captured_grid(change: LaunchChange, kernel: dict, old_block, new_block, old_grid, new_grid, exprs: list[str],
                   text: str) -> bool:
    """A winner with the captured block whose grid along x is written over the captured grid's number, as the
    library writes a coarsened grid (`((4096) + 4 - 1) / 4`: 4 elements per thread; vector_elements, coarsen,
    coarsen_blocks), lands at each launch site as that function of the site's own grid: the library's rule, which
    it applies to a symbolic grid alike, right for every size. Nothing is written where the winner is not of that
    form (False: _captured_block decides)."""
    g0 = old_grid[0]
    own = re.compile(rf"\(\s*{g0}\s*\)")
    if old_block != new_block or old_grid[1:] != new_grid[1:] or len(own.findall(exprs[0])) != 1 \
            or re.fullmatch(r"\(?\s*\d+\s*\)?", exprs[0].strip()):
        return False
    for s in kernel["launch_sites"]:
        lo, hi = _arg_span(text, s, 0)
        grid = text[lo:hi].strip()
        dim3_local = re.match(r"dim3\s*\(", s.get("locals", {}).get(grid, "")) is not None
        new = _over_grid(grid, lambda x: own.sub(lambda _: f"({x})", exprs[0]), dim3_local)
        change.edits.append((lo, hi, new.encode()))
        change.notes.append(f"{s['file']}:{s['line']}: grid {grid} -> {new} (the winner's {exprs[0]} over the "
                            f"captured grid {g0})")
    return True


def _over_grid(grid: str, along_x, dim3_local: bool = False) -> str:
    """The launch grid `grid` with its x component replaced by `along_x(x)`, y and z kept: an arithmetic expression
    is an integer (a dim3 has no arithmetic), `dim3(x, y)` is taken apart, a local declared as a dim3
    (`dim3_local`) read by its members; anything else (a local of another type, a call) may be either, read through
    dim3's own constructor, which takes both."""
    if dim3_local and re.fullmatch(r"[A-Za-z_]\w*", grid):
        return f"dim3({along_x(f'{grid}.x')}, {grid}.y, {grid}.z)"
    ctor = re.fullmatch(r"dim3\s*\((.*)\)", grid, re.S)
    if ctor:
        body = ctor.group(1)
        parts = [body[a:b].strip() for a, b in top_level_spans(body)]
        return "dim3(" + ", ".join([along_x(parts[0]), *parts[1:]]) + ")"
    if re.fullmatch(r"\d+[uUlL]*", grid) or (re.search(r"[-+*/%]", grid)
                                             and not re.fullmatch(r"[\w.:]+\s*\(.*\)", grid, re.S)):
        return along_x(grid)
    return f"dim3({along_x(f'dim3({grid}).x')}, dim3({grid}).y, dim3({grid}).z)"


def _shown(dims: list[int]) -> str:
    return "x".join(str(v) for v in (dims[:1] if dims[1:] == [1, 1] else dims))


def _grid_target(text: str, site: dict) -> tuple[str, int]:
    """The text that computes the site's grid, and where it starts: the initializer of the local the launch names,
    else the launch's own grid expression."""
    grid = (site["grid"] or "").strip()
    local = site.get("locals", {}).get(grid)
    if local:
        return local, text.rfind(local, 0, site["start_byte"])
    return grid, site["start_byte"] + text[site["start_byte"]:site["end_byte"]].find(grid)


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
            lo, hi = _arg_span(text, site, 1)
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
        if _only_our_grids_read(text, decl.end(), written, sites) and all(e == edit for e in same):
            if not same:        # one declaration for several launches of the kernel: written once
                change.edits.append(edit)
                change.notes.append(f"{where}: grid {written} = {new}")
            return
        # the local also serves other code, or an earlier launch of the kernel wrote it in its own spelling
        # (that launch keeps reading it): this launch gets its grid itself
    lo, hi = _arg_span(text, site, 0)
    change.edits.append((lo, hi, new.encode()))
    shared = f" (the launch itself gets the grid; the local `{written}` stays as it is for other code)" if written in \
        site.get("locals", {}) else ""
    change.notes.append(f"{where}: grid {text[lo:hi]} -> {new}{shared}")


def _only_our_grids_read(text: str, after: int, name: str, sites: list[dict]) -> bool:
    """Whether every use of the local `name` from `after` to the end of its block is the grid argument of one of
    the kernel's own launches (then changing its initializer changes nothing else)."""
    ours = [_arg_span(text, s, 0) for s in sites if (s.get("grid") or "").strip() == name]
    for m in re.finditer(rf"(?<![\w.]){re.escape(name)}(?!\w)", text[after:_block_end(text, after)]):
        at = after + m.start()
        if not any(lo <= at < hi for lo, hi in ours):
            return False
    return True


def _block_end(text: str, pos: int) -> int:
    """The offset of the `}` that closes the block `pos` is in (comments and literals skipped), or the text's end."""
    depth, i, n = 0, pos, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            i = text.find("\n", i)
            i = n if i < 0 else i
        elif text.startswith("/*", i):
            i = text.find("*/", i + 2)
            i = n if i < 0 else i + 1
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            i = j
        elif c == "{":
            depth += 1
        elif c == "}":
            if depth == 0:
                return i
            depth -= 1
        i += 1
    return n


def _arg_span(text: str, site: dict, which: int) -> tuple[int, int]:
    """Where the launch's grid (which=0) or block (which=1) is written: an item of <<<...>>>, or an
    argument of cudaLaunchKernel(func, grid, block, ...)."""
    start, end = site["start_byte"], site["end_byte"]
    body = text[start:end]
    if site["kind"] == "triple_chevron":
        a, b, item = body.find("<<<") + 3, body.find(">>>"), which
    else:
        a, b, item = body.find("(") + 1, body.rfind(")"), which + 1
    spans = top_level_spans(body[a:b])
    if len(spans) <= item:
        raise MepgenError(f"{site['file']}:{site['line']}: cannot find the {('grid', 'block')[which]} expression "
                          f"in the launch")
    lo, hi = spans[item]
    return start + a + lo, start + a + hi


def _replace_in_site(change: LaunchChange, text: str, site: dict, old: str, new: str) -> None:
    """Replace `old` (a macro name or a literal) inside the site's block argument by `new`."""
    lo, hi = _arg_span(text, site, 1)
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
    target, where = _grid_target(text, site)
    if target and where >= 0 and _word(macro).search(target):
        new = _word(macro).sub(own, target)
        if not any(e[0] == where for e in change.edits):
            change.edits.append((where, where + len(target), new.encode()))


def read_launch(path: Path) -> dict | None:
    """The launch section of a winner's mep.yaml (beside its kernel.cu), if there is one."""
    if not path.is_file():
        return None
    s = load_spec(path)
    return {"grid": s.launch.grid, "block": s.launch.block, "shared_mem": s.launch.shared_mem, "sizes": s.sizes}
