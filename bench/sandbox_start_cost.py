#!/usr/bin/env python3
"""What one confined process start costs, part by part (no GPU needed).

    python3 bench/sandbox_start_cost.py OUT_DIR [--n 40]

Measures, median over N starts (wall time, this machine): a plain start of `true` (the floor), the same
through process.run at each level (rlimits, unshare, landlock, bwrap) and bwrap's parts (without the seccomp filter,
without a network namespace, without dropping root), the pycuda worker's interpreter start unconfined and
under confined.for_worker (`python -c pass` with the same flags and path); and the Python side of building a
confinement: the first call of what is cached per process (the level probe `strongest()`, the seccomp program,
nvcc's toolkit folder) and what every start pays again (for_run + command line, the seccomp descriptor).
Writes OUT_DIR/sandbox_start_cost.json and OUT_DIR/sandbox_start_cost.md.
"""
from __future__ import annotations

import argparse
import json
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
sys.path.insert(0, str(ROOT))

from mepgen import mepbuild  # noqa: E402
from mepgen.evaluate import confine_paths, confined, confinement, namespace_levels, process, sandbox, seccomp_filter  # noqa: E402
from mepgen.evaluate.pycuda_backend import worker_path  # noqa: E402


def median_ms(f, n: int) -> float:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        f()
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def first_ms(cached) -> float:
    cached.cache_clear()
    t = time.perf_counter()
    cached()
    return (time.perf_counter() - t) * 1e3


CUDA_PROGRAM = r"""
#include <cstdio>
__global__ void touch(int* p) { p[threadIdx.x] = threadIdx.x; }
int main() {
    int* p = nullptr;
    if (cudaMalloc(&p, 1024) != cudaSuccess) { std::puts("no device"); return 1; }
    touch<<<1, 256>>>(p);
    return cudaDeviceSynchronize() == cudaSuccess ? 0 : 2;
}
"""
WORKER_START = ("import pycuda.driver as d; d.init(); c = d.Device(0).make_context(); "
                "import numpy; c.pop()")


