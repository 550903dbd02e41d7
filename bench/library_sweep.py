"""Which kernels of real applications get a structural rewrite from the library (no GPU needed).

    python bench/library_sweep.py prepare OUT APP_DIR...     # copy each app to OUT/apps/, extract, cut every MEP
    python bench/library_sweep.py plan OUT LABEL              # `optimize --dry-run` of every MEP -> OUT/LABEL.json
    python bench/library_sweep.py compare OUT BEFORE AFTER    # OUT/compare.md: rewrites offered per kernel
    python bench/library_sweep.py report OUT... LABEL          # per suite, per application, without the largest
                                                               # application, and the refusals of the commonest

`plan` runs the mepgen that `python -m mepgen` imports (set PYTHONPATH to compare two versions of the library on
the same MEPs). The apps are copied (mepgen writes .mepgen/ into an app's folder); nothing is written back.
Extra flags for `mepgen extract` (`-I include`): the environment variable MEPGEN_SWEEP_FLAGS.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

PLAN = """
import json, sys
from pathlib import Path
from mepgen.spec import load_spec
from mepgen.optimize.dry_run import plan
out = {}
for mep in sys.argv[1:]:
    mep = Path(mep)
    try:
        spec = load_spec(mep / "mep.yaml")
        p = plan(spec, (mep / "kernel.cu").read_text(errors="replace"))
        out[str(mep)] = {"todo": len(spec.todo), "candidates": [c["name"] for c in p.candidates],
                         "structural": p.structural, "refusals": p.refusals}
    except Exception as e:                      # a crash of the library is a result too
        out[str(mep)] = {"error": f"{type(e).__name__}: {e}"[:300]}
print(json.dumps(out))
"""


def prepare(out: Path, apps: list[Path]) -> None:
    flags = os.environ.get("MEPGEN_SWEEP_FLAGS", "").split()
    (out / "apps").mkdir(parents=True, exist_ok=True)
    log = []
    for app in apps:
        dest = out / "apps" / f"{app.parent.name}.{app.name}"
        if dest.exists():
            shutil.rmtree(dest)
        shutil.copytree(app, dest, ignore=shutil.ignore_patterns(".mepgen", "*.o", "*.tar", "*.tar.gz"))
        t0 = time.time()
        steps = [["extract", ".", *flags]]
        listed = None
        for s in steps:
            try:
                done = subprocess.run([sys.executable, "-m", "mepgen.cli", *s], cwd=dest, capture_output=True,
                                      text=True, timeout=180)
                rc, tail = done.returncode, (done.stdout + done.stderr).strip().splitlines()[-1:]
            except subprocess.TimeoutExpired:
                rc, tail = 124, ["timed out"]
            log.append({"app": dest.name, "step": s[0], "rc": rc, "tail": tail, "s": round(time.time() - t0, 1)})
            print(f"{dest.name:40} {s[0]:4} {s[-1][:24]:24} rc={rc} {tail[0][:100] if tail else ''}", flush=True)
            if rc not in (0, 3):        # 3: MEPs written with todo fields
                break
            if listed is None:          # one `mep` per kernel: a kernel mepgen cannot cut does not stop the rest
                done = subprocess.run([sys.executable, "-m", "mepgen.cli", "list", "--json"], cwd=dest,
                                      capture_output=True, text=True)
                listed = json.loads(done.stdout) if done.returncode == 0 else []
                steps += [["mep", k["id"]] for k in listed]
    (out / "prepare.json").write_text(json.dumps(log, indent=1))


def plan_all(out: Path, label: str) -> None:
    meps = sorted(str(p.parent) for p in (out / "apps").glob("*/.mepgen/meps/*/mep.yaml"))
    result = {}
    for i in range(0, len(meps), 20):
        # cwd: not a checkout of mepgen, so that the mepgen of PYTHONPATH (or the installed one) is imported
        done = subprocess.run([sys.executable, "-c", PLAN, *meps[i:i + 20]], capture_output=True, text=True,
                              timeout=1800, cwd=out)
        if done.returncode != 0:
            for m in meps[i:i + 20]:
                result[m] = {"error": done.stderr.strip().splitlines()[-1][:300] if done.stderr.strip() else "?"}
            continue
        result.update(json.loads(done.stdout))
    (out / f"{label}.json").write_text(json.dumps(result, indent=1))
    n = sum(1 for r in result.values() if r.get("structural"))
    print(f"{label}: {len(result)} MEPs, {n} with a structural rewrite")


def compare(out: Path, before: str, after: str) -> None:
    b = json.loads((out / f"{before}.json").read_text())
    a = json.loads((out / f"{after}.json").read_text())
    rows = ["| kernel | todo | structural before | structural after | all candidates after |", "|---|---|---|---|---|"]
    nb = na = 0
    for mep in sorted(set(a) | set(b)):
        rb, ra = b.get(mep, {}), a.get(mep, {})
        sb = ", ".join(rb.get("structural", [])) or ("crash: " + rb["error"][:60] if "error" in rb else "-")
        sa = ", ".join(ra.get("structural", [])) or ("crash: " + ra["error"][:60] if "error" in ra else "-")
        nb += bool(rb.get("structural"))
        na += bool(ra.get("structural"))
        name = "/".join(Path(mep).parts[-4::3])
        rows.append(f"| {name} | {ra.get('todo', '?')} | {sb} | {sa} | {len(ra.get('candidates', []))} |")
    crash_b = sum("error" in r for r in b.values())
    crash_a = sum("error" in r for r in a.values())
    head = [f"# library sweep: {len(a)} MEPs", "",
            f"kernels with a structural rewrite: {nb} ({before}) -> {na} ({after}); "
            f"library crashes: {crash_b} -> {crash_a}", ""] + per_suite(b, a, before, after) + [""]
    (out / "compare.md").write_text("\n".join(head + rows) + "\n")
    print("\n".join(head))


def suite(mep: str) -> str:
    """The suite of an MEP from its app folder's name (`src.heat-cuda` was copied from hecbench/src/...)."""
    app = Path(mep).parts[-4].split(".")[0]
    return {"src": "HeCBench", "cuda": "Rodinia"}.get(app, f"own ({app})")


