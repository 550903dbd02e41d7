"""LibraryProposer: mepgen's own, deterministic proposer (no network), the default of `mepgen optimize`.

From the parent's kernel (the original when there is no parent) it asks every transformation for its
applicability; each that applies contributes parameter points chosen by the tuning strategy from the
costs already in the history (the evaluator's verdicts on earlier points of the same transformation on
the same parent). Proposals continue from the parent's text and launch, so wins compose: the chain of
transformations travels in Proposal.transformations. The rewrite's word is never taken: the evaluator
judges every proposal.
"""
from __future__ import annotations

import hashlib
import random

from ..proposer import Attempt, Context, Proposal
from .base import current_launch, launch_held
from .catalog import all_transformations, in_order
from .source import KernelSource, Refused
from .tuning import key, suggest


def cost_of(result) -> float | None:
    """Lower is better: the candidate's time relative to the baseline timed alongside it; None when not ok."""
    if not getattr(result, "ok", False) or getattr(result, "timed", None) is None:
        return None
    t = result.timed
    return 1.0 / t.speedup if t.speedup else t.median_ms


class LibraryProposer:
    name = "library"
    #: its proposals are a function of the parent, the spec and the history alone: lookahead.py may ask ahead
    speculative = True
    MEMO = 32           # parents whose analysis is kept (a search of 25 candidates asks about a dozen)

    def __init__(self, transformations=None, strategy: str = "hillclimb", seed: int = 0):
        self.transformations = transformations if transformations is not None else all_transformations()
        self.strategy = strategy
        self.seed = seed
        self.refusals: dict[str, str] = {}     # transformation -> why it does not apply (last parent asked)
        self._memo: dict[tuple, tuple] = {}    # a parent's analysis (_analysed), the MEMO most recent

    def _chain(self, parent: Attempt | None) -> list[dict]:
        if parent is None:
            return []
        return list(parent.proposal.transformations) if parent.proposal.source == "library" else \
            [{"name": parent.proposal.source, "params": {}}]

    def _seen(self, ctx: Context, chain: list[dict], name: str) -> dict:
        seen = {}
        for a in ctx.history:
            t = a.proposal.transformations
            if len(t) == len(chain) + 1 and t[:-1] == chain and t[-1]["name"] == name:
                seen[key(t[-1]["params"])] = (t[-1]["params"], cost_of(a.result))
        return seen

    def propose(self, ctx: Context, parent: Attempt | None, budget: int) -> list[Proposal]:
        text = parent.proposal.text if parent is not None else ctx.original
        base_launch = parent.proposal.launch if parent is not None else None
        base_flags = list(parent.proposal.nvcc_flags) if parent is not None else []
        chain = self._chain(parent)
        done = {t["name"] for t in chain}
        analysed = self._analysed(ctx, text, base_launch, done)
        if analysed is None:
            return []
        src, launch, applicable = analysed
        rng = random.Random(int(hashlib.sha256((self.seed, text).__repr__().encode()).hexdigest()[:8], 16))
        plans = [(t, space, self._seen(ctx, chain, t.name), start) for t, space, start in applicable]
        out, taken = [], {(text, repr(base_launch), repr(base_flags))}
        # round-robin: every applicable transformation's next point before any gets a second one
        pending = {t.name: [] for t, _, _, _ in plans}
        rounds = 0
        while len(out) < budget and plans and rounds < budget + 1:
            rounds += 1
            progressed = False
            for t, space, seen, start in plans:
                if len(out) >= budget:
                    break
                pts = suggest(space, {**seen, **{key(p): (p, None) for p in pending[t.name]}}, 1, rng,
                              self.strategy, start)
                if not pts:
                    continue
                p = pts[0]
                pending[t.name].append(p)
                progressed = True
                try:
                    rw = t.apply(src, ctx.spec, launch, p)
                except Refused as e:
                    self.refusals[t.name] = str(e)
                    continue
                new_launch = rw.launch if rw.launch is not None else base_launch
                held = launch_held(ctx.spec, new_launch)
                if held:
                    self.refusals[t.name] = held
                    continue
                new_flags = base_flags + list(rw.nvcc_flags)
                ident = (rw.text, repr(new_launch), repr(new_flags))
                if ident in taken:
                    continue
                taken.add(ident)
                out.append(Proposal(text=rw.text, change=rw.explanation, source="library",
                                    transformations=chain + [{"name": t.name, "params": p}], launch=new_launch,
                                    nvcc_flags=new_flags))
            if not progressed:
                break
        return self._with_lead(out, plans, src, ctx, text, budget)

    def _analysed(self, ctx: Context, text: str, base_launch, done: set[str]):
        """(src, launch, [(transformation, space, first point)] in catalog order) for a parent, or None where its
        text does not parse (the reason in `refusals`). Each is a function of the text, the launch and the
        transformations already on the path alone: kept for the search's next ask of the same parent (the search
        asks the best and the original again every round; the analysis was half of the proposer's time, 1.4-4.5 s
        of a 25-candidate search on PolyBench's kernels)."""
        memo_key = (text, repr(base_launch), tuple(sorted(done)), id(ctx.spec))
        hit = self._memo.get(memo_key)
        if hit is None or hit[2] is not ctx.spec:
            refusals: dict[str, str] = {}
            try:
                src = KernelSource(text, ctx.spec)
            except Refused as e:
                hit = (None, {"*": str(e)}, ctx.spec)
            else:
                launch = current_launch(ctx.spec, base_launch)
                applicable = []
                for t in self.transformations:
                    if t.name in done:
                        refusals[t.name] = "already applied on this path"
                        continue
                    try:
                        space = t.space(src, ctx.spec, launch)
                    except Refused as e:
                        refusals[t.name] = str(e)
                        continue
                    try:
                        start = t.first_point(src, ctx.spec, launch)
                    except Refused:
                        start = t.defaults
                    applicable.append((t, space, start))
                applicable = in_order(applicable, src, ctx.spec, of=lambda plan: plan[0])
                hit = ((src, launch, applicable), refusals, ctx.spec)     # the spec held: its id stays its own
            if self._memo and len(self._memo) >= self.MEMO:
                self._memo.pop(next(iter(self._memo)))
            self._memo[memo_key] = hit
        self.refusals = dict(hit[1])
        return hit[0]

    @staticmethod
    def _with_lead(out: list[Proposal], plans, src, ctx: Context, text: str, budget: int) -> list[Proposal]:
        """Where the kernel's text puts a flag forward (fast math for a `sqrtf` per term: catalog.in_order tries it
        second), the first rewrite built with that flag comes third: flags and code changes compose, and a short
        limit per kernel may not reach a second round (hellinger: the two apart, then the pair verified but left
        untimed). The last proposal of the round gives way when the round is full."""
        lead = next((t.name for t, *_ in plans if t.leads(src, ctx.spec)), None)
        if lead is None or len(out) < 2 or out[0].transformations[-1]["name"] == lead:
            return out
        flag = next((q for q in out if q.transformations[-1]["name"] == lead and q.text == text), None)
        first = out[0]
        if flag is None or first.text == text:
            return out
        added = [f for f in flag.nvcc_flags if f not in first.nvcc_flags]
        pair = Proposal(text=first.text, change=f"{first.change}; built with `{' '.join(added)}`", source="library",
                        transformations=first.transformations + [flag.transformations[-1]], launch=first.launch,
                        nvcc_flags=first.nvcc_flags + added)
        at = out.index(flag) + 1
        return (out[:at] + [pair] + out[at:])[:max(budget, at + 1)]

    def repair(self, ctx: Context, failed: Attempt) -> Proposal | None:
        """The library does not repair: a failed point is a cost of None, and the strategy moves elsewhere."""
        return None
