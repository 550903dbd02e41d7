#!/usr/bin/env python3
"""The whole path on public applications (issue 39): `mepgen tune` per application, on a GPU.

The list is capture_sweep.py's default list (15 applications of Rodinia and HeCBench, drawn for the capture sweep
of 2026-11-25, before any tune existed), every one of them. For each application, in a scratch copy (fetched code
never enters this repository):
1. build it as capture_sweep does (its own Makefile or nvcc line), write its compile_commands.json (so extract and
   the MEPs see its flags), `mepgen extract`;
2. `mepgen tune --build BUILD --check CHECK --runs R --time-limit T -- ./app ARGS`: capture, optimize every captured
   complete MEP, patch the wins, rebuild, check, time; HeCBench's check is its own output (no FAIL line; the
   programs print PASS/FAIL), Rodinia's programs have none: their exit code only;
3. `mepgen run` of every captured complete MEP on the native and on the pycuda backend: does it build and verify.
Applications run in parallel, one per GPU (CUDA_VISIBLE_DEVICES), so no two share a GPU, and their timed runs never
overlap; with --serial one at a time, each seeing every GPU (the numbers recorded are from --serial). Writes OUT/tune_sweep.json
and OUT/tune_sweep.md as each application finishes, and OUT/apps/NAME/ (report.json, report.md, logs tail).

    python3 bench/tune_sweep.py --rodinia PACK/rodinia --hecbench PACK/hecbench --out OUT [--apps a,b] \\
        [--time-limit 20] [--runs 3] [--gpus 0,1,2,3] [--max-bytes 16G] [--backends-only] [--keep --work DIR]

--backends-only replaces step 2 by the capture alone (`mepgen capture --all --use`): steps 1 and 3 in a few minutes
for the whole list, the check that every complete MEP builds and verifies on both backends.
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import datetime
import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from capture_sweep import APPS, DEFAULT, R_FLAGS, chosen_apps, compile_commands, sh  # noqa: E402

MEPGEN = [sys.executable, "-m", "mepgen.cli"]
CHECK = {"hecbench": '! grep -q FAIL "$MEPGEN_TUNE_LOG"', "rodinia": None}


def _json(text: str):
    for opener in ("{", "["):
        i = text.find(opener)
        if i >= 0:
            try:
                return json.loads(text[i:])
            except json.JSONDecodeError:
                continue
    return None


def backends(app: Path, ids: list[str], env) -> dict:
    out = {}
    for kid in ids:
        row = {}
        for b in ("native", "pycuda"):
            rc, so, se, dt = sh(MEPGEN + ["run", kid, "-C", str(app), "--backend", b, "--json"], app, 600, env)
            doc = _json(so) or {}
            base = (doc.get("baseline") or {})
            row[b] = {"exit": rc, "status": base.get("status"), "backend": base.get("backend"),
                      "seconds": round(dt, 1),
                      "why": None if rc == 0 else (se.strip().splitlines() or ["?"])[-1][:240]}
        out[kid] = row
    return out


def one_app(name: str, roots: dict, work: Path, arch: str, gpu: str, a, env) -> dict:
    suite, folder, build, exe, args, xflags, why = APPS[name]
    env = {**env, "CUDA_VISIBLE_DEVICES": gpu}
    row = {"app": name, "suite": suite, "gpu": gpu}
    src = Path(roots[suite]) / folder
    app = work / f"{suite}-{name}"
    shutil.rmtree(app, ignore_errors=True)       # a --work used before: a fresh copy
    shutil.copytree(src, app, symlinks=True)
    cmd = build.format(arch=arch, flags=R_FLAGS)
    rc, out, err, dt = sh(cmd, app, 600, env)
    if rc:
        row["error"] = "build failed: " + (err or out).strip()[-300:]
        return row
    (app / "compile_commands.json").write_text(json.dumps(compile_commands(app, build, arch, env), indent=1))
    rc, out, err, dt = sh(MEPGEN + ["extract", ".", *xflags], app, 600, env)
    if rc:
        row["error"] = "extract failed: " + (err or out).strip()[-300:]
        return row
    if a.backends_only:
        return _backends_only(row, app, exe, args, a, env)
    check = CHECK[suite]
    tune = MEPGEN + ["tune", "-C", str(app), "--build", cmd, "--runs", str(a.runs), "--time-limit", str(a.time_limit),
                     "--timeout", "300", "--json", *(["--check", check] if check else []),
                     *(["--max-bytes", a.max_bytes] if a.max_bytes else []), "--", exe, *args]
    t0 = time.perf_counter()
    rc, out, err, dt = sh(tune, app, a.app_timeout, env)
    row.update(tune_exit=rc, tune_s=round(dt, 1), command=" ".join(tune[2:]))
    rep = _json(out)
    dest = a.out / "apps" / name
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "tune.stderr.txt").write_text(err[-20000:])
    tfolder = app / ".mepgen" / "tune"
    for f in ("report.json", "report.md"):
        if (tfolder / f).is_file():
            shutil.copy(tfolder / f, dest / f)
    if rep is None and (tfolder / "report.json").is_file():
        rep = json.loads((tfolder / "report.json").read_text())
    row["report"] = rep
    if rep is None:
        row["error"] = f"tune exit {rc}: " + err.strip()[-400:]
        return row
    ids = [k["id"] for k in rep.get("kernels", []) if k.get("capture") == "captured" and k.get("mep_complete")]
    row["backends"] = backends(app, ids, env) if not a.no_backends else {}
    if not a.keep:
        shutil.rmtree(app, ignore_errors=True)
    return row


def _backends_only(row: dict, app: Path, exe: str, args: list, a, env) -> dict:
    """--backends-only: the capture tune starts with (`capture --all --use`), then `mepgen run` of every complete
    MEP on both backends; no optimize, no patch, no timed runs of the application."""
    cap = MEPGEN + ["capture", "--all", "--use", "-C", str(app), "--json", "--timeout", "300",
                    *(["--max-bytes", a.max_bytes] if a.max_bytes else []), "--", exe, *args]
    rc, out, err, dt = sh(cap, app, a.app_timeout, env)
    row.update(capture_exit=rc, capture_s=round(dt, 1), command=" ".join(cap[2:]))
    doc = _json(out)
    outcomes = doc if isinstance(doc, list) else None       # capture --json: one outcome per kernel
    if outcomes is None:
        row["error"] = f"capture exit {rc}: " + (err or out).strip()[-400:]
        return row
    kernels = [{"id": Path(o["mep"]).name if o.get("mep") else o.get("kernel"), "kernel": o.get("kernel"),
                "capture": o.get("outcome"), "mep_complete": bool(o.get("complete")),
                "launch_configs": [c for c in ((o.get("app_gpu") or {}).get("configs") or []) if "grid" in c],
                **({"reason": o["reason"]} if o.get("reason") else {})} for o in outcomes]
    row["report"] = {"kernels": kernels, "outcome": "backends only: captured, no optimize"}
    ids = [k["id"] for k in kernels if k["capture"] == "captured" and k["mep_complete"]]
    row["backends"] = backends(app, ids, env) if not getattr(a, "no_backends", False) else {}   # capture only
    if not a.keep:
        shutil.rmtree(app, ignore_errors=True)
    return row


def summarize(rows: list[dict]) -> dict:
    ks = [k for r in rows for k in ((r.get("report") or {}).get("kernels") or [])]
    be = [v for r in rows for v in (r.get("backends") or {}).values()]
    return {
        "apps": len(rows), "apps_tuned": sum(1 for r in rows if r.get("report") and r.get("tune_exit") in (0, 3)),
        "kernels_launched": sum(1 for k in ks if k.get("capture") in ("captured", "refused")),
        "captured": sum(1 for k in ks if k.get("capture") == "captured"),
        "complete": sum(1 for k in ks if k.get("mep_complete")),
        "build_native": sum(1 for v in be if v["native"]["exit"] in (0, 1)),
        "build_pycuda": sum(1 for v in be if v["pycuda"]["exit"] in (0, 1)),
        # the pycuda backend refuses some MEPs by design (captured device pointers): `auto` then takes native and
        # says so; counted apart from MEPs that fail to build
        "pycuda_unsupported": sum(1 for v in be if v["pycuda"]["exit"] == 2 and "unsupported by the pycuda backend"
                                  in (v["pycuda"]["why"] or "")),
        "fail_both": sum(1 for v in be if v["native"]["exit"] not in (0, 1) and v["pycuda"]["exit"] not in (0, 1)),
        "verify_both": sum(1 for v in be if v["native"]["exit"] == 0 and v["pycuda"]["exit"] == 0),
        "optimized": sum(1 for k in ks if k.get("optimize") == "done"),
        "refused_fidelity": sum(1 for k in ks if k.get("optimize") == "fidelity"),
        "forced": sum(1 for k in ks if k.get("forced")),
        "patched_kept": sum(len((r.get("report") or {}).get("kept") or []) for r in rows),
        "checks_passed": sum(1 for r in rows if (r.get("report") or {}).get("check_passed")),
        # captured kernels the application launched with several configurations (the MEP verifies one)
        "several_configs": sum(1 for k in ks if len(k.get("launch_configs") or []) > 1),
    }


def _f(v, p):
    return "-" if v is None else p.format(v)


def table(rows: list[dict], meta: dict) -> str:
    s = meta["summary"]
    lines = [f"# mepgen tune on public applications ({meta['date']}, {meta['gpu']})", "",
             f"Command: `{meta['command']}`", "",
             f"Applications: {s['apps']} (tuned to the end: {s['apps_tuned']}); kernels launched {s['kernels_launched']}, "
             f"captured {s['captured']}, complete MEPs {s['complete']}; `mepgen run` of the complete MEPs: native "
             f"builds {s['build_native']}, pycuda builds {s['build_pycuda']} (refuses {s['pycuda_unsupported']} by design: "
             f"captured device pointers, auto takes native), verified on both {s['verify_both']}, on neither "
             f"{s['fail_both']}; "
             f"optimized {s['optimized']}, refused by the fidelity guard {s['refused_fidelity']} (forced: {s['forced']}); "
             f"patches kept {s['patched_kept']}; application checks passing {s['checks_passed']}; captured kernels "
             f"launched with several configurations {s.get('several_configs', 0)}.", "",
             "| app | kernels captured/complete | build both | fidelity ratios | MEP wins | patches kept | app before s | app after s | app speedup | kernels' GPU ms before / after | check | outcome |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        rep = r.get("report") or {}
        ks = rep.get("kernels") or []
        cap = sum(1 for k in ks if k.get("capture") == "captured")
        comp = sum(1 for k in ks if k.get("mep_complete"))
        be = r.get("backends") or {}
        both = sum(1 for v in be.values() if v["native"]["exit"] in (0, 1) and v["pycuda"]["exit"] in (0, 1))
        ratios = ", ".join(f"{k['fidelity_ratio']:.2f}" for k in ks if k.get("fidelity_ratio") is not None) or "-"
        wins = ", ".join(f"{k['mep_speedup']:.2f}x" for k in ks if k.get("mep_speedup")) or "-"
        b, af = rep.get("before") or {}, rep.get("after") or {}
        outcome = r.get("error") or rep.get("outcome") or ""
        lines.append(f"| {r['app']} | {cap}/{comp} | {both}/{len(be)} | {ratios} | {wins} | {len(rep.get('kept') or [])} | "
                     f"{_f(b.get('median_s'), '{:.3f}')} | {_f(af.get('median_s'), '{:.3f}')} | "
                     f"{_f(rep.get('app_speedup'), '{:.3f}x')} | {_f(rep.get('app_gpu_ms_before'), '{:.4g}')} / "
                     f"{_f(rep.get('app_gpu_ms_after'), '{:.4g}')} | {rep.get('check_passed')} | "
                     f"{str(outcome).replace('|', '/')[:160]} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rodinia", required=True)
    ap.add_argument("--hecbench", required=True)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--apps", default=",".join(DEFAULT))
    ap.add_argument("--apps-file", type=Path, default=None,
                    help="a JSON list of applications to add (bench/apps_sample_e.json); --apps defaults to them")
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--time-limit", type=float, default=20)
    ap.add_argument("--max-bytes", default=None, help="tune's (capture's) limit on one launch's data, e.g. 16G "
                                                      "(perlin's launch reaches 8.5 GB; the default is 4G)")
    ap.add_argument("--app-timeout", type=float, default=1500)
    ap.add_argument("--gpus", default=None, help="GPU indices to spread the applications over (default: all)")
    ap.add_argument("--serial", action="store_true",
                    help="one application at a time, every GPU visible to it (its optimize batch spreads over them): "
                         "nothing else runs while an application is timed")
    ap.add_argument("--no-backends", action="store_true",
                    help="no `mepgen run` of the MEPs on both backends (with --backends-only: the capture alone)")
    ap.add_argument("--backends-only", action="store_true",
                    help="capture (as tune does) and `mepgen run` every complete MEP on both backends; no optimize, "
                         "no patch, no timed runs: the check of issue 39's both-backends rate in a few minutes")
    ap.add_argument("--keep", action="store_true", help="keep each application's copy (with its .mepgen/)")
    ap.add_argument("--work", type=Path, default=None,
                    help="where the applications are copied (default: a new temporary folder); with --keep, where "
                         "their captured MEPs stay (bench/evaluator_rate_captured.sh reads them there)")
    a = ap.parse_args()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    names = chosen_apps(a.apps, a.apps_file)
    if names is None:
        return 2
    a.out.mkdir(parents=True, exist_ok=True)
    # applications run side by side (one per GPU), but never time their runs at the same moment
    env["MEPGEN_TUNE_TIMING_LOCK"] = str(Path(tempfile.gettempdir()) / f"tune-sweep-{os.getpid()}.lock")
    roots = {"rodinia": a.rodinia, "hecbench": a.hecbench}
    smi = shutil.which("nvidia-smi")
    listed = subprocess.run([smi, "--query-gpu=index,name,driver_version", "--format=csv,noheader"],
                            capture_output=True, text=True).stdout.strip().splitlines() if smi else []
    gpus = a.gpus.split(",") if a.gpus else [l.split(",")[0].strip() for l in listed] or ["0"]
    if a.serial:
        gpus = [",".join(gpus)]
    work = a.work.resolve() if a.work else Path(tempfile.mkdtemp(prefix="tune-sweep-"))
    work.mkdir(parents=True, exist_ok=True)
    a.out.mkdir(parents=True, exist_ok=True)
    meta = {"date": datetime.date.today().isoformat(), "gpu": listed[0].split(",", 1)[1].strip() if listed else "?",
            "gpus": len(gpus), "command": " ".join(sys.argv), "time_limit_s": a.time_limit, "runs": a.runs}
    free: queue.Queue = queue.Queue()
    for g in gpus:
        free.put(g)
    rows: list[dict] = []
    lock = threading.Lock()
    t0 = time.perf_counter()

    def job(name):
        g = free.get()
        try:
            r = one_app(name, roots, work, a.arch, g, a, env)
        except Exception as e:     # one application's failure must not cost the others
            r = {"app": name, "error": f"{type(e).__name__}: {e}"}
        finally:
            free.put(g)
        with lock:
            rows.append(r)
            order = [x for n in names for x in rows if x["app"] == n]
            meta["summary"] = summarize(order)
            meta["wall_s"] = round(time.perf_counter() - t0, 1)
            (a.out / "tune_sweep.json").write_text(json.dumps({"meta": meta, "apps": order}, indent=1) + "\n")
            (a.out / "tune_sweep.md").write_text(table(order, meta))
        print(f"[{time.perf_counter() - t0:.0f} s] {name}: {r.get('error') or (r.get('report') or {}).get('outcome')}",
              flush=True)

    with cf.ThreadPoolExecutor(max_workers=len(gpus)) as pool:
        list(pool.map(job, names))
    print((a.out / "tune_sweep.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
