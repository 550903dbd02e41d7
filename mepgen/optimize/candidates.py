"""Proposals -> evaluated candidates: the one door through which every proposed kernel reaches the GPU.

Each proposal's kernel.cu is written into `workdir` under a name derived from its content (launch, flags),
so the same text proposed twice is one file and one cached result. A proposal that carries its own launch
configuration (a warp per row needs 32x the threads) is evaluated with that launch against the ORIGINAL
kernel with the launch of mep.yaml: the speedup is what the application gains by taking both. Extra nvcc
flags (Proposal.nvcc_flags) build the candidate only; the baseline keeps mep.yaml's flags.
Nothing a proposer says is trusted: compile, verify on every input set and timing decide.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from ..errors import MepgenError
from ..evaluate import lint_workers
from ..evaluate.batch import Pipeline, default_jobs, evaluate_many
from ..evaluate.evaluator import Evaluator
from ..evaluate.launchcfg import launch_from
from ..evaluate.results import EvalResult
from ..spec import Spec
from .proposer import Proposal


#: the folder of a run (optimize's run folder) that a search writes its candidates into
WORK = "work"


def candidate_name(proposal: Proposal) -> str:
    """A short, stable name: the same text with the same launch is the same candidate."""
    h = hashlib.sha256(proposal.text.encode())
    if proposal.launch:
        h.update(json.dumps(proposal.launch, sort_keys=True).encode())
    if proposal.nvcc_flags:
        h.update(("\0flags:" + json.dumps(list(proposal.nvcc_flags))).encode())
    return "cand-" + h.hexdigest()[:12]


def write_candidate(proposal: Proposal, workdir: Path) -> Path:
    """workdir/<name>/kernel.cu (and proposal.json: the change, the chain of transformations, the launch)."""
    folder = Path(workdir) / candidate_name(proposal)
    folder.mkdir(parents=True, exist_ok=True)
    kernel = folder / "kernel.cu"
    if not kernel.is_file() or kernel.read_text(errors="replace") != proposal.text:
        kernel.write_text(proposal.text)
    meta = {"change": proposal.change, "source": proposal.source, "transformations": proposal.transformations,
            "launch": proposal.launch, "nvcc_flags": list(proposal.nvcc_flags), "strategy": proposal.strategy}
    (folder / "proposal.json").write_text(json.dumps(meta, indent=1) + "\n")
    return kernel


def _item(spec: Spec, p: Proposal, workdir: Path) -> tuple:
    try:
        launch = launch_from(spec, p.launch)
    except MepgenError as e:
        raise MepgenError(f"proposal '{p.change}': {e}") from None
    return candidate_name(p), write_candidate(p, workdir), launch, tuple(p.nvcc_flags)


def _same_mep(ev: Evaluator, mep_dir: Path) -> None:
    if Path(mep_dir).resolve() != ev.mep_dir:
        raise MepgenError(f"candidates of {mep_dir} given to the evaluator of {ev.mep_dir}")


def evaluate(ev: Evaluator, mep_dir: Path, spec: Spec, proposals: list[Proposal], workdir: Path,
             journal=None, on_result=None) -> list[EvalResult]:
    """One EvalResult per proposal, in order; `ev.prepare()` must have run (the baseline and references).

    `mep_dir` and `spec` must be the evaluator's own: a proposal's launch is an override of that spec.
    """
    _same_mep(ev, mep_dir)
    return evaluate_many(ev, [_item(spec, p, workdir) for p in proposals], journal, on_result=on_result)


class Stream:
    """The same door for a whole search, kept open (one Pipeline: its threads, its lint workers). Where the rules run
    on worker processes of their own (lint_workers.count_for: 8 cores or more) it streams: `submit(proposal,
    workdir)` lints and compiles a proposal the moment it exists and returns the future of its EvalResult, so nvcc
    builds the rest of a round while the proposers write it and the GPUs judge its first candidates (search.Search
    submits when its evaluate has `submit`). On fewer cores `submit` is None and the search calls it with each
    whole round: there, lints and compiles beside the proposer on the same two or four cores slowed it more than
    they gained (the rules' libclang callbacks and the proposer's Python share one interpreter lock).
    `before`: called before each proposal is taken (a stop asked for raises there)."""

    def __init__(self, ev: Evaluator, mep_dir: Path, spec: Spec, journal=None, on_result=None, before=None,
                 lint_processes: int | None = None):
        _same_mep(ev, mep_dir)
        self.spec, self.before = spec, before or (lambda: None)
        n = lint_workers.count_for(default_jobs(ev.opts.jobs)) if lint_processes is None else lint_processes
        self.pipe = Pipeline(ev, journal, on_result, lint_workers=n)
        self.submit = self._submit if n > 0 else None

    def keep_in(self, journal) -> None:
        """Append every new result to `journal` from now on (the run's, made once the original is timed)."""
        self.pipe.journal = journal

    def prefetch(self, proposal: Proposal, workdir: Path) -> None:
        """Lint and compile a proposal ahead of its submit (batch.Pipeline.prefetch): written where submit writes it."""
        name, path, launch, flags = _item(self.spec, proposal, workdir)
        self.pipe.prefetch(path, launch, flags)

    def _submit(self, proposal: Proposal, workdir: Path):
        self.before()
        return self.pipe.submit(*_item(self.spec, proposal, workdir))

    def __call__(self, proposals: list[Proposal], workdir: Path) -> list[EvalResult]:
        futures = [self._submit(p, workdir) for p in proposals]
        return [f.result() for f in futures]

    def close(self, cancel: bool = False) -> None:
        self.pipe.close(cancel)
