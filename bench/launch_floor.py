#!/usr/bin/env python3
"""GPU: how much faster could any rewrite of a kernel's body make it? The launch floor of each MEP.

    python3 bench/launch_floor.py OUT PATH... [--backend auto|native|pycuda] [--rounds 3]

PATH: an MEP folder (`APP/.mepgen/meps/ID`), an application folder with `.mepgen/meps/`, or a folder of those
(tuning_sweep.meps_of reads them). MEPs with open todo items are skipped.

For each MEP one evaluator (the one `mepgen optimize` uses, the same timing: interleaved rounds against the original,
the L2 flushed as it flushes it) times the kernel with its body emptied (`{}`), at the MEP's own launch: grid,
block and shared memory as captured. Such a kernel writes nothing, so the comparison of its outputs is switched off
for it, and so are the checks that would call its time impossible; nothing else is. What it measures is the time a
launch of that shape costs with no work in it: no rewrite of the body can go below it at that launch.

Recorded per MEP: the original's median and the empty kernel's (ms), and bound = original / empty, the most any
body rewrite could reach at that launch. OUT/launch_floor.json after each MEP and OUT/launch_floor.md (table, the
geometric mean of the bounds) at the end, so a run cut short keeps what it measured.
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))


def empty_text(mep: Path, spec) -> str:
    """kernel.cu with the kernel's body replaced by `{}` (libclang's extent of the definition's body)."""
    from mepgen.optimize.library.source import KernelSource
    src = KernelSource((mep / "kernel.cu").read_text(), spec, normalize=False)
    start, end = src.span(src.body)
    return src.replace([(start, end, "{ }")])


def floor_of(mep: Path, backend: str, rounds: int, work: Path) -> dict:
    from mepgen.evaluate import Evaluator, Options
    from mepgen.spec import load_spec
    spec = load_spec(mep / "mep.yaml")
    row = {"mep": str(mep), "kernel": spec.kernel.name}
    if spec.todo:
        return {**row, "skipped": f"{len(spec.todo)} open todo items"}
    ev = Evaluator(spec, mep, Options(backend=backend, rounds=rounds))
    # An empty body writes nothing: no comparison of outputs, no perturbation re-check, no peak or timer check.
    ev._wrong = lambda *a, **k: None
    ev._perturbation_failed = lambda *a, **k: False
    ev._timed = (lambda timed: (lambda *a, **k: (timed(*a, **k)[0], None)))(ev._timed)
    started = time.time()
    try:
        ev.prepare()
        path = work / spec.kernel.id / "empty.cu"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(empty_text(mep, spec))
        res = ev.new_result("empty", path, lint=False)
        built = ev.compile(res, path)
        if built is None:
            return {**row, "error": f"the empty kernel did not compile: {str(res.compile_failed)[:300]}"}
        res = ev.check(res, built, ev.workers[0])
        t = res.timed
        if res.status != "ok" or t is None or not t.baseline_median_ms:
            return {**row, "error": f"{res.status}: {res.fault or res.wrong or res.impossible}"[:300]}
        return {**row, "original_ms": t.baseline_median_ms, "empty_ms": t.median_ms,
                "bound": t.baseline_median_ms / t.median_ms, "noise": t.noise,
                "launch": {"grid": list(spec.launch.grid), "block": list(spec.launch.block),
                           "shared_mem": spec.launch.shared_mem}, "seconds": round(time.time() - started, 1)}
    except Exception as e:     # a benchmark keeps going: the row says what stopped this MEP
        return {**row, "error": f"{type(e).__name__}: {e}"[:300]}
    finally:
        ev.close()


def geomean(values: list[float]) -> float | None:
    return math.exp(sum(map(math.log, values)) / len(values)) if values else None


def summary(rows: list[dict], gpu: str, command: str) -> str:
    done = [r for r in rows if "bound" in r]
    g = geomean([r["bound"] for r in done])
    lines = ["# Launch floor: the original against its own launch with an empty body", "",
             f"- GPU: {gpu}; {datetime.datetime.now().isoformat(timespec='seconds')}", f"- command: `{command}`",
             "- bound = original / empty: the most any rewrite of the body could reach at the captured launch",
             f"- **geometric mean of the bounds over {len(done)} MEPs: {g:.2f}x**" if g else "- no MEP measured",
             f"- MEPs whose bound is under 1.3x: {sum(r['bound'] < 1.3 for r in done)}; under 2x: "
             f"{sum(r['bound'] < 2 for r in done)}", "",
             "| kernel | launch (grid / block) | original ms | empty ms | bound |", "|---|---|---|---|---|"]
    for r in rows:
        name = "/".join(Path(r["mep"]).parts[-4::3])
        if "bound" not in r:
            lines.append(f"| {name} | | {r.get('skipped') or r.get('error')} | | |")
            continue
        la = r["launch"]
        lines.append(f"| {name} | {', '.join(la['grid'])} / {', '.join(la['block'])} | {r['original_ms']:.4f} | "
                     f"{r['empty_ms']:.4f} | {r['bound']:.2f}x |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("paths", type=Path, nargs="+")
    ap.add_argument("--backend", default="auto", choices=("auto", "native", "pycuda"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--work", type=Path, default=Path("/tmp/launch_floor"))
    a = ap.parse_args(argv)
    from tuning_sweep import meps_of
    from library_speedup import gpu_name
    a.out.mkdir(parents=True, exist_ok=True)
    meps = meps_of(a.paths, a.work)
    rows, gpu = [], gpu_name()
    command = f"bench/launch_floor.py {a.out} " + (" ".join(map(str, a.paths)) if len(a.paths) <= 3 else
                                                   f"<{len(a.paths)} paths: {len(meps)} MEPs, listed below>")
    for mep in meps:
        rows.append(floor_of(mep, a.backend, a.rounds, a.work / mep.parents[2].name))
        r = rows[-1]
        print(f"{mep.parents[2].name}/{mep.name}: " + (f"{r['original_ms']:.4f} ms, empty {r['empty_ms']:.4f} ms, "
              f"bound {r['bound']:.2f}x" if "bound" in r else r.get("skipped") or r.get("error")), flush=True)
        (a.out / "launch_floor.json").write_text(json.dumps({"gpu": gpu, "command": command, "rows": rows}, indent=1))
        (a.out / "launch_floor.md").write_text(summary(rows, gpu, command))
    return 0


if __name__ == "__main__":
    sys.exit(main())
