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

import ast
import operator
from collections import defaultdict

STATIC_BASIS = ("static estimate: sum over launch sites of 10^(enclosing loop depth, through host callers) "
                "x 4^(kernel loop depth) x max(1, grid*block/2^20)")

_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
        ast.Div: operator.floordiv, ast.Mod: operator.mod, ast.LShift: operator.lshift, ast.RShift: operator.rshift}


def evaluate(expr: str | None, macros: dict[str, str], depth: int = 0) -> int | None:
    """Integer value of a C expression over object-like macros; None when anything is unknown."""
    if expr is None or depth > 20:
        return None
    text = expr.strip().replace("&&", " and ").replace("||", " or ")
    for suffix in ("u", "U", "l", "L", "ul", "UL"):
        text = text.replace(f"{suffix})", ")")
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError:
        return None

    def ev(node):
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return int(node.value)
        if isinstance(node, ast.Name):
            if node.id in macros:
                v = evaluate(macros[node.id], macros, depth + 1)
                if v is None:
                    raise ValueError(node.id)
                return v
            raise ValueError(node.id)
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            right = ev(node.right)
            if isinstance(node.op, (ast.Div, ast.FloorDiv, ast.Mod)) and right == 0:
                raise ValueError("division by zero")
            return _OPS[type(node.op)](ev(node.left), right)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            v = ev(node.operand)
            return -v if isinstance(node.op, ast.USub) else v
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dim3":
            v = 1
            for a in node.args:
                v *= ev(a)
            return v
        raise ValueError(ast.dump(node))

    try:
        return ev(tree)
    except (ValueError, OverflowError, TypeError):
        return None


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
