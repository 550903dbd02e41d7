"""The GPU's measured peaks (memory bandwidth, FMA throughput), and the check that flags the impossible.

Measured once per GPU model, driver and PCI slot by `peaks.cu`, cached in
`$XDG_CACHE_HOME/mepgen/peaks.json` (default `~/.cache/mepgen/`). A candidate that moves its bytes faster
than the memory can, or does its FLOPs faster than the FMA units can, has skipped work the verifier did
not see; it is flagged impossible and never accepted.

Writes can settle in L2 without reaching DRAM within the launch, so the bytes checked against the DRAM
peak are `work.bytes - l2_bytes` (the L2 is flushed before each timed launch, so reads cannot hide).
The FLOP peak is the CUDA cores' FMA rate: a tensor-core variant of an fp32 kernel may legitimately pass
it; for such a kernel leave `work.flops` out of mep.yaml and only the bandwidth is checked.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from .. import usercache
from .. import mepbuild
from ..workspace import write_json
from . import l2_flush, process

#: how far a measurement may exceed the measured peak before it is called impossible
MARGIN = 0.05
PEAKS_SOURCE = Path(__file__).with_name("peaks.cu")


@dataclass
class Peaks:
    device: str
    bandwidth_gbs: float          # the larger of the copy and read-only streams
    gflops: float                 # the larger of fp32 and fp64 FMA throughput
    l2_bytes: int
    raw: dict
    #: (bytes, GB/s) of the faster of a perfect read-only and copy stream of that many bytes in one launch,
    #: timed as the harness times (L2 flushed, events): short launches cannot reach the peak
    stream_curve: list[tuple[int, float]] = field(default_factory=list)

    @classmethod
    def from_record(cls, rec: dict) -> "Peaks":
        bw = max(rec["copy_gbs"], rec["read_gbs"])
        curve = sorted((int(b), min(bw, max(r, c))) for b, r, c in rec.get("stream_curve") or [])
        return cls(rec["device"], bw, max(rec["fp32_gflops"], rec["fp64_gflops"]), int(rec["l2_bytes"]), rec,
                   curve)

    def stream_gbs(self, nbytes: int) -> float | None:
        """What a perfect streaming kernel moving `nbytes` in one launch reaches here (log-linear between the
        measured sizes; the peak beyond the buffer the peak was measured on); None without a measured curve or
        below its smallest size, where launch latency, not bandwidth, sets the time."""
        if not self.stream_curve or nbytes <= 0:
            return None
        pts = list(self.stream_curve)
        top = int(self.raw.get("buffer_bytes") or 0)
        if top > pts[-1][0]:
            pts.append((top, self.bandwidth_gbs))
        if nbytes < pts[0][0]:
            return None
        for (b0, g0), (b1, g1) in zip(pts, pts[1:]):
            if nbytes <= b1:
                f = (math.log(nbytes) - math.log(b0)) / (math.log(b1) - math.log(b0))
                return g0 + f * (g1 - g0)
        return self.bandwidth_gbs


def cache_file() -> Path:
    return usercache.folder("peaks.json")


def gpu_identity(device: int | None) -> str | None:
    """`name|driver|bus id` of GPU `device` (PCI order, as CUDA_DEVICE_ORDER=PCI_BUS_ID numbers them)."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run([exe, "--query-gpu=index,name,driver_version,pci.bus_id", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    rows = [[c.strip() for c in line.split(",")] for line in out.splitlines() if line.strip()]
    for row in rows:
        if len(row) >= 4 and row[0] == str(device or 0):
            return "|".join(row[1:4])
    return None


