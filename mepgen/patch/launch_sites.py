"""Where a launch site spells its grid and block, and the edits that change them there (patch/launch.py and
patch/captured_launch.py write launch changes through these): the grid or block argument's span, a literal or
macro replaced inside the block, a macro the kernel's launches alone use (its `#define`) or a shared one (a new
`<KERNEL>_BLOCK` at this kernel's sites), the text that computes a grid, and whether a grid local serves other
code."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..cexpr import top_level_spans
from ..errors import MepgenError

Edit = tuple[int, int, bytes]  # start, end, replacement, in the kernel's file


@dataclass
class LaunchChange:
    edits: list[Edit] = field(default_factory=list)
    prelude: str = ""                 # `#define` lines inserted above the kernel
    notes: list[str] = field(default_factory=list)
    others: dict[str, list[Edit]] = field(default_factory=dict)   # edits of launch sites in other files, by file


def word(name: str) -> re.Pattern:
    return re.compile(rf"\b{re.escape(name)}\b")


def grid_target(text: str, site: dict) -> tuple[str, int]:
    """The text that computes the site's grid, and where it starts: the initializer of the local the launch names,
    else the launch's own grid expression."""
    grid = (site["grid"] or "").strip()
    local = site.get("locals", {}).get(grid)
    if local:
        return local, text.rfind(local, 0, site["start_byte"])
    return grid, site["start_byte"] + text[site["start_byte"]:site["end_byte"]].find(grid)


def only_our_grids_read(text: str, after: int, name: str, sites: list[dict]) -> bool:
    """Whether every use of the local `name` from `after` to the end of its block is the grid argument of one of
    the kernel's own launches (then changing its initializer changes nothing else)."""
    ours = [arg_span(text, s, 0) for s in sites if (s.get("grid") or "").strip() == name]
    for m in re.finditer(rf"(?<![\w.]){re.escape(name)}(?!\w)", text[after:block_end(text, after)]):
        at = after + m.start()
        if not any(lo <= at < hi for lo, hi in ours):
            return False
    return True


def block_end(text: str, pos: int) -> int:
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


def arg_span(text: str, site: dict, which: int) -> tuple[int, int]:
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


def replace_in_site(change: LaunchChange, text: str, site: dict, old: str, new: str) -> None:
    """Replace `old` (a macro name or a literal) inside the site's block argument by `new`."""
    lo, hi = arg_span(text, site, 1)
    written = text[lo:hi]
    replaced = re.sub(rf"(?<![\w.]){re.escape(old)}(?![\w.])", new, written)
    if replaced == written:
        raise MepgenError(f"{site['file']}:{site['line']}: `{old}` is not in the block expression `{written}`")
    change.edits.append((lo, hi, replaced.encode()))


def macro_site(change: LaunchChange, inventory: dict, kernel: dict, text: str, site: dict, macro: str,
                value: str) -> None:
    own = f"{kernel['name'].upper()}_BLOCK"
    users = len(word(macro).findall(text))
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
    replace_in_site(change, text, site, macro, own)
    # the grid: the site's grid expression, or the local it names, divides by the macro too
    target, where = grid_target(text, site)
    if target and where >= 0 and word(macro).search(target):
        new = word(macro).sub(own, target)
        if not any(e[0] == where for e in change.edits):
            change.edits.append((where, where + len(target), new.encode()))
