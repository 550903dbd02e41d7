"""The contract between the search and whatever proposes kernel variants.

A proposer turns the current state of the search into Proposals: complete new kernel.cu texts, each with
a one-line change a person can read, and optionally a new launch configuration. Two proposers exist:
mepgen's transformation library (`mepgen/optimize/library/`, the default, no network) and the LLM
(`mepgen/optimize/llm/`). Nothing a proposer says is trusted: every proposal is judged by the evaluator
(`mepgen/optimize/candidates.py` builds the candidate, with its launch configuration, and evaluates it).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from ..spec import Spec


@dataclass
class Proposal:
    text: str                                   # the complete new kernel.cu
    change: str                                 # one line for the trajectory: what changed, and why
    source: str                                 # "library" | "llm" | "inherited"
    transformations: list[dict] = field(default_factory=list)  # library: [{"name": ..., "params": {...}}] in order
    launch: dict | None = None                  # {"grid": [...], "block": [...], "shared_mem": "..."}; None: unchanged
    strategy: str = ""                          # the LLM's stated strategy (prose), for the trajectory and patterns
    nvcc_flags: list[str] = field(default_factory=list)  # extra nvcc flags the candidate is built with (the
    #                                                      patch stage cannot write them back: it prints them)


@dataclass
class Attempt:
    """A proposal after evaluation: what the search, the repair loop and the trajectory work from."""
    id: str
    proposal: Proposal
    result: object                              # mepgen.evaluate.results.EvalResult
    parent: str | None = None
    repair_of: str | None = None

    @property
    def ok(self) -> bool:
        return getattr(self.result, "ok", False)


@dataclass
class Context:
    spec: Spec
    mep_dir: Path
    original: str                               # the MEP's kernel.cu (the baseline)
    gpu: dict                                   # name, cc, peak_gbps, peak_gflops
    features: dict = field(default_factory=dict)  # the kernel's features (access pattern, loops, dtype, ...)
    history: list[Attempt] = field(default_factory=list)
    patterns: list[dict] = field(default_factory=list)  # inherited wins of similar kernels


class Proposer(Protocol):
    name: str

    def propose(self, ctx: Context, parent: Attempt | None, budget: int) -> list[Proposal]:
        """Up to `budget` new proposals derived from `parent` (None: from the original kernel)."""

    def repair(self, ctx: Context, failed: Attempt) -> Proposal | None:
        """A fix for a proposal that failed to compile, crashed or computed wrong results; None: give up."""
