"""How closely an MEP reproduces its kernel's time inside the application.

A capture records the chosen launch's duration in the application: `app_gpu_ms` in
`data/captured/manifest.json`, the kernel's own start to end on the GPU from CUPTI's activity record, else
`kernel_ms`, CUDA events around that one launch on its stream, which also hold the launch's submission (tens of
microseconds on a first launch, so short kernels read far longer than they run). `mepgen run` and `mepgen optimize`
time the MEP's original kernel over many launches with CUDA events; their ratio is the MEP's fidelity. An MEP whose time is far from the application's does not show the
kernel's real problem (other sizes, other data, another definition of the kernel), and a speedup measured on it
says nothing about the application: `optimize` refuses it unless forced.

The band: the MEP is faithful when |mep - app| <= max(tolerance * app, floor). The floor covers the launch overhead
that the MEP's event pairs hold and the application's GPU time does not: on an H200, MEPs of 3-8 us kernels read
4.6-7.9 us above the same launch's GPU time in the application (bench/results/tune_sweep_2026-11-28/README.md), the same
for every variant.
"""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path

#: defaults of `evaluate.fidelity_tolerance` and `evaluate.fidelity_floor_us`
TOLERANCE = 0.25
FLOOR_US = 10.0


@dataclass
class Fidelity:
    """`ratio` = MEP time / application time; `ok` None when there is no application time to compare with."""
    app_ms: float | None
    mep_ms: float | None
    ratio: float | None
    ok: bool | None
    why: str
    tolerance: float = TOLERANCE
    floor_us: float = FLOOR_US
    forced: bool = False
    l2: str = "flushed"              # how the MEP was timed: the L2 flushed before each launch, or "warm" (optimize)

    def to_dict(self) -> dict:
        return asdict(self)

    def line(self) -> str:
        if self.ratio is None:
            return f"fidelity: {self.why}"
        verdict = "within" if self.ok else "OUTSIDE"
        return (f"fidelity: MEP {self.mep_ms:.4g} ms{' (warm L2)' if self.l2 == 'warm' else ''} / application "
                f"{self.app_ms:.4g} ms = {self.ratio:.2f} "
                f"({verdict} the guard: +-{self.tolerance:.0%} or {self.floor_us:g} us)"
                + (" -- forced" if self.forced else ""))


def app_time_ms(mep_dir: Path) -> tuple[float | None, str]:
    """The captured launch's time in the application, and where it comes from (or why there is none)."""
    manifest = Path(mep_dir) / "data" / "captured" / "manifest.json"
    if not manifest.is_file():
        return None, "no application time (a static MEP: `mepgen capture` records one)"
    try:
        doc = json.loads(manifest.read_text())
    except (OSError, json.JSONDecodeError) as e:
        return None, f"no application time: {manifest} cannot be read ({e})"
    if not isinstance(doc, dict):
        return None, f"no application time: {manifest} is not a capture manifest"
    for key, how in (("app_gpu_ms", "its GPU time"), ("kernel_ms", "CUDA events around it")):
        ms = doc.get(key)
        if isinstance(ms, (int, float)) and not isinstance(ms, bool) and math.isfinite(ms) and ms > 0:
            return float(ms), f"launch {doc.get('launch_index', '?')} in the application, {how} ({manifest})"
    return None, f"no application time: {manifest} holds neither app_gpu_ms nor kernel_ms (the launch was not timed)"


def judge(mep_ms: float | None, app_ms: float | None, why: str = "", tolerance: float = TOLERANCE,
          floor_us: float = FLOOR_US) -> Fidelity:
    if app_ms is None:
        return Fidelity(None, mep_ms, None, None, why or "no application time", tolerance, floor_us)
    if mep_ms is None or not math.isfinite(mep_ms) or mep_ms <= 0:
        return Fidelity(app_ms, None, None, None, "the MEP was not timed", tolerance, floor_us)
    ratio = mep_ms / app_ms
    ok = abs(mep_ms - app_ms) <= max(tolerance * app_ms, floor_us / 1000.0)
    return Fidelity(app_ms, mep_ms, round(ratio, 4), ok, why, tolerance, floor_us)


def of_mep(mep_dir: Path, mep_ms: float | None, tolerance: float = TOLERANCE, floor_us: float = FLOOR_US) -> Fidelity:
    app_ms, why = app_time_ms(mep_dir)
    return judge(mep_ms, app_ms, why, tolerance, floor_us)
