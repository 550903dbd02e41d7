"""Hotspot ranking: measured times from a profile when given, otherwise a stated static estimate.

The static estimate of a kernel is

    sum over its launch sites of 10^(loops around the launch, counting the loops around the calls of the
    host functions that contain it) x 4^(deepest loop nest inside the kernel) x max(1, threads / 2^20)

where threads is grid x block evaluated from the launch expressions with the application's macro values
(and -D defines) when they are all known, else left out. It ranks kernels launched in time loops, with
loops inside and large grids first, which is what a profile usually shows for proxy applications; a
profile (`--profile`) always wins over it.
"""
from __future__ import annotations

from collections import defaultdict

from ..cexpr import evaluate

STATIC_BASIS = ("static estimate: sum over launch sites of 10^(enclosing loop depth, through host callers) "
                "x 4^(kernel loop depth) x max(1, grid*block/2^20)")

def _caller_depth(calls: list[dict]) -> dict[str, int]:
    """For each host function (usr), the deepest loop nesting of the calls that reach it."""
    callers = defaultdict(list)
    for c in calls:
        callers[c["callee_usr"]].append((c["caller_usr"], c["loop_depth"]))
    memo: dict[str, int] = {}

    def depth(usr: str, stack: frozenset) -> int:
        if usr in memo:
            return memo[usr]
        best = 0
        for caller, d in callers.get(usr, ()):
            if caller in stack:
                continue
            best = max(best, d + depth(caller, stack | {usr}))
        memo[usr] = best
        return best

    return {usr: depth(usr, frozenset()) for usr in list(callers)}


def static_scores(kernels: list[dict], calls: list[dict], macros: dict[str, str]) -> None:
    """Fill kernel['rank_detail'] and kernel['score'] with the static estimate."""
    depth_of = _caller_depth(calls)
    for k in kernels:
        total, sites = 0.0, []
        for s in k["launch_sites"]:
            outer = depth_of.get(s.get("enclosing_usr") or "", 0)
            eff = s["loop_depth"] + outer
            grid, block = evaluate(s.get("grid"), macros), evaluate(s.get("block"), macros)
            threads = grid * block if grid is not None and block is not None else None
            w = 10.0 ** eff * 4.0 ** k["loop_depth"] * max(1.0, (threads or 0) / 2 ** 20)
            sites.append({"line": s["line"], "file": s["file"], "effective_loop_depth": eff, "threads": threads,
                          "weight": w})
            total += w
        k["score"] = total
        k["rank_detail"] = {"basis": "static", "sites": sites}


def profile_scores(kernels: list[dict], profile: dict[str, dict], fmt: str) -> list[str]:
    """Fill scores from measured times; returns the profiled names that matched no kernel."""
    matched = set()
    for k in kernels:
        hit = profile.get(k["qualified_name"]) or profile.get(k["name"])
        if hit is None:
            k["score"] = 0.0
            k["rank_detail"] = {"basis": fmt, "time_ns": 0.0, "launches": 0, "note": "not in the profile"}
            continue
        matched.add(k["qualified_name"] if k["qualified_name"] in profile else k["name"])
        k["score"] = hit["time_ns"]
        k["rank_detail"] = {"basis": fmt, "time_ns": hit["time_ns"], "launches": hit["launches"],
                            "profiled_names": hit["names"]}
    return sorted(set(profile) - matched)


def assign_ranks(kernels: list[dict]) -> None:
    order = sorted(kernels, key=lambda k: (-k["score"], k["qualified_name"]))
    total = sum(k["score"] for k in kernels) or 1.0
    for i, k in enumerate(order, 1):
        k["rank"] = i
        k["share"] = round(k["score"] / total, 4)
