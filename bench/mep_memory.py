#!/usr/bin/env python3
"""Peak memory of `mepgen mep --all` against the number of kernels (issue 40: it must stay flat).

Generates an application of MODULES copies of the bundled example (9 kernels each, namespaces renamed per
module: bench/extract_scaling.py's tree), extracts it once, then runs `mepgen mep --all` in a fresh process
and reads that process's peak resident set size (wait4's ru_maxrss). Prints one Markdown row per size.

    python3 bench/mep_memory.py --modules 10 40 67 [--size N=4194304 ...]
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from extract_scaling import make_tree  # noqa: E402


def peak_rss_mb(cmd: list[str], cwd: Path) -> tuple[float, float, int]:
    """(peak RSS in MB of the command's process, wall seconds, exit code)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return usage.ru_maxrss / 1024, time.perf_counter() - t0, proc.returncode


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--modules", type=int, nargs="+", default=[10, 40])
    ap.add_argument("--size", action="append", default=["N=4194304", "NROWS=4194304", "NNZ=20930584"])
    ap.add_argument("--keep", action="store_true", help="Keep the generated trees (printed).")
    args = ap.parse_args()
    print("| kernels | files | extract peak MB | mep --all peak MB | mep --all s | exit |")
    print("|---:|---:|---:|---:|---:|---:|")
    for modules in args.modules:
        tmp = Path(tempfile.mkdtemp(prefix=f"mepgen-mem-{modules}-"))
        try:
            files, _ = make_tree(tmp, modules)
            mepgen = [sys.executable, "-m", "mepgen.cli"]
            ex_mb, _, rc = peak_rss_mb([*mepgen, "extract", ".", "-j", "2"], tmp)
            if rc != 0:
                print(f"extract failed in {tmp} (exit {rc})", file=sys.stderr)
                return 1
            sizes = [a for s in args.size for a in ("--size", s)]
            mb, secs, rc = peak_rss_mb([*mepgen, "mep", "--all", "-C", ".", *sizes], tmp)
            print(f"| {modules * 9} | {files} | {ex_mb:.0f} | {mb:.0f} | {secs:.0f} | {rc} |", flush=True)
        finally:
            if args.keep:
                print(f"kept {tmp}", file=sys.stderr)
            else:
                shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
