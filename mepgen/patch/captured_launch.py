"""A captured MEP's launch (the recorded run's numbers) written back in the site's own terms, never as a number: a
1-D block change over the same elements in the grid computation that divides by it, or, where the site's grid is not
spelled with its block, from the kernel's guard (ceil(N / block) of the argument the site passes for the guard's
bound; ceil(N / (block * K)) where the winner does K elements per thread); a 2-D one per axis; a grid the library wrote over the captured number (a coarsened `((4096) + 4 - 1) / 4`)
as that function of the site's grid; anything else is refused with the site (patch/launch.py decides when a launch
is captured)."""
from __future__ import annotations

import re
from typing import NamedTuple

from .. import cexpr
from ..cexpr import top_level_spans, with_block
from ..errors import MepgenError
from ..spec import Spec, integer_scalar
from .launch_sites import LaunchChange, arg_span, grid_target, macro_site, only_our_grids_read, replace_in_site, word


def captured_change(change, inventory: dict, kernel: dict, old_block, new_block, old_grid, new_grid,
                    exprs: list[str], text: str, guard=None) -> None:
    """The edits of a captured launch's winner (`exprs`: its grid as written), or MepgenError with the site.
    `guard`: the kernel parameter that bounds its one guard (guard_param), or None."""
    if not captured_grid(change, kernel, old_block, new_block, old_grid, new_grid, exprs, text):
        captured_block(change, inventory, kernel, old_block, new_block, old_grid, new_grid, text, guard)


def numbers(spec: Spec) -> bool:
    """The MEP's launch is numbers only (`mepgen capture` records the run's grid and block)."""
    return all(re.fullmatch(r"\(?\s*\d+\s*\)?", str(v).strip()) for v in [*spec.launch.grid, *spec.launch.block])


def captured_block(change: LaunchChange, inventory: dict, kernel: dict, old_block, new_block, old_grid, new_grid,
                    text: str, guard=None) -> None:
    """A captured MEP's grid is the recorded run's number of blocks: written at a site it would hold for that run's
    size only. A 1-D block change whose grid covers the same elements (both grids are ceil(N / block) of one N) lands
    where the site spells its block, a literal or a macro, in the block and in the grid computation that divides by
    it (the site's own terms: right for every size); where it does not (a block local, a grid over a size rounded
    to the old block), from the kernel's guard (guard_site); anything else is refused, with the site."""
    b1 = new_block[0]
    one_d = old_block[1:] == [1, 1] and new_block[1:] == [1, 1] and old_grid[1:] == new_grid[1:]
    if one_d and guard is not None and guard.per_thread > 1:
        per_thread_sites(change, kernel, new_grid, text, guard, b1)
        return
    if not one_d and same_elements(old_block, new_block, old_grid, new_grid, axes=2) and old_block[2] == 1 and \
            new_block[2] == 1 and old_grid[2] == new_grid[2]:
        for s in kernel["launch_sites"]:
            captured_2d(change, inventory, s, old_block, new_block, text, kernel["launch_sites"])
        return
    if not one_d or not same_elements(old_block, new_block, old_grid, new_grid, axes=1):
        raise MepgenError(f"the MEP's launch is the captured run's numbers (grid {shown(old_grid)}, block "
                          f"{shown(old_block)}) and the winner's grid {shown(new_grid)} with block {shown(new_block)} "
                          f"is not the same elements in blocks of another size: written as a number it would hold "
                          f"for that run's size only; set the launch by hand")
    for s in kernel["launch_sites"]:
        where = f"{s['file']}:{s['line']}"
        written = (s["block"] or "").strip()
        inner = re.fullmatch(r"dim3\s*\((.*)\)", written)
        written = inner.group(1).strip() if inner else written
        target, at = grid_target(text, s)
        token = re.fullmatch(r"(\d+)[uU]?", written)
        if not (token or written in inventory.get("macros", {})) or not target or \
                not word(token.group(1) if token else written).search(target):
            if guard_site(change, text, s, guard, b1):
                continue
            raise MepgenError(f"{where}: the MEP's launch is the captured run's numbers, and the grid there "
                              f"(`{target or s.get('grid')}`) is not spelled with its block `{written}`: set the block "
                              f"to {b1} and the grid to ceil(N / {b1}) by hand")
        if token is None:
            macro_site(change, inventory, kernel, text, s, written, str(b1))
            continue
        replace_in_site(change, text, s, written, str(b1))
        new = with_block(target, token.group(1), b1)            # `(n + 255) / 256` -> `(n + 127) / 128`
        local = (s.get("grid") or "").strip()
        if local in s.get("locals", {}) and not only_our_grids_read(text, at + len(target), local,
                                                                     kernel["launch_sites"]):
            lo, hi = arg_span(text, s, 0)          # the local serves other code too: this launch gets its grid
            change.edits.append((lo, hi, new.encode()))
            change.notes.append(f"{where}: block {written} -> {b1}, grid {local} -> {new} (the local `{local}` stays "
                                f"as it is for other code)")
            continue
        if not any(e[0] == at for e in change.edits):
            change.edits.append((at, at + len(target), new.encode()))
        change.notes.append(f"{where}: block {written} -> {b1}, grid {target} -> {new}")


