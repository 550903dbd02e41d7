"""Benchmark: mepgen as a new user runs it on public applications nobody here wrote, rates per suite.

For every application of a suite (a folder holding a Makefile/CMakeLists.txt and CUDA sources), in a copy of
the suite's tree: `mepgen ready --json -C APP` (extraction, then every kernel's MEP with its own outcome:
ready / needs a person / cannot; under one time limit), and optionally builds every MEP (`--build`: `make -C MEP`, nvcc) or runs the original through the evaluator
(`--gpu`: `mepgen run ID`). Records per application and per suite:
  kernels seen in the sources (`__global__` definitions, a text count, stated as such), kernels extracted,
  MEPs written, MEPs complete (ready: no todo), kernels that cannot have one (with why), files not understood,
  MEPs that build, originals that verify, internal errors (exit 70, a traceback, or a kernel whose outcome
  is an internal error) and time-outs.

The issue's goal is static completion for "programs whose kernels take arrays of numbers and sizes from macros
or main constants". Each kernel with an MEP is classified from its todos' `kind` (`ready --json`, defined in
mepgen/todokind.py): out of scope when a todo is of kind `file` (data the application reads: a file
argument, fread/fscanf...), `runtime` (rand(), time(), a matrix's nonzeros) or `capture` (a struct of device
pointers, a non-numeric element type); in scope otherwise, complete or not (a command-line value mepgen took
from the application's run command is no todo at all; one it could not is `argv`, in scope). Reported per
suite: complete / in-scope kernels, next to complete / MEPs overall, and complete / (in-scope + kernels that
got no MEP because mepgen could not read them: no launch site, a count it made negative, a budget; texture
and surface objects excepted), the stricter rate. The classification reads the reasons'
words only: a value mepgen could not trace at all (say, a size read from a file in a function it does not
follow: "gets no traceable value from its callers") counts in scope, so the in-scope rate is a lower bound.
Never copies the corpus into this repository: the corpus path is an argument, the work folder a temporary one.

    python3 bench/corpus_sweep.py --suite rodinia=/path/rodinia/cuda --suite hecbench=/path/HeCBench/src \
        [--sample 40] [--build] [--gpu] [--out bench/results/corpus_sweep] [--label before] [--scrub]
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from mepgen.todokind import in_scope, todo_kind  # noqa: E402

SOURCES = (".cu", ".cuh")
_UNSUPPORTED = re.compile(r"texture or surface")
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


def _texts(app: Path):
    for p in app.rglob("*"):
        if p.suffix in SOURCES + (".h", ".hpp", ".cpp", ".c", ".cc") and p.is_file():
            yield re.sub(r"//[^\n]*|/\*.*?\*/", "", p.read_text(errors="replace"), flags=re.S)


def global_kernels(app: Path) -> set[str]:
    names = set()
    for text in _texts(app):
        names.update(m.group(1) for m in GLOBAL.finditer(text))
    return names


def launched_in_text(app: Path, kernel: str) -> bool:
    """Whether any source of the application (comments dropped) launches the kernel by name: `k<<<`, `k<T><<<`,
    `k << <`, or through a launch API or a pointer (the name anywhere but its definition counts)."""
    name = re.escape(kernel.split("::")[-1])
    for text in _texts(app):
        for m in re.finditer(rf"\b{name}\b", text):
            if not re.search(r"__global__[^;{]*$", text[max(0, m.start() - 300):m.start()]):
                return True
    return False


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
    """`mepgen ready --json` on the application (extraction and every kernel's MEP in one command, each
    kernel with its own outcome), then optionally build the MEPs and run the complete ones."""
    mepgen = [sys.executable, "-m", "mepgen.cli"]
    rec: dict = {"app": str(app), "kernels_in_source": len(global_kernels(app))}
    rc, out, err, dt = run(mepgen + ["ready", "--json", "-C", str(app)], app, args.extract_limit + args.mep_limit)
    try:
        report = json.loads(out) if out.strip() else None
    except ValueError:
        report = None
    rec.update(ready_rc=rc, ready_s=round(dt, 1), timeout=rc == -9,
               internal=internal(rc, err) or bool(report and report["summary"]["internal_errors"]),
               error=err.strip().splitlines()[-1:] if report is None else [])
    kernels = report["kernels"] if report else []
    rec["kernels_extracted"] = len(kernels)
    rec["meps"] = sum(1 for k in kernels if k["mep"])
    rec["complete"] = sum(1 for k in kernels if k["outcome"] == "ready")
    rec["cannot"] = sum(1 for k in kernels if k["outcome"] == "cannot")
    rec["cannot_reasons"] = [f"{k['kernel']}: {k['reason']}"[:200] for k in kernels if k["outcome"] == "cannot"]
    rec["files_not_understood"] = [f"{f['file']}: {f['first']}"[:200] for f in (report or {}).get("files_not_understood", [])]
    rec["todo_fields"] = [t["field"].split(".")[0] for k in kernels for t in k["todo"]]
    kinds = lambda k: [t.get("kind") or todo_kind(t["field"], t["reason"]) for t in k["todo"]]   # older reports
    rec["todo_kinds"] = [x for k in kernels for x in kinds(k)]
    scoped = [k for k in kernels if k["mep"] and in_scope(kinds(k))]
    rec["in_scope"] = len(scoped)
    rec["in_scope_complete"] = sum(1 for k in scoped if k["outcome"] == "ready")
    # a kernel that gets no MEP because mepgen could not read it (no launch site, a count it made negative, a
    # budget) is one static completion missed, not one outside its scope (texture and surface objects are not
    # supported); a kernel no source launches (dead code, a launch left in a comment) is no hotspot at all
    rec["in_scope_no_mep"] = sum(1 for k in kernels if k["outcome"] == "cannot" and not k["mep"]
                                 and not _UNSUPPORTED.search(k.get("reason") or "")
                                 and ("none in the sources" not in (k.get("reason") or "")
                                      or launched_in_text(app, k["kernel"])))
    rec.update(built=0, verified=0)
    written = [k for k in kernels if k["mep"]]
    ready = [k for k in kernels if k["outcome"] == "ready"]
    if args.build:
        for k in written:
            brc, _, berr, _ = run(["make", "-s", "-C", k["mep"]], app, args.build_limit)
            k["built"] = brc == 0
        rec["built"] = sum(1 for k in written if k.get("built"))
        rec["built_complete"] = sum(1 for k in ready if k.get("built"))
    if args.gpu:
        for k in ready:
            grc, gout, gerr, _ = run(mepgen + ["run", k["id"]], app, args.run_limit)
            k["verified"] = grc == 0
            rec.setdefault("run_err", []).extend(gerr.strip().splitlines()[-1:] if grc else [])
        rec["verified"] = sum(1 for k in ready if k.get("verified"))
    if args.build or args.gpu:
        # the copy's MEPs (inputs, references, builds) are counted: on a 64 GiB machine 136 MEPs' data filled
        # the disk mid-sweep
        shutil.rmtree(app / ".mepgen", ignore_errors=True)
    return rec


#: an app record's fields whose texts can quote the application's code (parse errors, reasons, run errors)
QUOTING = ("error", "cannot_reasons", "files_not_understood", "run_err")


def scrubbed(report: dict) -> dict:
    """The report with every text that may quote the corpus's code replaced by a count, and paths by their role:
    what may be committed (fetched code never is, not even in an error message)."""
    out = json.loads(json.dumps(report))
    out["command"] = re.sub(r"--suite (\w+)=\S+", r"--suite \1=CORPUS/\1", out.get("command", ""))
    out["command"] = re.sub(r"--out \S+", "--out OUT", out["command"])
    for suite in out.get("suites", {}).values():
        for rec in suite.get("apps", []):
            for key in QUOTING:
                if rec.get(key):
                    n = len(rec[key]) if isinstance(rec[key], list) else 1
                    rec[key] = f"(left out: quotes the fetched code; {n} item(s))"
    return out


def summarize(recs: list[dict]) -> dict:
    s = {k: sum(r.get(k, 0) or 0 for r in recs) for k in
         ("kernels_in_source", "kernels_extracted", "meps", "complete", "built", "built_complete", "verified",
          "in_scope", "in_scope_complete", "in_scope_no_mep")}
    s["apps"] = len(recs)
    s["apps_no_mep"] = sum(1 for r in recs if not r["meps"])
    s["apps_mep_error"] = sum(1 for r in recs if r.get("cannot"))
    s["kernels_cannot"] = sum(r.get("cannot", 0) for r in recs)
    s["internal_errors"] = sum(1 for r in recs if r.get("internal"))
    s["timeouts"] = sum(1 for r in recs if r.get("timeout"))
    todo: dict[str, int] = {}
    for r in recs:
        for f in r.get("todo_fields", []):
            todo[f] = todo.get(f, 0) + 1
    s["todo_fields"] = dict(sorted(todo.items(), key=lambda kv: -kv[1]))
    kinds: dict[str, int] = {}
    for r in recs:
        for k in r.get("todo_kinds", []):
            kinds[k] = kinds.get(k, 0) + 1
    s["todo_kinds"] = dict(sorted(kinds.items(), key=lambda kv: -kv[1]))
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
    ap.add_argument("--scrub", action="store_true",
                    help="write the JSON record without texts that may quote the corpus (a record to commit)")
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
            partial = None
            if args.out:                       # one line per app as it ends: a sweep cut short keeps what it did
                args.out.mkdir(parents=True, exist_ok=True)
                partial = args.out / f"corpus_sweep-{args.label or 'run'}-{name}.partial.jsonl"
                partial.write_text("")
            with cf.ThreadPoolExecutor(args.jobs) as pool:
                futures = {pool.submit(sweep_app, a, args): a for a in copies}
                for fut in cf.as_completed(futures):
                    if partial is not None:
                        with open(partial, "a") as fh:
                            fh.write(json.dumps(dict(fut.result(), app=futures[fut].name)) + "\n")
                recs = [f.result() for f in futures]
            for r in recs:
                r["app"] = str(Path(r["app"]).relative_to(work))
                print(f"{name}/{r['app']}: {r['kernels_extracted']}/{r['kernels_in_source']} kernels, "
                      f"{r['complete']}/{r['meps']} complete, {r['in_scope_complete']}/{r['in_scope']} in scope, "
                      f"{r.get('cannot', 0)} cannot, ready rc {r.get('ready_rc')}",
                      file=sys.stderr)
            report["suites"][name] = {"apps": recs, "summary": summarize(recs)}
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        stem = "corpus_sweep" + (f"-{args.label}" if args.label else "")
        (args.out / f"{stem}.json").write_text(json.dumps(scrubbed(report) if args.scrub else report, indent=1))
        (args.out / f"{stem}.md").write_text(markdown(report))
    print(markdown(report))
    return 0


def rate(part: int, whole: int) -> str:
    return f"{100 * part / whole:.0f} %" if whole else "-"


def markdown(report: dict) -> str:
    lines = [f"# corpus sweep {report['label']} ({report['date']})", "", f"`{report['command']}`", "",
             "| suite | apps | kernels (source) | extracted | MEPs | complete | complete / in-scope | in scope, no MEP "
             "| complete / (in-scope + no MEP) | built | verified "
             "| apps w/o MEP | apps with a kernel that cannot | internal errors | time-outs |", "|---|" + "---|" * 14]
    for name, s in report["suites"].items():
        m = s["summary"]
        scoped = (m.get("in_scope_complete", 0), m.get("in_scope", 0))
        lines.append(f"| {name} | {m['apps']} | {m['kernels_in_source']} | {m['kernels_extracted']} | {m['meps']} "
                     f"| {m['complete']} ({rate(m['complete'], m['meps'])}) "
                     f"| {scoped[0]}/{scoped[1]} ({rate(*scoped)}) | {m.get('in_scope_no_mep', 0)} "
                     f"| {scoped[0]}/{scoped[1] + m.get('in_scope_no_mep', 0)} "
                     f"({rate(scoped[0], scoped[1] + m.get('in_scope_no_mep', 0))}) "
                     f"| {m['built']} | {m['verified']} | {m['apps_no_mep']} "
                     f"| {m['apps_mep_error']} | {m['internal_errors']} | {m['timeouts']} |")
    lines.append("")
    for name, s in report["suites"].items():
        lines.append(f"- {name} todo fields: {s['summary']['todo_fields']}")
        lines.append(f"- {name} todo kinds (mepgen/todokind.py): {s['summary'].get('todo_kinds', {})}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
