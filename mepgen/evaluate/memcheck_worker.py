"""memcheck on the cubin the pycuda backend timed: no harness to build for the winner's memory check.

Where candidates are timed on the pycuda backend, optimize's memory check (optimize/winner_check.py) runs the
pycuda worker itself under `compute-sanitizer --tool memcheck`, started with exact allocations
(guards.ExactAllocations: each buffer its own allocation of its own size, no guard zones, no placement, the
sanitizer's padding after each, every address told as `MEPGEN_BUFFER` lines): the module that was timed, its
launch and parameters, the first input set loaded as for a run, one launch (`launch`); then the worker exits and
the sanitizer's output is the verdict, read as the native harness's is (memcheck.verdict). Before, a winner's
native harness was built for the check, a whole nvcc of the harness (2-4 s on a loaded H200 host), after the
search when the winner came in its last round (bench/results/gpu_2026-11-28g). The process can start ahead
(`warm_up`: the worker, its context and the input set), so that the check is the module's load and one launch.

Confinement: the worker's own (confined.for_worker), with the sanitizer starting it. Under landlock the sanitizer
is confined apart (it reads its target's /proc and runs without the seccomp filter, which refuses what it does
to its target); its target is the launcher, which confines the worker as always, seccomp filter included
(memcheck.confine_run does the same for the native harness). At the other levels one confinement holds both,
without the filter.
"""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from ..errors import MepgenError
from . import confined, landlock_level, memcheck
from .backend import Built, InputSet
from .confinement import Confinement
from .pycuda_backend import PycudaBackend
from .results import RuntimeFault

#: the worker's entry with exact allocations
EXACT_ENTRY = "mepgen.evaluate.pycuda_worker:exact_main"
#: how long the sanitizer may take to write its summary and exit once its target has stopped
GRACE_S = 20.0


class SanitizedWorker(PycudaBackend):
    """One pycuda worker under compute-sanitizer, for one verdict: `warm_up(inputs)` ahead (optional), then
    `check(built, inputs)`; the process ends with the check. Made from the evaluator's pycuda backend (`like`):
    its MEP, build folder, device and sandbox level."""

    def __init__(self, like: PycudaBackend, tool: Path, timeout: float):
        super().__init__(like.spec, like.mep_dir, like.build_dir, like.device, run_timeout=timeout,
                         compile_timeout=like.compile_timeout, start_timeout=timeout)
        self.entry = EXACT_ENTRY
        self.sandbox_level = like.sandbox_level
        self.tool = Path(tool)
        self.timeout = timeout
        self.output = ""            # what the sanitizer and the worker printed, kept as the process ends
        self.code: int | None = None
        self.warm_s = 0.0           # the start ahead (not the check's own cost: it overlapped the search)
        self._lock = threading.Lock()

    def _confined(self, level: str, argv: list[str]):
        tool, root = memcheck.tool_args(self.tool), memcheck.tool_root(self.tool)
        worker = confined.for_worker(level, hide=[self.mep_dir, self.build_dir])
        if level != "landlock":
            worker.read.append(root)
            worker.programs.append(root)
            worker.seccomp = False
            return [*tool, *argv], worker
        worker.keep_root = True         # the launcher under the sanitizer has no right to change user
        worker.seccomp = memcheck.TARGET_SECCOMP
        worker.environment({})          # its scratch folder, which the sanitizer's rules must allow as well
        worker.prepare()
        inner = landlock_level.prefix(worker, argv, worker.scratch) + argv
        head = Path(inner[0])
        launcher = [head] if head.name != Path(sys.executable).name else [head, landlock_level.LAUNCHER,
                                                                           *confined.python_paths([])]
        site = [worker.python_site] if worker.python_site is not None else []
        # landlock layers stack: the worker is bound by both, so the sanitizer's allow what the worker's do
        outer = Confinement(level, read=[*worker.read, *site, root, Path("/proc"), *launcher], gpu=True,
                            limits=worker.limits, programs=[root, launcher[0], Path(argv[0])])
        outer.seccomp = False
        outer.system_write = [Path("/proc")]       # the driver in the worker names its threads there
        outer.scratch, outer.python_site = list(worker.scratch), worker.python_site
        outer.pass_fds += worker.pass_fds          # the worker's seccomp program, through the sanitizer
        return [*tool, *inner], outer

    def _kill(self) -> None:
        """As the backend's, keeping the sanitizer's output and exit status: its summary comes as it exits."""
        if self.proc is not None and self.log_file is not None:
            try:
                self.code = self.proc.wait(timeout=GRACE_S)
            except subprocess.TimeoutExpired:
                self.code = None
            try:
                self.log_file.seek(0)
                self.output += self.log_file.read().decode("utf-8", errors="replace")
                self.log_file.seek(0, os.SEEK_END)
            except (OSError, ValueError):
                pass            # no output to read: the verdict says the run failed
        super()._kill()

    def warm_up(self, inputs: InputSet) -> None:
        """Start the process and load `inputs` (a thread beside the search); a start that fails is met again,
        and said, by `check`."""
        start = time.monotonic()
        with self._lock:
            try:
                self.load_sets(inputs)
            except Exception:  # noqa: BLE001 (ahead of time only: check starts it again and says why not)
                self._kill()
        self.warm_s = time.monotonic() - start

    def check(self, built: Built, inputs: InputSet) -> tuple[memcheck.Report, bool]:
        """(the Report, whether the kernel was launched under the sanitizer): a check that could not get as far
        as the launch (the worker did not start, the cubin did not load) leaves the caller its other way."""
        start = time.monotonic()
        with self._lock:
            try:
                fault = self._ensure(built, inputs)
            except MepgenError as e:        # the worker did not start under the sanitizer (its own words)
                fault = RuntimeFault("harness_error", str(e))
            launched = fault is None
            if fault is None:
                reply = self._call("launch", built.key, inputs.index)
                fault = reply if isinstance(reply, RuntimeFault) else None
            self.close()            # the worker exits: the sanitizer writes its summary and exits with the verdict
        seconds = time.monotonic() - start
        timed_out = fault is not None and fault.kind == "timeout"
        report = memcheck.verdict(self.output, self.code, seconds, str(self.tool), timed_out, self.timeout,
                                  fault.message if fault is not None else "")
        return report, launched or report.clean is False


def check(like: PycudaBackend, built: Built, inputs: InputSet, timeout: float,
          warm: SanitizedWorker | None = None) -> tuple[memcheck.Report, bool]:
    """memcheck on the cubin `built` (the pycuda backend `like` built it) on input set `inputs`, in `warm` where
    one was started ahead; (Report, launched) as SanitizedWorker.check. No sanitizer: no verdict."""
    if warm is not None:
        return warm.check(built, inputs)
    tool = memcheck.executable()
    if tool is None:
        return memcheck.Report(None, message="compute-sanitizer not found (it ships with the CUDA toolkit): reads "
                                             "out of bounds not checked"), False
    return SanitizedWorker(like, tool, timeout).check(built, inputs)
