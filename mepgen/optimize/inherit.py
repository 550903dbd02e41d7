"""Inherited wins tried first: replay the transformation chains that won on similar kernels.

For every pattern of `Context.patterns` that the library made (a chain of transformations with their
parameters), the chain is applied again, step by step, to this kernel's original source; a step that does
not apply here drops that pattern. Each replay that yields new code is one Proposal (source "inherited");
the evaluator judges it like any other. LLM patterns are not replayed: their edits belong to another
kernel's text; the LLM prompt quotes them instead.
"""
from __future__ import annotations

from .proposer import Attempt, Context, Proposal


class InheritedProposer:
    name = "inherited"

    def __init__(self, transformations=None):
        self._transformations = transformations
        self.tried: set[int] = set()
        self.refusals: dict[str, str] = {}

    def _catalog(self) -> dict:
        if self._transformations is None:
            from .library.catalog import all_transformations
            self._transformations = all_transformations()
        return {t.name: t for t in self._transformations}

    def replay(self, ctx: Context, chain: list[dict]) -> tuple[str, dict | None] | None:
        from .library.base import current_launch
        from .library.source import KernelSource, Refused
        catalog = self._catalog()
        text, launch = ctx.original, None
        for step in chain:
            t = catalog.get(step.get("name"))
            if t is None:
                self.refusals[step.get("name", "?")] = "not in this mepgen's library"
                return None
            try:
                rw = t.apply(KernelSource(text, ctx.spec), ctx.spec, current_launch(ctx.spec, launch),
                             step.get("params") or {})
            except Refused as e:
                self.refusals[t.name] = str(e)
                return None
            text, launch = rw.text, (rw.launch if rw.launch is not None else launch)
        return text, launch

    def propose(self, ctx: Context, parent: Attempt | None, budget: int) -> list[Proposal]:
        if parent is not None:
            return []
        out = []
        for i, p in enumerate(ctx.patterns):
            if len(out) >= budget:
                break
            if i in self.tried or p.get("source") != "library" or not p.get("transformations"):
                continue
            self.tried.add(i)
            done = self.replay(ctx, p["transformations"])
            if done is None or done[0] == ctx.original and done[1] is None:
                continue
            out.append(Proposal(text=done[0], change=f"inherited from {p.get('kernel')}: {p.get('change')} "
                                                     f"({float(p.get('speedup', 1)):.2f}x there)",
                                source="inherited", transformations=list(p["transformations"]), launch=done[1]))
        return out

    def repair(self, ctx: Context, failed: Attempt) -> Proposal | None:
        return None
