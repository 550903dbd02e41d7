"""Benchmark: wall time of `mepgen mep --all` on an example application (goal: under 5 s on 2 cores).

Copies the example to a temporary folder, runs `mepgen extract` once (not timed), then times `mepgen mep
--all` as a user runs it (a fresh process, so imports and parsing count) several times, and prints a
Markdown table to append to bench/results/mep_generation.md.

    python3 bench/mep_generation.py [--example heatcg] [--repeat 5]
"""
from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}, {platform.system()}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--example", default="heatcg")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        app = Path(tmp) / args.example
        shutil.copytree(ROOT / "examples" / args.example, app,
                        ignore=shutil.ignore_patterns(".mepgen", "build", "compile_commands.json"))
        subprocess.run([sys.executable, "-m", "mepgen.cli", "extract", str(app)], check=True,
                       capture_output=True)
        times = []
        for i in range(args.repeat):
            if (app / ".mepgen" / "meps").exists():
                shutil.rmtree(app / ".mepgen" / "meps")
            t = time.perf_counter()
            r = subprocess.run([sys.executable, "-m", "mepgen.cli", "mep", "--all", "-C", str(app)],
                               capture_output=True, text=True)
            times.append(time.perf_counter() - t)
            if r.returncode not in (0, 3):
                print(r.stderr, file=sys.stderr)
                return 1
        kernels = sum(1 for p in (app / ".mepgen" / "meps").iterdir() if not p.name.startswith("."))
        data = sum(f.stat().st_size for f in (app / ".mepgen" / "meps").rglob("*.npy"))
    print(f"| {time.strftime('%Y-%m-%d')} | {args.example} | {kernels} | {data / 2**20:.0f} MiB | "
          f"{statistics.median(times):.2f} s | {min(times):.2f} s | {max(times):.2f} s | {machine()} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
