"""Every kernel's time on the GPU over one run of the application, recording nothing else: the injector with an
empty plan, whose status holds CUPTI's activity totals per launched function (launches, total, min, max)."""
from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import click

from ..errors import MepgenError
from .build import build_injector
from .launcher import run_injected
from .plan import RunPlan


def merge(statuses: list[dict]) -> dict[str, dict]:
    """{demangled name: {launches, total_ms, min_ms, max_ms, configs}} summed over every process of the run."""
    out: dict[str, dict] = {}
    for st in statuses:
        for name, (n, total, lo, hi) in ((st.get("gpu") or {}).get("kernels") or {}).items():
            k = out.setdefault(name, {"launches": 0, "total_ms": 0.0, "min_ms": lo / 1e6, "max_ms": hi / 1e6})
            k["launches"] += n
            k["total_ms"] += total / 1e6
            k["min_ms"], k["max_ms"] = min(k["min_ms"], lo / 1e6), max(k["max_ms"], hi / 1e6)
    for name, k in out.items():
        k["configs"] = configs_of(statuses, name)
    return out


def configs_of(statuses: list[dict], name: str) -> list[dict]:
    """The launch configurations the run launched function `name` with (CUPTI's activity records), over every
    process: [{grid, block, shared_mem, launches, total_ms}], the most time first; a last entry {"more": n} where
    the injector stopped telling configurations apart (it keeps 32 per function)."""
    seen: dict[tuple, list] = {}
    more = 0
    for st in statuses:
        gpu = st.get("gpu") or {}
        for row in (gpu.get("configs") or {}).get(name) or []:
            if len(row) != 9:
                continue            # an injector of another version: no configurations
            c = seen.setdefault(tuple(row[:7]), [0, 0])
            c[0] += row[7]
            c[1] += row[8]
        more += int((gpu.get("configs_over") or {}).get(name) or 0)
    out = [{"grid": list(k[0:3]), "block": list(k[3:6]), "shared_mem": k[6], "launches": v[0],
            "total_ms": round(v[1] / 1e6, 6)} for k, v in sorted(seen.items(), key=lambda kv: -kv[1][1])]
    return out + ([{"more": more}] if more else [])


def profile_run(command: list[str], timeout: float | None, rebuild: bool = False, log=None) -> dict:
    injector = build_injector(force=rebuild, log=log or (lambda msg, level=1: None))
    raw = Path(tempfile.mkdtemp(prefix="mepgen-gpu-times-"))
    try:
        run = run_injected(command, injector.path, RunPlan(raw, [], gpu_times_only=True), raw, timeout)
    finally:
        shutil.rmtree(raw, ignore_errors=True)
    if not run.statuses:
        raise MepgenError(f"the injector never started (exit code {run.exit_code}): the application made no CUDA "
                          "call, or the driver ignored CUDA_INJECTION64_PATH", exit_code=3)
    errors = [s["error"] for s in run.statuses if s.get("error")]
    if errors:
        raise MepgenError(f"the injector failed to start: {errors[0]}", exit_code=3)
    if not any((s.get("gpu") or {}).get("enabled") for s in run.statuses):
        raise MepgenError("CUPTI's kernel activity records could not be enabled (is a profiler attached?)", exit_code=3)
    kernels = merge(run.statuses)
    return {"command": command, "exit_code": run.exit_code, "wall_s": round(run.wall_s, 4),
            "dropped_records": sum(int((s.get("gpu") or {}).get("dropped", 0)) for s in run.statuses),
            "gpu_total_ms": round(sum(k["total_ms"] for k in kernels.values()), 6), "kernels": kernels}


def print_profile(p: dict, as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(p, indent=1))
        return
    click.echo(f"{len(p['kernels'])} kernel(s), {p['gpu_total_ms']:.4g} ms on the GPU; the application exited with "
               f"{p['exit_code']} after {p['wall_s']:.3f} s")
    for name, k in sorted(p["kernels"].items(), key=lambda kv: -kv[1]["total_ms"]):
        n = len([c for c in k.get("configs") or [] if "grid" in c])
        more = "+" if any("more" in c for c in k.get("configs") or []) else ""
        configs = f"  ({n}{more} launch configurations)" if n > 1 or more else ""
        click.echo(f"  {k['total_ms']:10.4f} ms  {k['launches']:6d} launch(es)  {name}{configs}")
