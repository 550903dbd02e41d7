"""Benchmark: mepgen as a new user runs it on public applications nobody here wrote, rates per suite.

For every application of a suite (a folder holding a Makefile/CMakeLists.txt and CUDA sources), in a copy of
the suite's tree: `mepgen extract --json APP`, then `mepgen mep --all --json` (each under a time limit), and
optionally builds every MEP (`--build`: `make -C MEP`, nvcc) or runs the original through the evaluator
(`--gpu`: `mepgen run ID`). Records per application and per suite:
  kernels seen in the sources (`__global__` definitions, a text count, stated as such), kernels extracted,
  MEPs written, MEPs complete (no todo), MEPs that build, originals that verify, exit codes, internal errors
  (exit 70 or a Python traceback) and time-outs.
Never copies the corpus into this repository: the corpus path is an argument, the work folder a temporary one.

    python3 bench/corpus_sweep.py --suite rodinia=/path/rodinia/cuda --suite hecbench=/path/HeCBench/src \
        [--sample 40] [--build] [--gpu] [--out bench/results/corpus_sweep] [--label before]
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import datetime
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SOURCES = (".cu", ".cuh")
GLOBAL = re.compile(r"__global__\s+(?:[\w:<>,\s\*&]+?)\b(\w+)\s*\(", re.S)


def app_roots(suite: Path) -> list[Path]:
    """Folders holding a build file and CUDA sources; the shallowest such folder of each subtree wins.
    HeCBench-style trees (`src/NAME-cuda`) keep only the CUDA programs."""
    found: list[Path] = []
    for d in sorted(p for p in suite.rglob("*") if p.is_dir()):
        rel = d.relative_to(suite)
        if len(rel.parts) > 3 or any(part.startswith(".") for part in rel.parts):
            continue
        if any(f == d or f in d.parents for f in found):
            continue
        if suite.name == "src" and not rel.parts[0].endswith("-cuda"):
            continue
        has_build = (d / "Makefile").exists() or (d / "CMakeLists.txt").exists() or (d / "makefile").exists()
        if has_build and any(p.suffix in SOURCES for p in d.rglob("*")):
            found.append(d)
    return found


def global_kernels(app: Path) -> set[str]:
    names = set()
    for p in app.rglob("*"):
        if p.suffix in SOURCES + (".h", ".hpp", ".cpp") and p.is_file():
            text = re.sub(r"//[^\n]*|/\*.*?\*/", "", p.read_text(errors="replace"), flags=re.S)
            names.update(m.group(1) for m in GLOBAL.finditer(text))
    return names


def run(cmd: list[str], cwd: Path, limit: float) -> tuple[int, str, str, float]:
    env = dict(os.environ)
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=limit, env=env)
        return p.returncode, p.stdout, p.stderr, time.monotonic() - t0
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        return -9, out, "timeout", time.monotonic() - t0


def internal(rc: int, err: str) -> bool:
    return rc == 70 or "Traceback (most recent call last)" in err


def sweep_app(app: Path, args) -> dict:
    mepgen = [sys.executable, "-m", "mepgen.cli"]
    rec: dict = {"app": str(app), "kernels_in_source": len(global_kernels(app))}
    rc, out, err, dt = run(mepgen + ["extract", "--json", str(app)], app, args.extract_limit)
    rec.update(extract_rc=rc, extract_s=round(dt, 1), extract_internal=internal(rc, err),
               extract_timeout=rc == -9, extract_err=err.strip().splitlines()[-1:] if rc else [])
    try:
        rec["kernels_extracted"] = json.loads(out)["kernels"] if rc == 0 else 0
    except (ValueError, KeyError):
        rec["kernels_extracted"] = 0
    rec.update(meps=0, complete=0, built=0, verified=0, mep_rc=None)
    if not rec["kernels_extracted"]:
        return rec
    rc, out, err, dt = run(mepgen + ["mep", "--all", "--json"], app, args.mep_limit)
    rec.update(mep_rc=rc, mep_s=round(dt, 1), mep_internal=internal(rc, err), mep_timeout=rc == -9,
               mep_err=err.strip().splitlines()[-1:] if rc not in (0, 3) else [])
    try:
        meps = json.loads(out) if out.strip() else []
    except ValueError:
        meps = []
    # `mep --all --json` also lists the kernels that got no MEP (outcome cannot / internal_error, with the reason)
    rec["no_mep"] = [{"kernel": m.get("kernel"), "outcome": m.get("outcome"), "reason": m.get("reason")}
                     for m in meps if "path" not in m]
    meps = [m for m in meps if "path" in m]
    rec["meps"] = len(meps)
    rec["complete"] = sum(1 for m in meps if not m.get("todo"))
    rec["todo_fields"] = [t["field"].split(".")[0] for m in meps for t in (m.get("todo") or [])]
    ready = [m for m in meps if not m.get("todo")]
    if args.build:
        for m in meps:
            brc, _, berr, _ = run(["make", "-s", "-C", m["path"]], app, args.build_limit)
            m["built"] = brc == 0
        rec["built"] = sum(1 for m in meps if m.get("built"))
        rec["built_complete"] = sum(1 for m in ready if m.get("built"))
    if args.gpu:
        for m in ready:
            grc, gout, gerr, _ = run(mepgen + ["run", m["kernel"]], app, args.run_limit)
            m["verified"] = grc == 0
            rec.setdefault("run_err", []).extend(gerr.strip().splitlines()[-1:] if grc else [])
        rec["verified"] = sum(1 for m in ready if m.get("verified"))
    return rec


def summarize(recs: list[dict]) -> dict:
    s = {k: sum(r.get(k, 0) or 0 for r in recs) for k in
         ("kernels_in_source", "kernels_extracted", "meps", "complete", "built", "built_complete", "verified")}
    s["apps"] = len(recs)
    s["apps_no_mep"] = sum(1 for r in recs if not r["meps"])
    s["apps_mep_error"] = sum(1 for r in recs if r.get("mep_rc") not in (None, 0, 3))
    s["internal_errors"] = sum(1 for r in recs if r.get("extract_internal") or r.get("mep_internal"))
    s["timeouts"] = sum(1 for r in recs if r.get("extract_timeout") or r.get("mep_timeout"))
    todo: dict[str, int] = {}
    for r in recs:
        for f in r.get("todo_fields", []):
            todo[f] = todo.get(f, 0) + 1
    s["todo_fields"] = dict(sorted(todo.items(), key=lambda kv: -kv[1]))
    return s


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suite", action="append", required=True, help="NAME=PATH (repeatable)")
    ap.add_argument("--sample", type=int, default=0, help="at most N applications per suite, evenly spaced")
    ap.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2) // 2))
    ap.add_argument("--build", action="store_true")
    ap.add_argument("--gpu", action="store_true")
    ap.add_argument("--extract-limit", type=float, default=180)
    ap.add_argument("--mep-limit", type=float, default=240)
    ap.add_argument("--build-limit", type=float, default=180)
    ap.add_argument("--run-limit", type=float, default=300)
    ap.add_argument("--label", default="")
    ap.add_argument("--out", type=Path, default=None, help="folder for corpus_sweep[-LABEL].json and .md")
    args = ap.parse_args()
    report = {"date": datetime.date.today().isoformat(), "label": args.label,
              "command": " ".join(sys.argv), "suites": {}}
    with tempfile.TemporaryDirectory(prefix="mepgen-sweep-") as tmp:
        for spec in args.suite:
            name, _, path = spec.partition("=")
            src = Path(path).resolve()
            roots = app_roots(src)
            if args.sample and len(roots) > args.sample:
                step = len(roots) / args.sample
                roots = [roots[int(i * step)] for i in range(args.sample)]
            work = Path(tmp) / name
            copies = []
            for r in roots:
                dst = work / r.relative_to(src)
                shutil.copytree(r, dst, ignore=shutil.ignore_patterns(".mepgen"))
                copies.append(dst)
            for shared in ("common", "include", "util"):          # folders applications include from
                for cand in (src / shared, src.parent / shared):
                    if cand.is_dir():
                        dst = (work / cand.relative_to(src)) if cand.is_relative_to(src) else work.parent / shared
                        if not dst.exists():
                            shutil.copytree(cand, dst)
            with cf.ThreadPoolExecutor(args.jobs) as pool:
                recs = list(pool.map(lambda a: sweep_app(a, args), copies))
            for r in recs:
                r["app"] = str(Path(r["app"]).relative_to(work))
                print(f"{name}/{r['app']}: {r['kernels_extracted']}/{r['kernels_in_source']} kernels, "
                      f"{r['complete']}/{r['meps']} complete, mep rc {r.get('mep_rc')}", file=sys.stderr)
            report["suites"][name] = {"apps": recs, "summary": summarize(recs)}
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        stem = "corpus_sweep" + (f"-{args.label}" if args.label else "")
        (args.out / f"{stem}.json").write_text(json.dumps(report, indent=1))
        (args.out / f"{stem}.md").write_text(markdown(report))
    print(markdown(report))
    return 0


def markdown(report: dict) -> str:
    lines = [f"# corpus sweep {report['label']} ({report['date']})", "", f"`{report['command']}`", "",
             "| suite | apps | kernels (source) | extracted | MEPs | complete | built | verified | apps w/o MEP "
             "| mep --all errors | internal errors | time-outs |", "|---|" + "---|" * 11]
    for name, s in report["suites"].items():
        m = s["summary"]
        lines.append(f"| {name} | {m['apps']} | {m['kernels_in_source']} | {m['kernels_extracted']} | {m['meps']} "
                     f"| {m['complete']} | {m['built']} | {m['verified']} | {m['apps_no_mep']} "
                     f"| {m['apps_mep_error']} | {m['internal_errors']} | {m['timeouts']} |")
    lines.append("")
    for name, s in report["suites"].items():
        lines.append(f"- {name} todo fields: {s['summary']['todo_fields']}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
