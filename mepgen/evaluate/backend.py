"""The one small interface both evaluation backends implement (Kernel Tuner style).

`compile` turns a kernel file into something runnable, `run` launches it once on one input set and
returns its outputs, `time` times a candidate interleaved with the baseline. A backend never raises for
the candidate's failures: it returns CompileFailed or a RunOutput carrying a RuntimeFault. The native
backend (native.py) runs the MEP harness as a subprocess; the pycuda backend (pycuda_backend.py) keeps
a worker process with a CUDA context, the inputs resident on the GPU.
"""
from __future__ import annotations

import abc
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from .results import CompileFailed, CompileInfo, RuntimeFault


@dataclass
class Built:
    kernel_file: Path
    artifact: Path               # the harness binary (native) or the cubin (pycuda)
    key: str                     # content hash of what was compiled
    info: CompileInfo
    log: str = ""                # nvcc's output (ptxas -v report included)
    extra: dict = field(default_factory=dict)   # backend-specific facts (entry name, argument layout)
    launch: object = None        # the candidate's own launch configuration (a spec Launch); None: mep.yaml's
    flags: tuple = ()            # the candidate's extra nvcc flags


@dataclass
class InputSet:
    index: int                   # k: seed = spec.verify.seed + k
    data_dir: Path               # `<param>.npy` for in/inout buffers, `const.<symbol>.npy`


@dataclass
class RunOutput:
    outputs: dict[str, np.ndarray] = field(default_factory=dict)
    inputs_after: dict[str, np.ndarray] = field(default_factory=dict)   # `in` buffers read back, if supported
    inputs_changed: list[str] = field(default_factory=list)             # or: the backend compared them itself
    fault: RuntimeFault | None = None
    record: dict = field(default_factory=dict)   # the MEPGEN_RESULT line (native) or the worker's reply
    # outputs the backend compared with the references itself, by verify.compare's rule, and found equal: they
    # do not come back (the pycuda worker's device verification, device_compare.py)
    matched: list[str] = field(default_factory=list)


@dataclass
class TimingOutput:
    """Per-round launch times of the baseline and the candidate, and the post-timing re-check outputs."""
    baseline_rounds: list[list[float]] = field(default_factory=list)
    candidate_rounds: list[list[float]] = field(default_factory=list)
    after: dict[str, np.ndarray] = field(default_factory=dict)         # candidate, after timing
    after_input_set: int = 0                                           # the inputs `after` was computed from
    after_matched: list[str] = field(default_factory=list)             # as RunOutput.matched, for `after`
    inputs_after: dict[str, np.ndarray] = field(default_factory=dict)
    inputs_changed: list[str] = field(default_factory=list)
    fault: RuntimeFault | None = None
    device: str = ""
    l2_bytes: int | None = None
    sync_ms: list[float] = field(default_factory=list)   # host-timed back-to-back launches of the checked side
    notes: list[str] = field(default_factory=list)
    # the perturbation re-check (perturb.py): the candidate's and the original kernel's outputs on the timed
    # inputs changed at perturb.RECHECK_STEP; `perturbed_buffers`: how many inputs were changed (0: no check)
    perturbed: dict[str, np.ndarray] = field(default_factory=dict)
    perturbed_ref: dict[str, np.ndarray] = field(default_factory=dict)
    perturbed_buffers: int = 0
    # or, compared on the GPU and all matching (device_compare.py): {"followed": n, "outputs": names}
    perturbed_summary: dict | None = None
    warmup: int | None = None                            # what the session ran (a time-based plan may differ)
    reps: int | None = None


@dataclass
class TimingPlan:
    warmup: int
    reps: int                    # launches per round and side
    rounds: int                  # alternations baseline / candidate
    flush_l2: bool = True
    perturb_seed: int | None = None   # inputs change between launches, re-check after timing (perturb.py)
    how: str = ""                # how the counts were chosen (plan.py), for the result
    # a candidate timed against the original's stored timing (decide.settled, decide.drift): the original's
    # launches per round among the candidate's `reps` (None: both sides `reps`, the original timed afresh)
    control: int | None = None
    # sequential timing: asked with the candidate's rounds so far after each round; True ends the session there
    stop: Callable[[list[list[float]]], bool] | None = None


class Backend(abc.ABC):
    """Compile and run kernel files of one MEP. Implementations: NativeBackend, PycudaBackend."""

    name = "abstract"

    @abc.abstractmethod
    def compile(self, kernel_file: Path, launch=None, flags=()) -> Built | CompileFailed:
        """Build `kernel_file`; safe to call from several threads at once (compiles run in parallel).

        `launch` (a spec.Launch): the candidate's own launch configuration instead of mep.yaml's;
        `flags`: extra nvcc flags after mep.yaml's build.nvcc_flags (part of the build's cache key)."""

    @abc.abstractmethod
    def run(self, built: Built, inputs: InputSet, out_dir: Path) -> RunOutput:
        """Launch once on `inputs` with outputs poisoned and in/out buffers reset; return the outputs."""

    @abc.abstractmethod
    def time(self, baseline: Built, candidate: Built | None, inputs: InputSet, plan: TimingPlan,
             out_dir: Path, recheck: InputSet | None = None) -> TimingOutput:
        """Time `candidate` interleaved with `baseline` (or the baseline alone when candidate is None).

        After timing, the candidate (or baseline) runs once more from fresh inputs - from `recheck` when
        the backend can switch input sets in the same session (a kernel that caches results across
        launches then fails) - and its outputs come back in `after`.
        """

    def close(self) -> None:
        """Release workers and GPU contexts."""
