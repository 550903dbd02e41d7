"""Parameter search within a budget, Kernel Tuner style: a strategy takes the space (parameter -> legal
values, in a meaningful order), a budget of evaluations and a cost callback, and never enumerates the space.

`hillclimb` (the default) starts from the defaults, moves to the best unseen neighbour (one parameter one
step along its axis: numeric values by size, whatever order the space lists them in; others as listed) and restarts from a random point when the neighbourhood is exhausted; `random`
samples unseen points uniformly (the baseline it must beat). Both also work ask/tell (`suggest`), which
is how the library proposer uses them: the search evaluates, the history is the cost table.
"""
from __future__ import annotations

import itertools
import random
from dataclasses import dataclass, field
from typing import Callable

from ...errors import MepgenError

#: strategy -> its options and their defaults; unknown options are an error, not ignored
OPTIONS = {"hillclimb": {"restarts": True}, "random": {}}


def key(point: dict) -> tuple:
    return tuple(sorted((k, str(v)) for k, v in point.items()))


def size(space: dict[str, list]) -> int:
    n = 1
    for values in space.values():
        n *= max(1, len(values))
    return n


def axis(values: list) -> list:
    """The order a step moves along: numbers by size (a transformation may list its values by preference,
    e.g. the default first: bk [16, 8, 32] is still the axis 8, 16, 32), anything else as listed."""
    if values and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        return sorted(values)
    return list(values)


def neighbours(space: dict[str, list], point: dict) -> list[dict]:
    """Moves of one parameter along its axis, long strides first (4, 2, then 1 position): a pattern
    search crosses a long list in a few steps and still ends on the exact best neighbour."""
    out = []
    for stride in (4, 2, 1):
        for name, listed in space.items():
            values = axis(listed)
            i = values.index(point[name]) if point.get(name) in values else 0
            for j in (i - stride, i + stride):
                if 0 <= j < len(values) and (stride == 1 or len(values) > 2 * stride):
                    out.append({**point, name: values[j]})
    return out


def _random_unseen(space, seen, rng) -> dict | None:
    if size(space) <= 4096:
        pool = [dict(zip(space, combo)) for combo in itertools.product(*space.values())]
        pool = [p for p in pool if key(p) not in seen]
        return rng.choice(pool) if pool else None
    for _ in range(200):
        p = {n: rng.choice(v) for n, v in space.items()}
        if key(p) not in seen:
            return p
    return None


def check_options(strategy: str, options: dict | None) -> dict:
    if strategy not in OPTIONS:
        raise MepgenError(f"unknown tuning strategy '{strategy}': use {', '.join(OPTIONS)}")
    unknown = sorted(set(options or {}) - set(OPTIONS[strategy]))
    if unknown:
        raise MepgenError(f"unknown option(s) {', '.join(unknown)} for strategy {strategy}: "
                          f"it takes {', '.join(OPTIONS[strategy]) or 'none'}")
    return {**OPTIONS[strategy], **(options or {})}


def suggest(space: dict[str, list], seen: dict[tuple, tuple[dict, float | None]], k: int, rng: random.Random,
            strategy: str = "hillclimb", defaults: dict | None = None, options: dict | None = None) -> list[dict]:
    """Up to `k` unseen points to evaluate next, given `seen` (key -> (point, cost; None: failed))."""
    opts = check_options(strategy, options)
    taken = dict(seen)
    out: list[dict] = []

    def take(p):
        taken[key(p)] = (p, None)
        out.append(p)

    if not space:
        return [{}] if not seen and k > 0 else []
    start = {n: (defaults or {}).get(n, v[0]) for n, v in space.items()}
    start = {n: (x if x in space[n] else space[n][0]) for n, x in start.items()}
    while len(out) < k:
        if strategy == "hillclimb":
            if key(start) not in taken:
                take(start)
                continue
            scored = sorted((c, i, p) for i, (p, c) in enumerate(seen.values()) if c is not None)
            centre = scored[0][2] if scored else start
            fresh = [p for p in neighbours(space, centre) if key(p) not in taken]
            if fresh:
                take(fresh[0])
                continue
            if not opts["restarts"]:
                break
        p = _random_unseen(space, taken, rng)
        if p is None:
            break
        take(p)
    return out


@dataclass
class Tuned:
    best: dict | None
    best_cost: float | None
    evaluations: int
    history: list[tuple[dict, float | None]] = field(default_factory=list)


def tune(space: dict[str, list], budget: int, cost: Callable[[dict], float | None], strategy: str = "hillclimb",
         options: dict | None = None, seed: int = 0, defaults: dict | None = None) -> Tuned:
    """Spend at most `budget` calls of `cost` (lower is better; None: the point failed)."""
    rng = random.Random(seed)
    seen: dict[tuple, tuple[dict, float | None]] = {}
    history = []
    while len(seen) < budget:
        batch = suggest(space, seen, 1, rng, strategy, defaults, options)
        if not batch:
            break
        p = batch[0]
        c = cost(p)
        seen[key(p)] = (p, c)
        history.append((p, c))
    ok = [(c, p) for p, c in history if c is not None]
    best = min(ok, key=lambda t: t[0]) if ok else (None, None)
    return Tuned(best[1], best[0], len(history), history)