def per_suite(b: dict, a: dict, before: str, after: str) -> list[str]:
    """Per suite: MEPs, those without todo items, and how many get a structural rewrite (names and counts only)."""
    rows = ["| suite | MEPs | without todo | structural " + before + " | structural " + after +
            " | without todo and structural " + after + " |", "|---|---|---|---|---|---|"]
    for name in sorted({suite(m) for m in set(a) | set(b)}):
        ms = [m for m in set(a) | set(b) if suite(m) == name]
        ready = [m for m in ms if a.get(m, {}).get("todo") == 0]
        rows.append(f"| {name} | {len(ms)} | {len(ready)} | {sum(bool(b.get(m, {}).get('structural')) for m in ms)} | "
                    f"{sum(bool(a.get(m, {}).get('structural')) for m in ms)} | "
                    f"{sum(bool(a.get(m, {}).get('structural')) for m in ready)} |")
    return rows


def app_of(mep: str) -> str:
    return Path(mep).parts[-4]


def report(results: dict, label: str, top: int = 6) -> str:
    """`results` (MEP -> plan row, every OUT's LABEL.json together) as markdown: per suite the MEPs with a structural
    rewrite, the same without the suite's application with the most MEPs, the mean over applications of the share
    of their MEPs, the applications with at least one; per application its counts; for the transformations that
    refuse most often, their commonest reasons (a reason's quoted code folded to `X`)."""
    import re
    from collections import Counter
    lines = [f"## {label}", "", "| suite | apps | MEPs | structural | without the largest app | mean share per app | "
             "apps with >= 1 |", "|---|---|---|---|---|---|---|"]
    per_app: dict = {}
    for m, r in results.items():
        per_app.setdefault((suite(m), app_of(m)), []).append(bool(r.get("structural")))
    for name in sorted({s for s, _ in per_app}) + ["all"]:
        apps = {a: v for (s, a), v in per_app.items() if name in ("all", s)}
        n, k = sum(len(v) for v in apps.values()), sum(sum(v) for v in apps.values())
        big = max(apps, key=lambda a: len(apps[a]))
        nb, kb = n - len(apps[big]), k - sum(apps[big])
        share = sum(sum(v) / len(v) for v in apps.values()) / len(apps)
        lines.append(f"| {name} | {len(apps)} | {n} | {k} ({100 * k / n:.1f} %) | {kb} of {nb} "
                     f"({100 * kb / max(nb, 1):.1f} %; without {big}) | {share:.2f} | "
                     f"{sum(1 for v in apps.values() if any(v))} |")
    lines += ["", "| application | MEPs | structural | rewrites offered (count) |", "|---|---|---|---|"]
    for (s, a), v in sorted(per_app.items()):
        names = Counter(n for m, r in results.items() if app_of(m) == a for n in r.get("structural", []))
        lines.append(f"| {a} | {len(v)} | {sum(v)} | {', '.join(f'{n} {c}' for n, c in names.most_common())} |")
    offered = Counter(n for r in results.values() for n in r.get("structural", []))
    lines += ["", "Why the structural rewrites offered most often refuse the other kernels (a reason's quoted code "
              "folded to `X`):", ""]
    for t, n in offered.most_common(top):
        why = Counter(re.sub(r"`[^`]*`", "X", r["refusals"][t])[:140] for r in results.values()
                      if t in r.get("refusals", {}))
        lines.append(f"- {t} (offered for {n}, refused for {sum(why.values())}): " +
                     "; ".join(f"{w} ({c})" for w, c in why.most_common(4)))
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        sys.exit(0 if sys.argv[1:2] in (["-h"], ["--help"]) else 2)
    cmd, out = sys.argv[1], Path(sys.argv[2])
    if cmd == "prepare":
        prepare(out, [Path(p).resolve() for p in sys.argv[3:]])
    elif cmd == "plan":
        plan_all(out, sys.argv[3])
    elif cmd == "report":
        merged = {}
        for o in sys.argv[2:-1]:
            merged.update(json.loads((Path(o) / f"{sys.argv[-1]}.json").read_text()))
        print(report(merged, sys.argv[-1]))
    elif cmd == "compare":
        compare(out, sys.argv[3], sys.argv[4])
    else:
        sys.exit(f"unknown command {cmd}: prepare | plan | compare | report")
