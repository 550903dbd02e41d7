#!/usr/bin/env python3
"""Extraction at scale: a generated application tree of >= 200 files and >= 50k lines.

The tree is the bundled proxy application (examples/heatcg) replicated into modules, each with its own
namespaces renamed (`heat` -> `heat_m07`, ...), its own include folder and its own entries in a generated
compile_commands.json, the way a large code base of many similar physics modules looks to mepgen.

Measures: a cold `mepgen extract` (no cache), an unchanged rerun, and a rerun after one header changed.
Goals (issue 2): cold < 30 s on 2 cores, unchanged rerun < 2 s. Writes a JSON/Markdown record with --record.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "heatcg"
NAMESPACES = ("heat", "cg", "analysis")
FLAGS = ["-O3", "-std=c++17", "-arch=sm_90", "-lineinfo", "-DNDEBUG", "-Xcompiler", "-fPIC",
         "--expt-relaxed-constexpr", "-gencode", "arch=compute_90,code=sm_90"]


def make_tree(dest: Path, modules: int) -> tuple[int, int]:
    entries = []
    files = lines = 0
    for m in range(modules):
        mod = dest / f"physics/mod_{m:03d}"
        for sub in ("include", "src"):
            for f in sorted((EXAMPLE / sub).iterdir()):
                text = f.read_text()
                for ns in NAMESPACES:
                    text = re.sub(rf"\b{ns}::", f"{ns}_m{m:03d}::", text)
                    text = re.sub(rf"\bnamespace {ns}\b", f"namespace {ns}_m{m:03d}", text)
                target = mod / sub / f.name
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(text)
                files += 1
                lines += text.count("\n")
                if f.suffix == ".cu":
                    rel = target.relative_to(dest)
                    entries.append({"directory": str(dest), "file": str(target),
                                    "arguments": ["nvcc", *FLAGS, f"-I{mod.relative_to(dest)}/include", "-c",
                                                  str(rel), "-o", f"build/{rel.with_suffix('.o')}"]})
    (dest / "compile_commands.json").write_text(json.dumps(entries, indent=1))
    return files, lines


def timed(cmd: list[str], cwd: Path) -> float:
    t0 = time.perf_counter()
    r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    dt = time.perf_counter() - t0
    if r.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{r.stderr}")
    return dt


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--modules", type=int, default=42, help="copies of the example (42 -> 462 files, ~52k lines)")
    ap.add_argument("--repeat", type=int, default=3, help="timed repetitions of each measurement")
    ap.add_argument("--record", type=Path, help="append the result to this Markdown file (and .json beside it)")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="mepgen-bench-"))
    try:
        files, lines = make_tree(work, args.modules)
        mepgen = [sys.executable, "-m", "mepgen.cli", "extract", str(work), "--json"]
        cold, warm, touched = [], [], []
        for _ in range(args.repeat):
            shutil.rmtree(work / ".mepgen", ignore_errors=True)
            cold.append(timed(mepgen, work))
            warm.append(timed(mepgen, work))
            header = work / "physics/mod_000/include/device_math.cuh"
            header.write_text(header.read_text() + "\n// touched\n")
            touched.append(timed(mepgen, work))
        inv = json.loads((work / ".mepgen/inventory.json").read_text())
        med = lambda xs: sorted(xs)[len(xs) // 2]
        result = {
            "date": datetime.date.today().isoformat(), "machine": f"{platform.node()} ({os.cpu_count()} cores, "
            f"{platform.processor() or platform.machine()})", "python": platform.python_version(),
            "files": files, "lines": lines, "translation_units": len(inv["translation_units"]),
            "kernels": len(inv["kernels"]), "cold_s": cold, "unchanged_s": warm, "one_header_changed_s": touched,
            "cold_median_s": med(cold), "unchanged_median_s": med(warm), "touched_median_s": med(touched),
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(result, indent=1))
    ok = result["cold_median_s"] < 30 and result["unchanged_median_s"] < 2
    print(f"goal (cold < 30 s, unchanged < 2 s): {'met' if ok else 'NOT met'}")
    if args.record:
        args.record.parent.mkdir(parents=True, exist_ok=True)
        with args.record.open("a") as fh:
            fh.write(f"\n## {result['date']} — {result['machine']}, Python {result['python']}\n\n"
                     f"Command: `python3 bench/extract_scaling.py --modules {args.modules} --repeat {args.repeat}`\n\n"
                     f"Tree: {files} files, {lines} lines, {result['translation_units']} translation units, "
                     f"{result['kernels']} kernels.\n\n"
                     "| measurement | median (s) | all runs (s) |\n|---|---|---|\n"
                     f"| cold (no cache) | {med(cold):.2f} | {', '.join(f'{x:.2f}' for x in cold)} |\n"
                     f"| unchanged rerun | {med(warm):.2f} | {', '.join(f'{x:.2f}' for x in warm)} |\n"
                     f"| one header changed | {med(touched):.2f} | {', '.join(f'{x:.2f}' for x in touched)} |\n\n"
                     f"Goal cold < 30 s and unchanged < 2 s: {'met' if ok else 'NOT met'}.\n")
        args.record.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
