"""The application's translation units in groups that share nothing: `mepgen mep --all` parses and indexes one
group at a time and drops it before the next, so its memory follows the largest group, not the application.

Two units are in one group when they read a common application file (a header: its macros, globals and
declarations), or when a call or a launch links them (a host function of one calls a function defined in the
other, a kernel of one is launched from the other). Every value trace of a kernel stays inside its group:
the trace follows calls, launches, macros and globals, all of which link units into one group here. An
inventory without the files each unit read (an older one) is one group, as before.
"""
from __future__ import annotations


class _Sets:
    def __init__(self, items):
        self.up = {i: i for i in items}

    def find(self, x):
        while self.up[x] != x:
            self.up[x] = self.up[self.up[x]]
            x = self.up[x]
        return x

    def join(self, a, b):
        self.up[self.find(a)] = self.find(b)


def groups(inv: dict, kernels: list[dict]) -> list[tuple[list[str], list[dict]]]:
    """(unit files, kernels) per group, the kernels in their given order, groups by their first kernel."""
    units = [t["file"] for t in inv["translation_units"]]
    if not units or any("reads" not in t for t in inv["translation_units"]):
        return [(units, list(kernels))]
    sets = _Sets(units)
    readers: dict[str, list[str]] = {}
    for t in inv["translation_units"]:
        for f in [t["file"], *t["reads"]]:
            readers.setdefault(f, []).append(t["file"])
    for us in readers.values():
        for u in us[1:]:
            sets.join(us[0], u)

    def unit_of(file: str) -> str | None:
        us = readers.get(file)
        return us[0] if us else None

    defined_in: dict[str, str] = {}     # function usr -> a file it is defined in
    for k in inv["kernels"]:
        for s in k["launch_sites"]:
            if s.get("enclosing_usr"):
                defined_in.setdefault(s["enclosing_usr"], s["file"])
    for c in inv.get("host_calls", []):
        defined_in.setdefault(c["caller_usr"], c["file"])
    links = [(k["file"], s["file"]) for k in inv["kernels"] for s in k["launch_sites"]]
    links += [(c["file"], defined_in[c["callee_usr"]]) for c in inv.get("host_calls", [])
              if c["callee_usr"] in defined_in]
    for a, b in links:
        ua, ub = unit_of(a), unit_of(b)
        if ua is None or ub is None:          # a file no unit read: no safe split
            return [(units, list(kernels))]
        sets.join(ua, ub)
    by_root: dict[str, tuple[list[str], list[dict]]] = {}
    for u in units:
        by_root.setdefault(sets.find(u), ([], []))[0].append(u)
    for k in kernels:
        u = unit_of(k["file"])
        if u is None:
            return [(units, list(kernels))]
        by_root[sets.find(u)][1].append(k)
    return [g for g in by_root.values() if g[1]]
