#!/usr/bin/env python3
"""CPU: how much of the candidates' nvcc time the evaluator hides behind the GPU's work (batch.py's pipeline).

Runs evaluate.batch.evaluate_many on N variants of one MEP's kernel.cu (each a distinct build: real nvcc, the
MEP's backend, --jobs compiles at a time) with the GPU stage replaced by a wait of --gpu-s seconds per candidate (one
"GPU"), so it needs no GPU. Reports the wall time against the serial one (every compile, then its GPU stage, one
after the other: the sum of the compile phases plus N x gpu-s), the share of compile seconds hidden (overlap),
and how long the GPU waited for the first build and in total.

    python3 bench/compile_overlap.py MEP_DIR [--candidates 8] [--gpu-s 0.5] [--jobs 0] [--backend native] [--json]
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import mepgen.evaluate.evaluator as ev_mod  # noqa: E402
from mepgen.evaluate.batch import evaluate_many  # noqa: E402
from mepgen.spec import load_spec  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mep", type=Path)
    ap.add_argument("--candidates", type=int, default=8)
    ap.add_argument("--gpu-s", type=float, default=0.5, help="the GPU stage of one candidate (seconds)")
    ap.add_argument("--jobs", type=int, default=0, help="parallel compiles (0: one per CPU core)")
    ap.add_argument("--backend", default="native")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    mep = a.mep.resolve()
    ev_mod.list_gpus = lambda: ([0], "")            # one "GPU": the stage below waits instead of running
    ev_mod.peaks_mod.gpu_identity = lambda d: "CPU-ONLY|0|0"
    ev = ev_mod.Evaluator(load_spec(mep / "mep.yaml"), mep,
                          ev_mod.Options(backend=a.backend, jobs=a.jobs, use_cache=False, sandbox="off"))
    busy: list[tuple[float, float]] = []
    lock = threading.Lock()

    def gpu_stage(res, built, worker):
        t0 = time.monotonic()
        time.sleep(a.gpu_s)
        with lock:
            busy.append((t0, time.monotonic()))
        res.status, res.stage = "ok", "done"
        return res

    ev.check = gpu_stage
    text = (mep / "kernel.cu").read_text()
    with tempfile.TemporaryDirectory(prefix="overlap-") as tmp:
        files = []
        for i in range(a.candidates):
            f = Path(tmp) / f"v{i}.cu"
            f.write_text(text + f"\n// compile_overlap variant {i} {time.time_ns()}\n")
            files.append((f"v{i}", f))
        start = time.monotonic()
        results = evaluate_many(ev, files)
        wall = time.monotonic() - start
    compile_s = [r.phases.get("compile", 0.0) for r in results]
    failed = [r.name for r in results if r.status != "ok"]
    serial = sum(compile_s) + a.gpu_s * len(busy)
    first_wait = min(b[0] for b in busy) - start if busy else None
    gpu_busy = sum(e - s for s, e in busy)
    out = {"mep": str(mep), "backend": ev.backend_name, "candidates": a.candidates, "jobs": ev_mod.default_jobs(a.jobs),
           "gpu_s": a.gpu_s, "failed": failed, "wall_s": round(wall, 2), "serial_s": round(serial, 2),
           "compile_s_sum": round(sum(compile_s), 2), "compile_s_median": round(sorted(compile_s)[len(compile_s) // 2], 2),
           "compile_hidden": round((serial - wall) / sum(compile_s), 3) if sum(compile_s) else None,
           "gpu_idle_s": round(wall - gpu_busy, 2), "gpu_first_wait_s": round(first_wait, 2) if first_wait else None}
    if a.json:
        print(json.dumps(out, indent=1))
    else:
        for k, v in out.items():
            print(f"{k:18} {v}")
    ev.close()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
