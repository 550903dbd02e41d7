"""The application itself: its build, its runs (exit code, wall time) and its own check, before and after.

Everything here runs the user's commands as they gave them (the build and check through the shell, as make or a
CI script would; the application's command as an argument vector, as `mepgen capture` runs it), with a time limit,
and keeps each output in a log file under `.mepgen/tune/logs/`.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import shlex
import statistics
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..errors import MepgenError


def detect_build(app_root: Path) -> str | None:
    """The application's own build command when it is unambiguous: `make` beside a Makefile, `cmake --build DIR`
    for one configured CMake build folder. None otherwise (the user names it: --build or tune.build_command)."""
    root = Path(app_root)
    caches = sorted(p.parent for p in root.glob("*/CMakeCache.txt"))
    if len(caches) == 1:
        return f"cmake --build {shlex.quote(str(caches[0]))}"
    for name in ("GNUmakefile", "makefile", "Makefile"):
        if (root / name).is_file():
            return f"make -C {shlex.quote(str(root))}"
    return None


@dataclass
class Step:
    """One command's outcome: ok, exit code, seconds, the last lines of its output and the log."""
    ok: bool
    exit_code: int | None
    seconds: float
    tail: str
    log: str

    def to_dict(self) -> dict:
        return asdict(self)


def _tail(text: str, lines: int = 8) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def run_step(command: str | list[str], cwd: Path, log: Path, timeout: float | None, env: dict | None = None) -> Step:
    """Run a shell string or an argument vector; never raises for the command's own failure."""
    log.parent.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    try:
        r = subprocess.run(command, shell=isinstance(command, str), cwd=cwd, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=timeout, env=None if env is None else {**os.environ, **env})
        out, code = r.stdout.decode(errors="replace"), r.returncode
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode(errors="replace") + f"\n[mepgen tune: stopped after {timeout:g} s]"
        code = None
    except OSError as e:
        raise MepgenError(f"cannot run {command if isinstance(command, str) else shlex.join(command)}: {e}") from None
    seconds = time.perf_counter() - start
    log.write_text(out)
    return Step(code == 0, code, round(seconds, 4), _tail(out), str(log))


@dataclass
class Timing:
    """Several runs of the application: each run's wall time, exit code and check."""
    runs: list[dict] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return bool(self.runs) and all(r["ok"] for r in self.runs)

    @property
    def seconds(self) -> list[float]:
        return [r["seconds"] for r in self.runs if r["exit_code"] == 0]

    def median(self) -> float | None:
        return statistics.median(self.seconds) if self.seconds else None

    def spread(self) -> float | None:
        """(max - min) / median of the runs' wall times."""
        s = self.seconds
        return (max(s) - min(s)) / statistics.median(s) if len(s) > 1 and statistics.median(s) > 0 else None

    def first_failure(self) -> str:
        for r in self.runs:
            if not r["ok"]:
                if r["exit_code"] != 0:
                    return f"the application exited with {r['exit_code']} ({r['log']})"
                return f"its check failed: {r['check']['tail'] or 'exit ' + str(r['check']['exit_code'])} " \
                       f"({r['check']['log']})"
        return ""

    def to_dict(self) -> dict:
        return {"runs": self.runs, "ok": self.ok, "median_s": self.median(), "spread": self.spread(),
                "min_s": min(self.seconds) if self.seconds else None,
                "max_s": max(self.seconds) if self.seconds else None}


def measure(app_command: list[str], cwd: Path, logs: Path, tag: str, runs: int, check: str | None,
            timeout: float | None, stop_on_failure: bool = True, warmup: int = 1) -> Timing:
    """`runs` runs of the application, each followed by its check (when one is configured): a shell command in
    `cwd` whose environment has MEPGEN_TUNE_LOG, the file holding the run's output (`grep -q PASS "$MEPGEN_TUNE_LOG"`)."""
    t = Timing()
    with timing_lock():
        for i in range(warmup):      # a first run pays for cold files and caches: untimed, but it must succeed
            step = run_step(app_command, cwd, logs / f"{tag}-warmup{i + 1}.log", timeout)
            if not step.ok:
                t.runs.append({"seconds": step.seconds, "exit_code": step.exit_code, "log": step.log, "check": None,
                               "ok": False, "warmup": True})
                return t
        _timed_runs(t, app_command, cwd, logs, tag, runs, check, timeout, stop_on_failure)
    return t


