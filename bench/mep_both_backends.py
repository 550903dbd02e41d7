"""Benchmark: does every complete MEP build on both backends? (compiles only: no GPU needed)

For each application (a copy in a temporary folder; the corpus is never copied into this repository):
`mepgen extract` then `mepgen mep --all`, and for every MEP with no todo, the two builds the evaluator runs:
- native: the harness with kernel.cu (mepbuild.nvcc_command, with -c: the object, no link);
- pycuda: the entry file with kernel.cu into a cubin (evaluate/pycuda_entry.entry_source, nvcc -cubin).
Records per MEP whether each compiled and nvcc's first error line, which backend `--backend auto` takes (native
where the MEP holds what the pycuda entry cannot: evaluate/devices.pycuda_unsupported) and whether that one
builds, and per suite the counts.

    python3 bench/mep_both_backends.py --suite rodinia=/work/corpus/rodinia/cuda \
        --suite hecbench=/work/corpus/hecbench/src:-cuda:17 --out /tmp/sweep.json [--jobs 2]

A suite is NAME=DIR, optionally :SUFFIX (only folders ending so) and :EVERY (every EVERY-th sorted folder).
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TIMEOUT = 300


def _first_error(text: str) -> str:
    lines = [ln for ln in text.splitlines() if "error" in ln.lower()]
    line = (lines or text.strip().splitlines() or [""])[0]
    return line.split(": ", 1)[-1][:200] if ": error" in line or "error:" in line else line[:200]


def _compile(cmd: list[str], cwd: Path) -> tuple[bool, str]:
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT, cwd=cwd)
    except subprocess.TimeoutExpired:
        return False, "timed out"
    return done.returncode == 0, "" if done.returncode == 0 else _first_error(done.stdout + done.stderr)


def build_both(mep_dir: Path) -> dict:
    """Compile the MEP as the native backend and as the pycuda backend would."""
    from mepgen import mepbuild
    from mepgen.evaluate.pycuda_entry import entry_source
    from mepgen.spec import load_spec
    spec = load_spec(mep_dir / "mep.yaml")
    if spec.todo:
        return {"complete": False}
    with tempfile.TemporaryDirectory(prefix="mepboth-") as tmp:
        tmp = Path(tmp)
        native = mepbuild.nvcc_command(spec, mep_dir, mep_dir / "kernel.cu", tmp / "h.o")
        native.insert(-3, "-c")
        ok_n, err_n = _compile(native, mep_dir)
        entry = tmp / "entry.cu"
        entry.write_text(entry_source(spec, mep_dir / "kernel.cu"))
        cubin = [mepbuild.nvcc_executable(), *mepbuild.build_flags(spec), f"-I{mep_dir}", "-cubin", str(entry),
                 "-o", str(tmp / "k.cubin")]
        ok_p, err_p = _compile(cubin, mep_dir)
    from mepgen.evaluate.devices import pycuda_unsupported
    why = pycuda_unsupported(spec)       # `auto` takes native for these, and says why (evaluate/devices.py)
    auto_ok = ok_n if why or spec.chain or spec.buffers else ok_p
    return {"complete": True, "native": ok_n, "native_error": err_n, "pycuda": ok_p, "pycuda_error": err_p,
            "auto": "native" if why or spec.chain or spec.buffers else "pycuda", "auto_why": why, "auto_ok": auto_ok}


def one_app(src: Path, work: Path) -> dict:
    app = work / src.name
    shutil.copytree(src, app, symlinks=True, ignore=shutil.ignore_patterns(".mepgen"))
    env = {**os.environ, "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    out = {"app": src.name, "meps": {}}
    t0 = time.time()
    for args in (["extract", "."], ["mep", "--all"]):
        try:
            r = subprocess.run([sys.executable, "-m", "mepgen.cli", *args], cwd=app, capture_output=True, text=True,
                               timeout=TIMEOUT, env=env)
        except subprocess.TimeoutExpired:
            out["error"] = f"{args[0]} timed out"
            return out
        if r.returncode == 70 or "Traceback" in r.stderr:
            out["internal"] = f"{args[0]}: {r.stderr.strip().splitlines()[-1:]}"
        if args[0] == "extract" and r.returncode != 0:
            out["error"] = f"extract: {(r.stderr.strip().splitlines() or [''])[-1][:200]}"
            return out
    meps = app / ".mepgen" / "meps"
    for d in sorted(meps.iterdir()) if meps.is_dir() else []:
        if (d / "mep.yaml").is_file():
            try:
                out["meps"][d.name] = build_both(d)
            except Exception as e:       # noqa: BLE001 -- recorded, the sweep goes on
                out["meps"][d.name] = {"complete": None, "error": f"{type(e).__name__}: {e}"}
    out["seconds"] = round(time.time() - t0, 1)
    shutil.rmtree(app, ignore_errors=True)
    return out


def _apps(spec: str) -> tuple[str, list[Path]]:
    name, _, rest = spec.partition("=")
    parts = rest.split(":")
    root, suffix, every = Path(parts[0]), parts[1] if len(parts) > 1 else "", int(parts[2]) if len(parts) > 2 else 1
    apps = sorted(p for p in root.iterdir() if p.is_dir() and p.name.endswith(suffix))
    return name, apps[::every]


def summary(results: dict) -> dict:
    out = {}
    for suite, apps in results.items():
        meps = [m for a in apps for m in a["meps"].values()]
        done = [m for m in meps if m.get("complete")]
        out[suite] = {"apps": len(apps), "meps": len(meps), "complete": len(done),
                      "native": sum(m["native"] for m in done), "pycuda": sum(m["pycuda"] for m in done),
                      "both": sum(m["native"] and m["pycuda"] for m in done),
                      "auto_builds": sum(bool(m.get("auto_ok")) for m in done),
                      "apps_failed": sum(1 for a in apps if a.get("error"))}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suite", action="append", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    results: dict[str, list] = {}
    with tempfile.TemporaryDirectory(prefix="mepboth-apps-") as work, cf.ProcessPoolExecutor(args.jobs) as pool:
        for spec in args.suite:
            name, apps = _apps(spec)
            futures = [pool.submit(one_app, a, Path(work)) for a in apps]
            results[name] = [f.result() for f in futures]
    Path(args.out).write_text(json.dumps({"summary": summary(results), "results": results}, indent=1))
    print(json.dumps(summary(results), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
