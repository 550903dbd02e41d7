#!/usr/bin/env python3
"""GPU: `mepgen optimize` with the transformation library alone over prepared MEPs, and the geometric-mean speedup.

    python3 bench/library_speedup.py OUT PATH... [--budget 8] [--seconds 25] [--size SYM=N ...] [--work DIR]

Each PATH is an application folder (copied into --work DIR/, default /tmp/mepgen-library-speedup, extracted and cut into MEPs with `mepgen mep --all`
unless it already holds .mepgen/meps/) or one MEP folder (`APP/.mepgen/meps/ID`). For every MEP without open
todo items it runs, as a user would,

    python -m mepgen.cli optimize ID -C APP --proposer library --no-inherit --budget B --time-limit S --json

and records the best verified speedup (1.0 where nothing verified was faster: the original is kept), the
winning change and the run folder. Writes OUT/library_speedup.json and OUT/library_speedup.md (per-kernel table,
geometric mean, the GPU, the command). Every win is the evaluator's verdict: verified on every input set and
timed against the original.
"""
from __future__ import annotations

import argparse
import json
import math
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def meps_of(path: Path, work: Path, sizes: list[str]) -> list[tuple[Path, str]]:
    """(application folder, MEP id) of every MEP PATH names."""
    if (path / "mep.yaml").is_file():
        return [(path.parents[2], path.name)]
    app = path
    if not (path / ".mepgen" / "meps").is_dir():
        app = work / path.name
        if app.exists():
            shutil.rmtree(app)
        app.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(path, app, ignore=shutil.ignore_patterns(".mepgen", "build"))
        extra = [a for s in sizes for a in ("--size", s)]
        for args in (["extract", "."], ["mep", "--all", *extra]):
            subprocess.run([sys.executable, "-m", "mepgen.cli", *args], cwd=app, capture_output=True, text=True)
    return [(app, d.name) for d in sorted((app / ".mepgen" / "meps").iterdir()) if (d / "mep.yaml").is_file()]


def open_todo(app: Path, mid: str) -> int:
    sys.path.insert(0, str(REPO))
    from mepgen.spec import load_spec
    try:
        return len(load_spec(app / ".mepgen" / "meps" / mid / "mep.yaml").todo)
    except Exception:
        return -1


def gpu_name() -> str:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=20).stdout.strip().splitlines()
        return out[0] if out else "unknown GPU"
    except OSError:
        return "no nvidia-smi"


def write(out: Path, rows: list[dict], t0: float) -> list[str]:
    """OUT/library_speedup.json and .md for the rows so far (written after every kernel: a run stopped at its
    limit keeps what it measured)."""
    ok = [r["speedup"] for r in rows if r.get("status") == "ok" and r.get("speedup")]
    geo = math.exp(sum(math.log(s) for s in ok) / len(ok)) if ok else None
    gpu = gpu_name()
    command = " ".join(["python3", "bench/library_speedup.py", *sys.argv[1:]])
    (out / "library_speedup.json").write_text(json.dumps({"gpu": gpu, "command": command, "geomean": geo,
                                                            "seconds": round(time.time() - t0), "kernels": rows},
                                                           indent=1))
    lines = [f"# mepgen optimize, library alone ({gpu})", "", f"`{command}`", "",
             f"geometric-mean speedup over {len(ok)} kernel(s): " + (f"**{geo:.2f}x**" if geo else "n/a"), "",
             "| kernel | speedup | baseline ms | evaluated | winning change |", "|---|---|---|---|---|"]
    for r in rows:
        if r.get("status") != "ok":
            lines.append(f"| {r['kernel']} | {r.get('status')} {' '.join(r.get('error', []))[:80]} | | | |")
            continue
        lines.append(f"| {r['kernel']} | {r['speedup']:.2f}x | {r['baseline_ms'] or 0:.4g} | {r['evaluations']} | "
                     f"{(r['change'] or 'none faster').replace('|', '/')[:140]} |")
    (out / "library_speedup.md").write_text("\n".join(lines) + "\n")
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("paths", nargs="+", type=Path)
    ap.add_argument("--budget", type=int, default=8, help="candidates per kernel")
    ap.add_argument("--seconds", type=float, default=25, help="wall-time limit per kernel")
    ap.add_argument("--size", action="append", default=[], help="SYM=N for `mepgen mep` (repeatable)")
    ap.add_argument("--work", type=Path, default=Path("/tmp/mepgen-library-speedup"),
                    help="where application folders are copied and cut into MEPs")
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    rows, t0 = [], time.time()
    for path in a.paths:
        if not path.is_dir():
            print(f"{path}: not a folder, skipped", flush=True)
            continue
        for app, mid in meps_of(path.resolve(), a.work.resolve(), a.size):
            name = f"{app.name}/{mid}"
            if open_todo(app, mid):
                rows.append({"kernel": name, "status": "skipped: mep.yaml has open todo items"})
                continue
            cmd = [sys.executable, "-m", "mepgen.cli", "optimize", mid, "-C", str(app), "--proposer", "library",
                   "--no-inherit", "--budget", str(a.budget), "--time-limit", str(a.seconds), "--json"]
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=a.seconds * 4 + 120)
            row = {"kernel": name, "rc": done.returncode}
            try:
                res = json.loads(done.stdout)
                best = res.get("best")
                row.update(status="ok", baseline_ms=res.get("baseline_ms"), evaluations=res.get("evaluations"),
                           speedup=best["speedup"] if best else 1.0, change=best["change"] if best else "",
                           run=res.get("run"))
            except (json.JSONDecodeError, KeyError, TypeError):
                row.update(status="failed", error=(done.stderr or done.stdout).strip().splitlines()[-1:])
            rows.append(row)
            print(f"{name:40} {row.get('speedup', '-')!s:>8}  {row.get('change', row.get('status'))[:90]}", flush=True)
            write(a.out, rows, t0)
    lines = write(a.out, rows, t0)
    print("\n".join(lines[:5]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
