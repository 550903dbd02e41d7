"""Several definitions of one kernel: which one the application's build compiles.

A folder may hold a leftover variant of the built file that defines the same kernels (same qualified name and
parameter types) with other bodies. The MEP, the capture and the patch must use the definition the binary runs,
so each such group is settled here from what the build compiles (compile_commands.json's entries, else the
sources the Makefile's default goal or CMake's targets name, each with the files it #includes):

- one definition compiled: it is the kernel (`definition: {built: true, others: [...]}`), it takes the plain id,
  and the others are marked `not_built` with the reason (no MEP, no capture, no patch of them);
- none or several compiled (two programs of one folder, or build files mepgen cannot read): every definition is
  marked `ambiguous` with the candidates; naming the kernel by its qualified name is refused with them listed,
  and `mepgen capture` tells them apart by the application's binary (capture/definition.py). Never a pick.
"""
from __future__ import annotations

def _key(k: dict) -> tuple:
    return k["qualified_name"], tuple(" ".join(str(p.get("type", "")).split()) for p in k.get("params", []))


def built_files(direct: set[str] | None, results: list[dict]) -> set[str] | None:
    """The application's files the build compiles: the sources it names and every file of the application
    they #include (a .cu included by the built one); None when the build's sources are unknown."""
    if not direct:
        return None
    out = set(direct)
    for r in results:
        if r["file"] in direct:
            out.update(r.get("files", []))
    return out


def mark_definitions(kernels: list[dict], built: set[str] | None, how: str, kernel_id) -> list[str]:
    """Mark each group of definitions of one kernel (see the module's text); returns a line per group for the
    log. `kernel_id(qualified)` is the plain id a kernel gets when it has no twin."""
    groups: dict[tuple, list[dict]] = {}
    for k in kernels:
        groups.setdefault(_key(k), []).append(k)
    lines = []
    for (q, _), group in groups.items():
        if len({k["file"] for k in group}) < 2:
            continue
        where = lambda k: f"{k['file']}:{k['start_line']}"      # noqa: E731
        chosen = [k for k in group if built is not None and k["file"] in built]
        if len(chosen) == 1:
            b = chosen[0]
            others = [k for k in group if k is not b]
            b["definition"] = {"built": True, "how": how, "others": [where(k) for k in others]}
            same_name = [k for k in kernels if k["qualified_name"] == q]
            if len(same_name) == len(group):        # no overload of another signature: the built one is `q`
                b["id"] = kernel_id(q)
            for k in others:
                k["not_built"] = (f"{where(k)} is not compiled by the application's build ({how}); the definition "
                                  f"it compiles is {where(b)} (id {b['id']})")
            lines.append(f"{q}: {len(group)} definitions; the build compiles {where(b)} ({how}); "
                         f"not compiled: {', '.join(where(k) for k in others)}")
            continue
        state = (f"the build compiles {len(chosen)} of them" if chosen else
                 "the build compiles none of them" if built is not None else
                 "which sources the build compiles is not known (no compile_commands.json, no Makefile or "
                 "CMakeLists.txt naming them)")
        for k in group:
            k["definition"] = {"built": None, "ambiguous": [{"id": x["id"], "at": where(x)} for x in group],
                               "reason": state}
        lines.append(f"{q}: {len(group)} definitions ({', '.join(where(k) for k in group)}); {state}: "
                     "`mepgen capture` tells them apart by the application's binary")
    return lines
