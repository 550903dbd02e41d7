#!/usr/bin/env python3
"""What the landlock sandbox level costs per candidate, against resource limits alone (no GPU needed).

    python3 bench/landlock_cost.py [--starts 60] [--builds 8] [--out bench/results/sandbox_landlock_cost.md]

Interleaved (A B, then B A: drift on a loaded machine hits both alike): a process start of `true` through
process.run unconfined, under `rlimits` and under `landlock` (confined.for_run, the GPU's nodes included), and
the native harness of the axpy test MEP built by nvcc under each (confined.for_build: nvcc and its toolchain
under the same rules). Medians and minima; with --out, a markdown table.
"""
from __future__ import annotations

import argparse
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mepgen import mepbuild  # noqa: E402
from mepgen.evaluate import confined, landlock_level, process, sandbox  # noqa: E402
from mepgen.mep.render import render_harness  # noqa: E402
from mepgen.spec import load_spec  # noqa: E402


def interleaved(kinds: list[str], n: int, once) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {k: [] for k in kinds}
    for i in range(n):
        for k in (kinds if i % 2 == 0 else list(reversed(kinds))):
            t = time.perf_counter()
            once(k, i)
            times[k].append(time.perf_counter() - t)
    return times


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--starts", type=int, default=60)
    ap.add_argument("--builds", type=int, default=8)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    if not sandbox.landlock_works()[0]:
        print(f"the landlock level does not work here: {sandbox.landlock_works()[1]}")
        return 1
    work = Path(tempfile.mkdtemp(prefix="mepgen-landlock-cost-"))
    mep = work / "app" / ".mepgen" / "meps" / "cg.axpy"
    mep.mkdir(parents=True)
    for f in ("mep.yaml", "kernel.cu"):
        shutil.copy(ROOT / "tests" / "evaluate_fixtures" / "axpy" / f, mep / f)
    spec = load_spec(mep / "mep.yaml")
    (mep / "harness.cu").write_text(render_harness(spec))
    data, scratch = mep / "data", mep / "work"
    data.mkdir()

    def start(level: str, i: int) -> None:
        c = None if level == "none" else confined.for_run(level, [data], scratch, 1 << 20)
        done = process.run(["true"], 30, confine=c)
        assert done.returncode == 0, done.stderr

    def build(level: str, i: int) -> None:
        out = work / "build" / f"{level}{i}"
        out.mkdir(parents=True)
        cmd = mepbuild.nvcc_command(spec, mep, mep / "kernel.cu", out / "mep")
        done = process.run(cmd, 600, cwd=mep, confine=confined.for_build(level, cmd, mep, out,
                                                                         [mep / "kernel.cu", mep / "harness.cu"]))
        assert done.returncode == 0, done.stderr[-800:]

    starts = interleaved(["none", "rlimits", "landlock"], args.starts, start)
    builds = interleaved(["rlimits", "landlock"], args.builds, build) if shutil.which(mepbuild.nvcc_executable()) \
        else {}
    launcher = "C (confine_exec.c)" if landlock_level.launcher_binary() else "Python (confine_exec.py)"
    lines = [f"# What the landlock level costs ({platform.node()}, Landlock ABI {landlock_level.abi()}, "
             f"launcher: {launcher})", "", "`python3 bench/landlock_cost.py`, interleaved runs.", "",
             "| what | level | median | min | n |", "|---|---|---|---|---|"]
    for level, v in starts.items():
        lines.append(f"| process start (`true`) | {level} | {statistics.median(v) * 1e3:.2f} ms | "
                     f"{min(v) * 1e3:.2f} ms | {len(v)} |")
    for level, v in builds.items():
        lines.append(f"| native harness build (nvcc) | {level} | {statistics.median(v):.2f} s | {min(v):.2f} s | "
                     f"{len(v)} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