#: a launch argument that may be written twice (in the grid too): names, members, literals, arithmetic; no call,
#: assignment or increment
_PURE = re.compile(r"[\w.\s()+\-*/%]+")


class Guard(NamedTuple):
    """What optimize proved of the MEP's kernel (best/launch_facts.json `guard`), checked against this MEP."""
    index: int              # the kernel parameter that bounds the guard: its position
    name: str               # and its name
    said: str               # the guard, `i < N`
    per_thread: int = 1     # the winner's elements per thread (its chain's vector lanes, coarsening)
    bound: int | None = None    # the MEP's value of the bound


def guard_param(spec: Spec, facts: dict | None) -> Guard | None:
    """The kernel parameter that bounds its one guard, as optimize proved it of the MEP's kernel
    (best/launch_facts.json `guard`: the kernel is exactly a global thread index and `if (i < N) {...}`, so
    ceil(N / B) blocks of B do the application's work in any block B; with `per_thread` K, the winner's threads do K
    elements each and ceil(N / (B * K)) blocks do it); checked against this MEP's parameters (an integer scalar of
    that name at that position). None where there is no such fact."""
    g = (facts or {}).get("guard")
    if not isinstance(g, dict) or not g.get("guard"):
        return None
    index, name, k = g.get("index"), g.get("param"), g.get("per_thread", 1)
    if not isinstance(index, int) or not 0 <= index < len(spec.params) or spec.params[index].name != name or \
            not integer_scalar(spec.params[index]) or not isinstance(k, int) or k < 1:
        return None
    return Guard(index, name, str(g["guard"]), k, spec.size(str(spec.params[index].value)))