def cuda_rows(work: Path, ws: Path, scratch: Path, level: str, env: dict, flags: list[str], n: int) -> list:
    """A CUDA program's start, and the pycuda worker's (context included), per confinement variant: where the
    time of a confined GPU process goes."""
    src, exe = work / "touch.cu", work / "touch"
    src.write_text(CUDA_PROGRAM)
    nvcc = mepbuild.nvcc_executable()
    subprocess.run([nvcc, "-O2", "-o", str(exe), str(src)], check=True)
    cuda_env = dict(env, CUDA_MODULE_LOADING="EAGER")
    read = [r for r in [confined.toolkit_root(nvcc)] if r]
    first = process.run([str(exe)], 60, env=cuda_env)
    if first.returncode != 0:
        return [(f"CUDA program: cannot run here ({(first.stdout + first.stderr).strip()[:80]})", float("nan"))]
    variants = [("no confinement", lambda: None)]
    if level != "off":
        variants.append(("rlimits", lambda: confinement.Confinement("rlimits")))
    if level == "bwrap":
        def run_c(**kw):
            def make():
                c = confined.for_run("bwrap", [exe], scratch, 1 << 20, read=read)
                for k, v in kw.items():
                    setattr(c, k, v)
                return c
            return make
        variants += [("bwrap (for_run)", run_c()), ("bwrap staying root", run_c(keep_root=True)),
                     ("bwrap without the seccomp filter", run_c(seccomp=False))]
    if sandbox.landlock_works()[0]:
        variants.append(("landlock (for_run)", lambda: confined.for_run("landlock", [exe], scratch, 1 << 20, read=read)))
    out = []
    for name, make in variants:
        def go(make=make):
            done = process.run([str(exe)], 60, env=cuda_env, confine=make())
            assert done.returncode == 0, (done.returncode, done.stdout, done.stderr)
        out.append((f"CUDA program (cudaMalloc + 1 launch), {name}", median_ms(go, n)))
    try:
        import pycuda  # noqa: F401
    except ImportError:
        return out + [("pycuda worker start: pycuda not installed", float("nan"))]
    py = [sys.executable, *flags, "-c", WORKER_START]
    for name, make in [("no confinement", lambda: None),
                       *([(f"for_worker level {level}", lambda: confined.for_worker(level, hide=[ws]))]
                         if level != "off" else []),
                       *([("for_worker level landlock", lambda: confined.for_worker("landlock", hide=[ws]))]
                         if level != "landlock" and sandbox.landlock_works()[0] else [])]:
        def go(make=make):
            done = process.run(py, 120, env=cuda_env, confine=make())
            assert done.returncode == 0, done.stderr
        out.append((f"pycuda worker start (import, context), {name}", median_ms(go, n)))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out_dir", type=Path)
    ap.add_argument("--n", type=int, default=40)
    ap.add_argument("--cuda", action="store_true",
                    help="also a CUDA program's start (cudaFree(0), one launch) and, with pycuda, the worker's "
                         "context creation, unconfined and under each variant (on the GPU machine)")
    args = ap.parse_args()
    n = args.n
    work = Path(tempfile.mkdtemp(prefix="mepgen-start-cost-"))
    ws = work / "app" / ".mepgen" / "meps" / "k"
    (ws / "data").mkdir(parents=True)
    scratch = ws / "work"
    level, why = sandbox.strongest()
    rows: list[tuple[str, float]] = []

    def start(confine_of, argv=("true",), env=None):
        def go():
            c = confine_of()
            done = process.run(list(argv), 30, env=env, confine=c)
            assert done.returncode == 0, done.stderr
        return go

    rows.append(("Popen(true), no process.run", median_ms(lambda: subprocess.run(["true"]), n)))
    rows.append(("process.run(true), no confinement", median_ms(start(lambda: None), n)))
    for lv in [x for x in ("rlimits", "unshare", "landlock", "bwrap") if sandbox.LEVELS.index(x) >= sandbox.LEVELS.index(level)]:
        rows.append((f"process.run(true), level {lv} (for_run, GPU nodes)",
                     median_ms(start(lambda lv=lv: confined.for_run(lv, [ws / "data"], scratch, 1 << 20)), n)))
    if level == "bwrap":
        real_open, real_prefix = seccomp_filter.open_fd, namespace_levels.bwrap_prefix
        seccomp_filter.open_fd = lambda: None
        rows.append(("  bwrap without the seccomp filter",
                     median_ms(start(lambda: confined.for_run("bwrap", [ws / "data"], scratch, 1 << 20)), n)))
        seccomp_filter.open_fd = real_open
        namespace_levels.bwrap_prefix = lambda c: [a for a in real_prefix(c) if a != "--unshare-net"] if c.drops_root else \
            [a if a != "--unshare-all" else "--unshare-user" for a in real_prefix(c)]
        rows.append(("  bwrap without a network namespace",
                     median_ms(start(lambda: confined.for_run("bwrap", [ws / "data"], scratch, 1 << 20)), n)))
        namespace_levels.bwrap_prefix = real_prefix
        if confine_paths.nobody_can_run():
            keep = confined.for_run("bwrap", [ws / "data"], scratch, 1 << 20)
            rows.append(("  bwrap staying root (no setpriv)",
                         median_ms(start(lambda: confinement.Confinement("bwrap", read=keep.read, write=keep.write,
                                                                     hide=keep.hide, gpu=True, keep_root=True)), n)))
    flags = ["-P", "-s"] if sys.version_info >= (3, 11) else ["-s"]
    env = process.candidate_env()
    env["PYTHONPATH"] = ":".join(map(str, worker_path()))
    py = [sys.executable, *flags, "-c", "import numpy"]
    rows.append(("python -c 'import numpy' (the worker's start), no confinement",
                 median_ms(start(lambda: None, py, env), max(5, n // 4))))
    rows.append((f"python -c 'import numpy', for_worker level {level}",
                 median_ms(start(lambda: confined.for_worker(level, hide=[ws]), py, env), max(5, n // 4))))

    confined.toolkit_root.cache_clear()
    t = time.perf_counter()
    confined.toolkit_root(mepbuild.nvcc_executable())
    toolkit_ms = (time.perf_counter() - t) * 1e3
    if args.cuda:
        rows += cuda_rows(work, ws, scratch, level, env, flags, max(5, n // 4))

    py_rows = [("first strongest() (probe, cached per process)", first_ms(sandbox.strongest)),
               ("first seccomp program (libseccomp, cached per process)", first_ms(seccomp_filter.compiled)),
               ("first toolkit_root(nvcc) (nvcc --dryrun, cached per process)", toolkit_ms)]

    def build_line(f):
        def go():
            c = f()
            c.command(["true"])
            c.close()
        return go
    py_rows.append(("for_run + command line (per start)",
                    median_ms(build_line(lambda: confined.for_run(level, [ws / "data"], scratch, 1 << 20)), n)))
    py_rows.append(("for_worker + command line (per worker start)",
                    median_ms(build_line(lambda: confined.for_worker(level, hide=[ws])), n)))
    def descriptor():
        fd = seccomp_filter.open_fd()
        if fd is not None:
            os.close(fd)
    py_rows.append(("seccomp descriptor (memfd, per start)", median_ms(descriptor, n)))

    try:      # bwrap copies the mount table and binds / recursively: its start grows with the mounts
        mounts = len(Path("/proc/self/mountinfo").read_text().splitlines())
    except OSError:
        mounts = None
    record = {"host": platform.node(), "level": level, "why_not_stronger": why, "n": n, "mounts": mounts,
              "starts_ms": dict(rows), "python_side_ms": dict(py_rows)}
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / "sandbox_start_cost.json").write_text(json.dumps(record, indent=1))
    md = [f"# What one confined start costs ({platform.node()}, level {level}, median of {n}, {mounts} mounts)", "",
          "| process start | ms |", "|---|---|"]
    md += [f"| {k} | {v:.2f} |" for k, v in rows]
    md += ["", "| Python side | ms |", "|---|---|"]
    md += [f"| {k} | {v:.3f} |" for k, v in py_rows]
    (args.out_dir / "sandbox_start_cost.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
