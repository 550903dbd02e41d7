"""Nsight Compute metrics of one launch (`--profile`): what an optimizer needs to know where time goes.

Runs `ncu` on the native harness (one plain launch, no timing loop) for the kernel alone and keeps a few
numbers: DRAM and SM throughput as % of peak, achieved occupancy, registers per thread, local-memory
(spill) traffic. Registers and spills from ptxas are already in every compile's CompileInfo.
"""
from __future__ import annotations

import csv
import io
import os
import re
import shutil
from pathlib import Path

from . import confined, confinement, process
from .native import NativeBackend
from .results import CompileFailed
from .symbols import callee

METRICS = {
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": "dram_pct",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": "sm_pct",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "occupancy_pct",
    "launch__registers_per_thread": "registers",
    "launch__occupancy_limit_registers": "occupancy_limit_registers",
    "l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum": "local_load_bytes",
    "l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum": "local_store_bytes",
    "gpu__time_duration.sum": "duration_ns",
}


def kernel_regex(callee: str) -> str:
    """ncu's --kernel-name filter: the kernel's base name (ncu matches the function name, no scope)."""
    base = re.sub(r"<.*", "", callee).split("::")[-1]
    return f"regex:^{re.escape(base)}$"


def parse_csv(text: str) -> dict:
    """Metric rows of `ncu --csv` output (its log lines start with '==') -> {short name: number or text}."""
    rows = [ln for ln in text.splitlines() if ln.startswith('"')]
    if not rows:
        return {}
    found = {}
    for row in csv.DictReader(io.StringIO("\n".join(rows))):
        name = row.get("Metric Name")
        if name not in METRICS:
            continue
        raw = (row.get("Metric Value") or "").replace(",", "")
        try:
            value: float | str = float(raw)
        except ValueError:
            value = raw
        found[METRICS[name]] = value
        unit = row.get("Metric Unit")
        if unit and METRICS[name] == "duration_ns" and unit != "nsecond":
            scale = {"usecond": 1e3, "msecond": 1e6, "second": 1e9}.get(unit)
            if scale and isinstance(value, float):
                found["duration_ns"] = value * scale
    return found


def run_ncu(binary: Path, data_dir: Path, out_dir: Path, callee: str, device: int | None,
            timeout: float = 300.0, level: str = "off") -> dict:
    """Profile one launch; {'error': ...} when ncu is missing or fails (profiling is advice, not a verdict)."""
    exe = shutil.which("ncu")
    if exe is None:
        return {"error": "ncu (Nsight Compute) is not on PATH"}
    out_dir.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, CUDA_DEVICE_ORDER="PCI_BUS_ID")
    if device is not None:
        env["CUDA_VISIBLE_DEVICES"] = str(device)
    args = [exe, "--csv", "--clock-control", "none", "--kernel-name", kernel_regex(callee), "--launch-count", "1",
            "--metrics", ",".join(METRICS), binary, "--data", data_dir, "--out", out_dir]
    tool_dir = Path(exe).resolve().parent.parent        # under landlock ncu runs the binary and its own programs
    confine = confined.for_run(level, args, out_dir, confinement.BUILD_FILE_LIMIT,   # `level`: the candidate's sandbox
                              read=[tool_dir], programs=[tool_dir, Path(binary)])
    confine.keep_root = True          # GPU performance counters are for admins unless the driver says otherwise
    confine.keep_caps = True          # (under landlock: root keeps its capabilities)
    confine.seccomp = False           # and Nsight Compute needs what the filter refuses
    done = process.run(args, timeout=timeout, env=env, confine=confine)
    if done.timed_out:
        return {"error": f"ncu did not finish within {timeout:g} s"}
    metrics = parse_csv(done.stdout)
    if not metrics:
        tail = (done.stderr or done.stdout).strip().splitlines()
        return {"error": "ncu reported no metrics" + (f": {tail[-1]}" if tail else "")}
    return metrics


def of_candidate(ev, kernel_file: Path, worker, launch=None, flags=()) -> dict:
    """Nsight Compute numbers for the kernel file of evaluator `ev`'s MEP, on a native build (whatever the timing
    backend) with the candidate's own launch configuration and nvcc flags (the harness of mep.yaml's launch would
    run another kernel: a warp-per-row rewrite on the thread-per-row grid covers 1/32 of the rows)."""
    be = worker.backend if isinstance(worker.backend, NativeBackend) else NativeBackend(
        ev.spec, ev.mep_dir, ev.store.build_dir, device=worker.device)
    be.sandbox_level = ev.sandbox
    extra = {k: v for k, v in (("launch", launch), ("flags", tuple(flags))) if v}
    built = be.compile(kernel_file, **extra)
    if isinstance(built, CompileFailed):
        return {"error": f"native build for profiling failed: {built.message}"}
    return run_ncu(built.artifact, ev.sets[0].data_dir, ev.store.work_dir / "profile", callee(ev.spec),
                   worker.device, level=ev.sandbox)