def measure(device: int | None, build_dir: Path, timeout: float = 300.0) -> dict:
    """Compile and run peaks.cu on `device`; the JSON it prints."""
    build_dir.mkdir(parents=True, exist_ok=True)
    flush = l2_flush.source()
    digest = hashlib.sha256(PEAKS_SOURCE.read_bytes() + flush.encode()).hexdigest()[:12]
    binary = build_dir / f"peaks-{digest}"
    if not binary.is_file():
        (build_dir / l2_flush.SOURCE).write_text(flush)
        done = process.run([mepbuild.nvcc_executable(), "-O3", "-std=c++17", "-arch=native", f"-I{build_dir}",
                            PEAKS_SOURCE, "-o", binary], timeout=timeout)
        if done.returncode != 0:
            raise RuntimeError(f"cannot build the peak benchmark: {(done.stderr or done.stdout).strip()[-500:]}")
    env = dict(os.environ, CUDA_DEVICE_ORDER="PCI_BUS_ID")
    if device is not None:
        env["CUDA_VISIBLE_DEVICES"] = str(device)
    done = process.run([binary], timeout=timeout, env=env)
    rec = None
    for line in done.stdout.splitlines():
        if line.startswith("{"):
            rec = json.loads(line)
    if done.returncode != 0 or not rec or rec.get("status") != "ok":
        raise RuntimeError(f"the peak benchmark failed: {(rec or {}).get('error') or done.stderr.strip()[-300:]}")
    return rec


def get(device: int | None, build_dir: Path) -> Peaks | None:
    """Cached peaks of `device`, measured on first use; None when there is no GPU to measure."""
    ident = gpu_identity(device)
    if ident is None:
        return None
    path = cache_file()
    try:
        cache = json.loads(path.read_text()) if path.is_file() else {}
    except (OSError, json.JSONDecodeError):
        cache = {}
    if ident not in cache or "stream_curve" not in cache[ident]:     # measured before the curve existed
        cache[ident] = measure(device, build_dir)
        write_json(path, cache)
    return Peaks.from_record(cache[ident])


@dataclass
class Achieved:
    gbps: float | None
    gflops: float | None
    pct_bw: float | None
    pct_flops: float | None
    impossible: str | None
    pct_stream: float | None = None      # % of what a perfect streaming kernel of the same bytes reaches


def achieved(work_bytes: int | None, work_flops: int | None, median_ms: float, peaks: Peaks | None,
             l2_bytes: int | None = None, margin: float = MARGIN) -> Achieved:
    """Throughput of a launch of `median_ms`, as a share of the peaks, and why it is impossible if it is."""
    seconds = median_ms / 1e3
    if seconds <= 0:
        return Achieved(None, None, None, None, f"a median time of {median_ms} ms")
    gbps = work_bytes / seconds / 1e9 if work_bytes else None
    gflops = work_flops / seconds / 1e9 if work_flops else None
    if peaks is None:
        return Achieved(gbps, gflops, None, None, None)
    pct_bw = 100.0 * gbps / peaks.bandwidth_gbs if gbps is not None else None
    pct_fl = 100.0 * gflops / peaks.gflops if gflops is not None else None
    why = None
    l2 = l2_bytes if l2_bytes is not None else peaks.l2_bytes
    if work_bytes:
        dram_bytes = max(0, work_bytes - l2)
        floor_ms = dram_bytes / (peaks.bandwidth_gbs * 1e9) * 1e3
        if dram_bytes and median_ms < floor_ms / (1.0 + margin):
            why = (f"{median_ms:.4g} ms to move {work_bytes} bytes: at least {dram_bytes} must cross DRAM, which takes "
                   f"{floor_ms:.4g} ms at the measured {peaks.bandwidth_gbs:.0f} GB/s")
    if why is None and work_flops:
        floor_ms = work_flops / (peaks.gflops * 1e9) * 1e3
        if median_ms < floor_ms / (1.0 + margin):
            why = (f"{median_ms:.4g} ms for {work_flops} FLOPs: the measured peak of {peaks.gflops:.0f} GFLOP/s "
                   f"needs {floor_ms:.4g} ms")
    ceiling = peaks.stream_gbs(work_bytes) if work_bytes else None
    pct_stream = 100.0 * gbps / ceiling if gbps is not None and ceiling else None
    return Achieved(gbps, gflops, pct_bw, pct_fl, why, pct_stream)
