"""The library proposer (composition, refusals, history-driven tuning) and the tuning strategies."""
from __future__ import annotations

import random
import statistics

import pytest

from library_fixtures import load
from mepgen.errors import MepgenError
from mepgen.evaluate.results import EvalResult, Timed
from mepgen.optimize.library.loop import run_library
from mepgen.optimize.library.proposer import LibraryProposer
from mepgen.optimize.library.tuning import axis, neighbours, suggest, tune
from mepgen.optimize.proposer import Attempt, Context


@pytest.fixture(scope="module")
def meps(library_meps):
    return library_meps


def ctx_for(mep):
    src, spec, _ = load(mep)
    return Context(spec=spec, mep_dir=mep, original=src.text, gpu={})


def fake_result(speedup: float | None) -> EvalResult:
    r = EvalResult(name="x", key="k", backend="fake")
    if speedup is None:
        r.status = "wrong_result"
    else:
        r.timed = Timed(median_ms=1.0 / speedup, spread=0.0, min_ms=0.1, max_ms=1.0, launches=1, rounds=1,
                        speedup=speedup, decision="faster" if speedup > 1.02 else "same")
    return r


def test_first_round_covers_every_applicable_transformation(meps):
    ctx = ctx_for(meps["analysis.dense_matvec"])
    p = LibraryProposer()
    props = p.propose(ctx, None, 6)
    names = [x.transformations[0]["name"] for x in props]
    assert names[0] == "warp_per_row" and {"scalar_replace", "restrict_ldg", "unroll"} <= set(names)
    assert "grid-stride" in p.refusals["privatize_histogram"]
    assert all(x.source == "library" and x.change for x in props)


def test_composition_continues_from_the_parent(meps):
    ctx = ctx_for(meps["analysis.dense_matvec"])
    p = LibraryProposer()
    first = p.propose(ctx, None, 1)[0]
    parent = Attempt("a0", first, fake_result(10.0))
    ctx.history.append(parent)
    props = p.propose(ctx, parent, 4)
    assert props and all(x.transformations[0] == first.transformations[0] for x in props)
    assert all(len(x.transformations) == 2 for x in props)
    assert all("mepgen_lane" in x.text for x in props)                  # built on the warp-per-row text
    assert all(x.launch is not None for x in props)                      # the parent's launch carries over
    assert p.refusals["warp_per_row"] == "already applied on this path"


def test_a_parent_asked_again_is_not_analysed_again(meps):
    """The search asks the original (and the best) again in later rounds: the parent's analysis (every
    transformation's space and first point) is kept, and what comes out is what a fresh proposer gives."""
    ctx = ctx_for(meps["analysis.dense_matvec"])
    p = LibraryProposer()
    calls = []
    for t in p.transformations:
        t.space = (lambda f, name: lambda *a: calls.append(name) or f(*a))(t.space, t.name)
    first = p.propose(ctx, None, 3)
    analysed = len(calls)
    assert analysed >= len({x.transformations[0]["name"] for x in first})
    ctx.history += [Attempt(f"a{i}", x, fake_result(1.5)) for i, x in enumerate(first)]
    again = p.propose(ctx, None, 3)
    assert len(calls) == analysed                         # no space asked for again
    other = LibraryProposer()
    fresh = other.propose(ctx, None, 3)
    assert [x.text for x in again] == [x.text for x in fresh] and [x.change for x in again] == [x.change for x in fresh]
    assert {x.text for x in again}.isdisjoint({x.text for x in first})    # the history still steers the points
    assert p.refusals == other.refusals and "privatize_histogram" in p.refusals    # the parent's reasons, told again


def test_history_steers_the_parameters(meps):
    ctx = ctx_for(meps["analysis.dense_matvec"])
    p = LibraryProposer(transformations=[t for t in LibraryProposer().transformations if t.name == "warp_per_row"])
    seen = []
    for _ in range(4):
        for prop in p.propose(ctx, None, 1):
            params = prop.transformations[0]["params"]
            seen.append(params)
            ctx.history.append(Attempt(f"a{len(ctx.history)}", prop,
                                       fake_result(20.0 if params["tpr"] == 16 else 5.0)))
    assert seen[0] == {"tpr": 32, "block": 256, "vec": 1}
    assert len({tuple(sorted(s.items())) for s in seen}) == len(seen)   # never the same point twice


def test_library_loop_with_a_fake_evaluator(meps):
    ctx = ctx_for(meps["analysis.dense_matvec"])
    gains = {"warp_per_row": 10.0, "restrict_ldg": 1.1}

    def evaluate(props):
        out = []
        for p in props:
            g = 1.0
            for t in p.transformations:
                g *= gains.get(t["name"], 0.99)
            out.append(fake_result(g))
        return out
    history = run_library(ctx, evaluate, budget=24, per_round=6)
    assert len(history) <= 24
    best = max(history, key=lambda a: a.result.timed.speedup)
    assert [t["name"] for t in best.proposal.transformations][:2] == ["warp_per_row", "restrict_ldg"]


def _cost(p):       # a tuning-like surface: a broad basin (occupancy vs. work per thread) with small bumps
    return (p["a"] - 11) ** 2 + 0.5 * (p["b"] - 3) ** 2 + 0.8 * ((p["a"] * 7 + p["b"]) % 3 == 0)


def test_hillclimb_beats_random_search():
    space = {"a": list(range(16)), "b": list(range(8))}
    hc = [tune(space, 20, _cost, "hillclimb", seed=s, defaults={"a": 4, "b": 0}).best_cost for s in range(30)]
    rnd = [tune(space, 20, _cost, "random", seed=s).best_cost for s in range(30)]
    assert statistics.mean(hc) < statistics.mean(rnd)


def test_strategy_options_are_declared():
    with pytest.raises(MepgenError, match="unknown option"):
        tune({"a": [1, 2]}, 2, lambda p: 1.0, "random", options={"temperature": 3})
    with pytest.raises(MepgenError, match="unknown tuning strategy"):
        suggest({"a": [1]}, {}, 1, random.Random(0), "annealing")
    assert tune({"a": [1, 2, 3]}, 10, lambda p: p["a"]).evaluations == 3     # a small space is not re-sampled


def test_hillclimb_steps_along_numeric_order_not_list_order():
    # tile_matmul lists bk by preference, [16, 8, 32]: from 16 a step must reach both 8 and 32
    moves = {p["bk"] for p in neighbours({"bk": [16, 8, 32]}, {"bk": 16})}
    assert moves == {8, 32}
    assert axis([16, 8, 32]) == [8, 16, 32] and axis(["x", "a"]) == ["x", "a"]
    # listed by preference, the search still walks by size (16, 4, 64, 32, 128) on a cost falling with bk
    r = tune({"bk": [16, 8, 32, 64, 128, 4]}, 5, lambda p: 1.0 / p["bk"], defaults={"bk": 16})
    assert r.best == {"bk": 128}
