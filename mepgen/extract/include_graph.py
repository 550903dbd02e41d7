"""The #include graph of a translation unit, as the closure reads it: which file a directive names, and which
directives are in effect where a kernel's file is read."""
from __future__ import annotations

from typing import Callable


def included_file(directive):
    """The file an #include names, or None when it was not found (libclang's binding asserts on that)."""
    try:
        return directive.get_included_file()
    except AssertionError:
        return None


def context_includes(includes: dict[str, list[dict]], rel: Callable[[str], str], kfile: str) -> list[dict]:
    """The #includes in effect where `kfile` is read that it does not make itself: those of each file that includes
    it (before that line, up to the translation unit's main file), and those of the application's headers it
    includes in turn. `main.cu` includes <stdint.h>, then "kernels.h" with the kernel: the kernel's uint32_t comes
    from main.cu's include, which kernels.h never names. `includes`: file -> its directives (each with `line` and,
    for an application file, `resolved`: its path as `rel` gives it)."""
    by_rel = {rel(f): f for f in includes}
    out: list[dict] = []
    seen = {kfile}
    up = [kfile]
    while up:                       # the files that include it, and theirs
        here = rel(up.pop())
        for f, incs in includes.items():
            at = next((i["line"] for i in incs if i.get("resolved") == here), None)
            if at is None:
                continue
            out += [i for i in incs if i["line"] < at]
            if f not in seen:
                seen.add(f)
                up.append(f)
    down = [kfile]
    while down:                     # the application's headers it includes, and theirs
        for i in includes.get(down.pop(), []):
            f = by_rel.get(i.get("resolved") or "")
            if f is not None and f not in seen:
                seen.add(f)
                out += includes.get(f, [])
                down.append(f)
    return out