def timing_lock():
    """Runs that are timed hold the lock file MEPGEN_TUNE_TIMING_LOCK names, when set: several tunes on one machine
    (a sweep, one application per GPU) then never time their applications at the same moment."""
    path = os.environ.get("MEPGEN_TUNE_TIMING_LOCK")
    if not path:
        return contextlib.nullcontext()

    @contextlib.contextmanager
    def held():
        with open(path, "a") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)
    return held()


def _timed_runs(t, app_command, cwd, logs, tag, runs, check, timeout, stop_on_failure) -> None:
    for i in range(runs):
        step = run_step(app_command, cwd, logs / f"{tag}-run{i + 1}.log", timeout)
        row = {"seconds": step.seconds, "exit_code": step.exit_code, "log": step.log, "check": None}
        ok = step.ok
        if ok and check:
            # the check may read what the run printed (many applications print their own PASS/FAIL)
            c = run_step(check, cwd, logs / f"{tag}-check{i + 1}.log", timeout, env={"MEPGEN_TUNE_LOG": step.log})
            row["check"] = c.to_dict()
            ok = c.ok
        row["ok"] = ok
        t.runs.append(row)
        if not ok and stop_on_failure:
            break


def compare(before: Timing, after: Timing) -> dict:
    """The application's speedup (median before / median after) and whether it is beyond the runs' noise: the
    larger relative spread of the two sides, at least 1 %."""
    b, a = before.median(), after.median()
    if not b or not a:
        return {"speedup": None, "noise": None, "verdict": "not measured"}
    noise = max(before.spread() or 0.0, after.spread() or 0.0, 0.01)
    speedup = b / a
    verdict = "faster" if speedup > 1 + noise else "slower" if speedup < 1 - noise else "no measurable change"
    return {"speedup": round(speedup, 4), "noise": round(noise, 4), "verdict": verdict}


#: a change of the kernels' summed GPU time (CUPTI, one run each side) smaller than this is not a change
GPU_NOISE = 0.05


def judge(before: Timing, after: Timing, gpu_before: dict | None, gpu_after: dict | None) -> dict:
    """compare() of the wall times, decided with the kernels' own GPU time in the application where both runs have
    it. A patch changes kernels: the kernels slower on the GPU (beyond GPU_NOISE) is "slower"; a wall-time change
    beyond the runs' noise counts only where the kernels' GPU time moved the same way by at least half as much,
    else the wall time moved for another reason (other processes, I/O, the host's clock) and the verdict is "no
    measurable change" with that said. `expected_speedup`: the application's speedup if the GPU time saved came
    off its wall time (the kernels' share of the run bounds it)."""
    cmp = {**compare(before, after), "basis": "wall time"}
    tb, ta = (gpu_before or {}).get("gpu_total_ms"), (gpu_after or {}).get("gpu_total_ms")
    if cmp["speedup"] is None or not tb or not ta:
        return cmp
    wall_b, wall_a = before.median(), after.median()
    saved, moved = (tb - ta) / 1e3, wall_b - wall_a
    cmp.update(basis="wall time and the kernels' GPU time", wall_verdict=cmp["verdict"], gpu_speedup=round(tb / ta, 4),
               kernels_share=round(tb / 1e3 / wall_b, 6), expected_speedup=round(wall_b / max(wall_b - saved, 1e-9), 4),
               why="")
    if tb / ta < 1 - GPU_NOISE:
        cmp.update(verdict="slower", why=f"the kernels take {ta:.4g} ms on the GPU instead of {tb:.4g} ms")
    elif cmp["verdict"] in ("faster", "slower") and not (saved * moved > 0 and abs(saved) >= 0.5 * abs(moved)):
        cmp.update(verdict="no measurable change",
                   why=f"the wall time {_change(moved)} but the kernels' GPU time {_change(saved)} (they are "
                       f"{tb / 1e3 / wall_b:.2%} of the run): not the patches' doing")
    return cmp


def _change(seconds_less: float) -> str:
    """`fell by 908.4 ms` / `rose by 12 ms`: a time that went down by `seconds_less` (negative: up)."""
    return f"{'fell' if seconds_less >= 0 else 'rose'} by {abs(seconds_less) * 1e3:.4g} ms"


def amdahl(before: dict) -> dict | None:
    """The kernels' share of the application's run (their summed GPU time over the median wall time) and the
    application speedup that bounds: what removing the kernels' time entirely would give. None without GPU times."""
    gpu = (before or {}).get("gpu") or {}
    wall = before.get("median_s") if before else None
    if not gpu.get("gpu_total_ms") or not wall:
        return None
    share = min(gpu["gpu_total_ms"] / 1e3 / wall, 1.0)
    return {"kernels_share": round(share, 6), "max_app_speedup": round(1 / (1 - share), 4) if share < 1 else None}
