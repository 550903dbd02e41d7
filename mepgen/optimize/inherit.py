"""Inherited wins tried first: replay the transformation chains that won on similar kernels.

For every pattern of `Context.patterns` that the library made (a chain of transformations with their
parameters), the chain is applied again, step by step, to this kernel's original source; a step that does
not apply here drops that pattern. Each replay that yields new code is one Proposal (source "inherited");
the evaluator judges it like any other. LLM patterns are not replayed: their edits belong to another
kernel's text; the LLM prompt quotes them instead.
"""
from __future__ import annotations

from .proposer import Attempt, Context, Proposal
from .library.base import StepRefused, apply_chain
from .library.catalog import all_transformations


class InheritedProposer:
    name = "inherited"

    def __init__(self, transformations=None):
        self._transformations = transformations
        self.tried: set[int] = set()
        self.refusals: dict[str, str] = {}

    def _catalog(self) -> dict:
        if self._transformations is None:
            self._transformations = all_transformations()
        return {t.name: t for t in self._transformations}

    def replay(self, ctx: Context, chain: list[dict]) -> tuple[str, dict | None, list[str]] | None:
        """The chain applied to this kernel's original: (text, launch override, nvcc flags); None where a step
        does not apply (why, in `refusals`)."""
        try:
            return apply_chain(self._catalog(), ctx.original, ctx.spec, chain)
        except StepRefused as e:
            self.refusals[e.step] = str(e)
            return None

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
            if done is None or done[0] == ctx.original and done[1] is None and not done[2]:
                continue
            out.append(Proposal(text=done[0], change=f"inherited from {p.get('kernel')}: {p.get('change')} "
                                                     f"({float(p.get('speedup', 1)):.2f}x there)",
                                source="inherited", transformations=list(p["transformations"]), launch=done[1],
                                nvcc_flags=done[2]))
        return out

    def repair(self, ctx: Context, failed: Attempt) -> Proposal | None:
        return None