def per_thread_sites(change: LaunchChange, kernel: dict, new_grid, text: str, guard: Guard, b1: int) -> None:
    """The winner does `guard.per_thread` elements per thread in blocks of `b1`: where its grid is exactly
    ceil(N / (b1 * K)) for the MEP's N, each site gets that of the argument it passes for N (guard_site); anything
    else is refused with the site."""
    k, n = guard.per_thread, guard.bound
    want = f"set the block to {b1} and the grid to ceil(N / {b1 * k}) by hand"
    if not isinstance(n, int) or n <= 0 or new_grid[0] != -(-n // (b1 * k)):
        raise MepgenError(f"the MEP's launch is the captured run's numbers and the winner's grid {new_grid[0]} is not "
                          f"ceil({guard.name} / ({b1} x {k})) for the MEP's {guard.name} = {n}: {want}")
    for s in kernel["launch_sites"]:
        if not guard_site(change, text, s, guard, b1):
            raise MepgenError(f"{s['file']}:{s['line']}: the winner does {k} elements per thread behind "
                              f"`{guard.said}`, and the argument this launch passes for `{guard.name}` is not a plain "
                              f"expression to write twice: {want}")


def guard_site(change: LaunchChange, text: str, s: dict, guard: Guard | None, b1: int) -> bool:
    """A 1-D block `b1` at site `s` from the kernel's guard (guard_param's): the grid becomes `(A + b1 - 1) / b1`
    (`(A + b1*K - 1) / (b1*K)` where the winner does K elements per thread) with A the argument the site passes for
    the guard's bound, the block `b1`; the site's own locals stay for other code. False where there is no such
    guard, or the argument is not a plain expression (a call, an assignment: written twice it could change)."""
    args = s.get("args") or []
    if guard is None or guard.index >= len(args):
        return False
    arg = args[guard.index].strip()
    if not _PURE.fullmatch(arg) or re.search(r"\w\s*\(|\+\+|--", arg):
        return False
    a = arg if re.fullmatch(r"[\w.]+", arg) else f"({arg})"
    span = b1 * guard.per_thread
    grid = f"({a} + {span} - 1) / {span}"
    glo, ghi = arg_span(text, s, 0)
    blo, bhi = arg_span(text, s, 1)
    change.edits += [(glo, ghi, grid.encode()), (blo, bhi, str(b1).encode())]
    work = "one element's work" if guard.per_thread == 1 else f"{guard.per_thread} elements' work"
    change.notes.append(f"{s['file']}:{s['line']}: grid {text[glo:ghi].strip()} -> {grid}, block "
                        f"{text[blo:bhi].strip()} -> {b1}: the kernel's threads each do {work} behind "
                        f"`{guard.said}`, and `{guard.name}` is `{arg}` here")
    return True


def same_elements(old_block, new_block, old_grid, new_grid, axes: int) -> bool:
    """Whether, along each of the first `axes` axes, both launches are ceil(N / block) blocks of one N."""
    return all(max((g0 - 1) * b0, (g1 - 1) * b1) < min(g0 * b0, g1 * b1)
               for b0, b1, g0, g1 in zip(old_block[:axes], new_block[:axes], old_grid[:axes], new_grid[:axes]))


def captured_2d(change: LaunchChange, inventory: dict, s: dict, old_block, new_block, text: str, sites) -> None:
    """A 2-D block change of a captured launch over the same elements (16x16 -> 32x4): at a site that spells its
    block `dim3(BX, BY)` (literals or macros of the captured values) and its grid `dim3(GX, GY)` with each axis's
    block token in it, the block becomes the winner's numbers and each grid component its own with its axis's new
    block (`(w+BLOCK_SIZE-1)/BLOCK_SIZE` -> `(w+32-1)/32`); a macro both axes share (one BLOCK_SIZE for 16x16) keeps
    its value for the rest of the code. Anything else is refused with the site."""
    where = f"{s['file']}:{s['line']}"
    wanted = f"set the block to {new_block[0]}x{new_block[1]} and each grid axis to ceil(N / its block) by hand"
    lo, hi = arg_span(text, s, 1)
    block = re.fullmatch(r"dim3\s*\((.*)\)", text[lo:hi].strip(), re.S)
    tokens = [block.group(1)[a:b].strip() for a, b in top_level_spans(block.group(1))] if block else []
    macros = inventory.get("macros", {})
    if len(tokens) not in (2, 3) or (tokens[2:] and tokens[2] != "1") or not all(
            (re.fullmatch(r"\d+", t) and int(t) == v) or (t in macros and cexpr.evaluate(str(macros[t]), {}) == v)
            for t, v in zip(tokens, old_block)):
        raise MepgenError(f"{where}: the MEP's launch is the captured run's numbers, and the block there "
                          f"(`{text[lo:hi].strip()}`) is not dim3 of literals or macros of {old_block[0]}x{old_block[1]}: "
                          f"{wanted}")
    target, at = grid_target(text, s)
    grid = re.fullmatch(r"dim3\s*\((.*)\)", (target or "").strip(), re.S)
    parts = [grid.group(1)[a:b].strip() for a, b in top_level_spans(grid.group(1))] if grid else []
    if len(parts) not in (2, 3) or not all(word(t).search(c) for t, c in zip(tokens, parts)):
        raise MepgenError(f"{where}: the MEP's launch is the captured run's numbers, and the grid there "
                          f"(`{target or s.get('grid')}`) is not dim3 with each axis spelled with its block: {wanted}")
    new_parts = [with_block(c, t, v) for c, t, v in zip(parts, tokens, new_block)] + parts[2:]
    new_grid = f"dim3({', '.join(new_parts)})"
    change.edits.append((lo, hi, f"dim3({new_block[0]}, {new_block[1]})".encode()))
    local = (s.get("grid") or "").strip()
    if local in s.get("locals", {}) and not only_our_grids_read(text, at + len(target), local, sites):
        glo, ghi = arg_span(text, s, 0)        # the local serves other code too: this launch gets its grid
        change.edits.append((glo, ghi, new_grid.encode()))
    elif not any(e[0] == at for e in change.edits):
        change.edits.append((at, at + len(target), new_grid.encode()))
    change.notes.append(f"{where}: block {text[lo:hi].strip()} -> dim3({new_block[0]}, {new_block[1]}), grid "
                        f"{target} -> {new_grid}")


def captured_grid(change: LaunchChange, kernel: dict, old_block, new_block, old_grid, new_grid, exprs: list[str],
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
        lo, hi = arg_span(text, s, 0)
        grid = text[lo:hi].strip()
        dim3_local = re.match(r"dim3\s*\(", s.get("locals", {}).get(grid, "")) is not None
        new = over_grid(grid, lambda x: own.sub(lambda _: f"({x})", exprs[0]), dim3_local)
        change.edits.append((lo, hi, new.encode()))
        change.notes.append(f"{s['file']}:{s['line']}: grid {grid} -> {new} (the winner's {exprs[0]} over the "
                            f"captured grid {g0})")
    return True


def over_grid(grid: str, along_x, dim3_local: bool = False) -> str:
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


def shown(dims: list[int]) -> str:
    return "x".join(str(v) for v in (dims[:1] if dims[1:] == [1, 1] else dims))
