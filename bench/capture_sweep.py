#!/usr/bin/env python3
"""One capture run per application completes its kernels' MEPs? (issue 21) — on public suites, on a GPU.

For each application of the list below (fetched public code: Rodinia CUDA and HeCBench; nothing of it is copied
into this repository — it is copied from the corpus paths given on the command line into a scratch folder):
1. build it as its authors do (HeCBench: its Makefile with `ARCH=` on the command line; Rodinia: the nvcc line of
   its Makefile, whose `../../common/make.config` the snapshot lacks), CUDA 13 needing only
   `-DcudaThreadSynchronize=cudaDeviceSynchronize` for Rodinia's removed call;
2. `mepgen extract .`, then ONE run: `mepgen capture --all --use --json -- ./app ARGS` (every kernel, launch 0);
3. per kernel: the outcome (captured / refused / not launched, with the reason), whether the MEP is complete (no
   todo), whether it builds, whether it reproduces the application's output for that launch (the MEP run on the
   captured inputs, every output it writes compared with the captured "after" state: bit-exact, else within the
   MEP's float tolerance), and `mepgen run` (build, verify, time): its status and median time next to the kernel
   time the capture measured in the application (CUDA events around that launch; a rough fidelity figure, not
   Nsight Compute's); with --ncu, Nsight Compute times both (the kernel's first launch in the application, the
   median of 5 in the MEP, `--clock-control none --cache-control all`).
Writes OUT/capture_sweep.json and OUT/capture_sweep.md.

    python3 bench/capture_sweep.py --rodinia /work/corpus/rodinia/cuda --hecbench /work/corpus/hecbench/src \\
        --out bench/results/capture_sweep [--apps bonds,lud] [--arch sm_90] [--jobs 8]
    # a GPU machine without the corpus: pack the listed applications' folders first, carry them, point at them
    python3 bench/capture_sweep.py --rodinia ... --hecbench ... --out x --pack /tmp/corpus-pack
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
MEPGEN = [sys.executable, "-m", "mepgen.cli"]
R_FLAGS = "-O3 -DcudaThreadSynchronize=cudaDeviceSynchronize"

# name: suite, folder in the suite, build (shell, {arch}), program, arguments, extract flags, why it is here
APPS = {
    # HeCBench: structs passed by value that hold device pointers, byte-sized argument blocks
    "hadamard": ("hecbench", "hadamard-cuda", "make -s ARCH={arch}", "./main", ["1024", "2"], [],
                 "struct argument holding the input and output device pointers (void*)"),
    "bonds": ("hecbench", "bonds-cuda", "make -s ARCH={arch}", "./main", ["2"], [],
              "structs of device pointers passed by value (inArgsStruct, resultsStruct)"),
    "pitch": ("hecbench", "pitch-cuda", "make -s ARCH={arch}", "./main", ["2"], [],
              "cudaPitchedPtr by value: a device pointer inside a runtime struct, pitched allocation"),
    "kernelLaunch": ("hecbench", "kernelLaunch-cuda", "make -s ARCH={arch}", "./main", ["4"], [],
                     "argument structs of 16 B to 4 KiB passed by value"),
    "lavaMD": ("hecbench", "lavaMD-cuda", "make -s ARCH={arch}", "./main", ["-boxes1d", "8"], [],
               "parameter structs by value, arrays of records"),
    "car": ("hecbench", "car-cuda", "make -s ARCH={arch}", "./main", ["2"], [], "a params struct by value"),
    "dpid": ("hecbench", "dpid-cuda", "make -s ARCH={arch}", "./main", ["640", "480", "0.5", "2"], [],
             "a Params struct by value, image buffers of records"),
    "aobench": ("hecbench", "aobench-cuda", "make -s ARCH={arch}", "./main", ["2"], [], "structs (Plane) by value"),
    "minisweep": ("hecbench", "minisweep-cuda", "make -s ARCH={arch}", "./main", ["--niterations", "1"], [],
                  "Dimensions/StepInfoAll structs by value, many kernels"),
    "d3q19-bgk": ("hecbench", "d3q19-bgk-cuda", "make -s ARCH={arch}", "./main", ["32"], [],
                  "BoxCU and lbm_vars structs by value"),
    "particles": ("hecbench", "particles-cuda", "make -s ARCH={arch}", "./main", ["2"], [],
                  "a simParams_t struct by value, many kernels (sorting, hashing, collisions)"),
    "perlin": ("hecbench", "perlin-cuda", "make -s ARCH={arch}", "./main", [], [], "a NoiseParams struct by value"),
    # Rodinia
    "pathfinder": ("rodinia", "pathfinder", "nvcc {flags} -arch={arch} pathfinder.cu -o pathfinder", "./pathfinder",
                   ["10000", "100", "20"], [], "dynamic programming, shared memory"),
    "nw": ("rodinia", "nw", "nvcc {flags} -arch={arch} needle.cu -o needle", "./needle", ["512", "10"], [],
           "two kernels launched in diagonal sweeps"),
    "backprop": ("rodinia", "backprop", "nvcc {flags} -arch={arch} backprop_cuda.cu backprop.c facetrain.c imagenet.c "
                 "-o backprop -lm", "./backprop", ["65536"], [], "C host code, two kernels"),
    "lud": ("rodinia", "lud", "cd cuda && nvcc {flags} -arch={arch} -I../common lud.cu lud_kernel.cu "
            "../common/common.c -o lud_cuda", "cuda/lud_cuda", ["-s", "256"], ["-I", "common"],
            "three kernels of a blocked LU decomposition"),
    "particlefilter": ("rodinia", "particlefilter", "nvcc {flags} -arch={arch} ex_particle_CUDA_float_seq.cu "
                       "-o particlefilter_float -lm", "./particlefilter_float",
                       ["-x", "64", "-y", "64", "-z", "4", "-np", "1000"], [], "several kernels, data-dependent"),
    "srad_v2": ("rodinia", "srad/srad_v2", "nvcc {flags} -arch={arch} srad.cu -o srad", "./srad",
                ["512", "512", "0", "127", "0", "127", "0.5", "1"], [], "two stencil kernels"),
}


# left out of the default list: mepgen extract skips their kernels today (hadamard: the shim's __nv_bfloat16
# conversions are ambiguous in its utils.h; pitch: the shim does not declare cudaPitchedPtr)
# car: its CPU reference alone runs for minutes
DEFAULT = [n for n in APPS if n not in ("hadamard", "pitch", "car")]


def add_apps(path: Path | None) -> list[str]:
    """Applications listed in a JSON file (`{"apps": {NAME: [suite, folder, build, exe, args, extract flags, why]}}`,
    a list drawn elsewhere, e.g. bench/apps_sample_e.json) added to APPS, with its "spare" ones; the names of "apps" in
    the file's order."""
    if path is None:
        return []
    doc = json.loads(Path(path).read_text())
    apps = doc.get("apps") if isinstance(doc, dict) else None
    if not isinstance(apps, dict) or not apps:
        raise SystemExit(f"{path}: no \"apps\" object of NAME: [suite, folder, build, exe, args, flags, why]")
    for name, entry in {**apps, **(doc.get("spare") or {})}.items():     # spares: known to --apps, not listed
        if not (isinstance(entry, list) and len(entry) == 7 and entry[0] in ("rodinia", "hecbench")
                and all(isinstance(x, str) for x in entry[1:4]) and isinstance(entry[4], list)):
            raise SystemExit(f"{path}: {name}: not [suite, folder, build, exe, args, flags, why]")
        APPS[name] = tuple(entry)
    return list(apps)


def chosen_apps(apps_arg: str, apps_file: Path | None) -> list[str] | None:
    """The applications to run: --apps, or the file's list when --apps is left at its default; None (after saying
    which on stderr) when one is unknown."""
    added = add_apps(apps_file)
    names = [n for n in (apps_arg.split(",") if apps_arg != ",".join(DEFAULT) or not added else added) if n]
    unknown = [n for n in names if n not in APPS]
    if unknown:
        print(f"unknown app(s): {', '.join(unknown)}; known: {', '.join(APPS)}", file=sys.stderr)
        return None
    return names


def sh(cmd, cwd, timeout, env=None):
    t0 = time.perf_counter()
    try:
        r = subprocess.run(cmd, cwd=cwd, shell=isinstance(cmd, str), capture_output=True, text=True,
                           timeout=timeout, env=env)
        return r.returncode, r.stdout, r.stderr, time.perf_counter() - t0
    except subprocess.TimeoutExpired as e:     # what it printed until then stays: the record of a cut run
        text = lambda b: b.decode(errors="replace") if isinstance(b, bytes) else (b or "")
        return 124, text(e.stdout), text(e.stderr) + f"\ntimed out after {timeout} s", time.perf_counter() - t0


def _json_tail(text: str):
    i = text.find("[")
    return json.loads(text[i:]) if i >= 0 else None


def compile_commands(app: Path, build: str, arch: str, env) -> list[dict]:
    """compile_commands.json of the application's own build, so extract (and the MEPs) see its flags
    (`-O3 -use_fast_math`: aobench's MEP, built without fast math, differed in 9 of its 196608 output bytes):
    a Makefile's commands from `make -n -B` (nothing rebuilt), else the nvcc line of APPS, one entry per .cu file."""
    import shlex
    cmd = build.format(arch=arch, flags=R_FLAGS)
    lines = sh(cmd.replace("make -s", "make -n -B", 1), app, 120, env)[1].splitlines() if cmd.startswith("make") \
        else [cmd]
    out = []
    for line in lines:
        where = app
        if line.startswith("cd ") and "&&" in line:
            folder, line = line[3:].split("&&", 1)
            where = app / folder.strip()
        try:
            args = shlex.split(line)
        except ValueError:
            continue
        if not args or Path(args[0]).name != "nvcc":
            continue
        sources = [a for a in args if a.endswith(".cu")]
        flags, skip = [], False
        for a in args[1:]:
            if skip:
                skip = False
            elif a == "-o":
                skip = True
            elif a != "-c" and a not in sources and not a.endswith((".o", ".c", ".cpp")) and not a.startswith("-l"):
                flags.append(a)
        out += [{"directory": str(where), "file": src, "arguments": [args[0], *flags, "-c", src]} for src in sources]
    return out


def reproduces(mep: Path, env) -> dict:
    """Run the MEP on its captured inputs and compare what it writes with the captured after-state."""
    rc, out, err, _ = sh(["make", "-s"], mep, 300, env)
    if rc:
        return {"built": False, "reproduces": None, "why": (err or out).strip().splitlines()[-1:]}
    rc, out, err, _ = sh(["./mep", "--out", "data/repro"], mep, 120, env)
    if rc:
        return {"built": True, "reproduces": False, "why": [(out + err).strip()[-300:]]}
    import yaml
    cap = mep / "data" / "captured"
    m = json.loads((cap / "manifest.json").read_text())
    spec = yaml.safe_load((mep / "mep.yaml").read_text())
    tol = spec.get("verify", {}).get("tolerance", {})
    compared, exact, within, bad = 0, True, True, []
    # a parameter the MEP passes as a pointer into another's buffer (the application aliased them: role scalar with
    # `relocate`) writes nothing of its own: what the launch changed through it is compared in its holder's buffer
    outputs = {p["name"] for p in spec["params"] if p.get("role") in ("out", "inout")}
    pairs = [(p["name"], p["after"], p["name"]) for p in m["params"]
             if p.get("kind") == "buffer" and p.get("after") and p["name"] in outputs]
    after = {f"data/captured/before/alloc{a['id']}.npy": a["after"] for a in m["allocations"] if a.get("after")}
    pairs += [(b["name"], after[b["init"]["path"]], b["name"]) for b in spec.get("buffers", [])
              if (b.get("init") or {}).get("path") in after]
    sys.path.insert(0, str(ROOT))
    from mepgen.capture.convert import load_array
    for label, rel, out_name in pairs:
        f = mep / "data" / "repro" / f"{out_name}.npy"
        if not f.is_file():
            bad.append(f"{label}: the MEP wrote no {f.name}")
            within = exact = False
            continue
        got, want = np.load(f), load_array(cap, rel)
        n = min(got.size, want.size)
        got, want = got.reshape(-1)[:n], want.reshape(-1)[:n]
        compared += 1
        if got.tobytes() == want.tobytes():
            continue
        exact = False
        t = tol.get(label, {"rtol": 1e-5, "atol": 1e-6})
        if got.dtype.kind == "f" and np.allclose(got, want, rtol=t["rtol"], atol=t["atol"], equal_nan=True):
            continue
        within = False
        bad.append(f"{label}: {int(np.count_nonzero(got != want))} of {n} elements differ")
    return {"built": True, "compared": compared, "exact": exact and compared > 0,
            "reproduces": within if compared else None, "why": bad}


def one_app(name: str, spec, roots: dict, work: Path, arch: str, ncu: bool, env) -> dict:
    suite, folder, build, exe, args, xflags, why = spec
    src = Path(roots[suite]) / folder
    row = {"app": name, "suite": suite, "why": why, "kernels": []}
    if not src.is_dir():
        row["error"] = f"{src} not found"
        return row
    app = work / f"{suite}-{name}"
    shutil.copytree(src, app, symlinks=True)
    rc, out, err, dt = sh(build.format(arch=arch, flags=R_FLAGS), app, 300, env)
    row["build_s"] = round(dt, 1)
    if rc:
        row["error"] = "build failed: " + (err or out).strip()[-300:]
        return row
    (app / "compile_commands.json").write_text(json.dumps(compile_commands(app, build, arch, env), indent=1))
    rc, out, err, dt = sh(MEPGEN + ["extract", ".", *xflags], app, 300, env)
    row["extract_s"] = round(dt, 1)
    if rc:
        row["error"] = "extract failed: " + (err or out).strip()[-300:]
        return row
    rc, out, err, dt = sh(MEPGEN + ["capture", "--all", "--use", "--json", "--timeout", "120", "-C", str(app), "--",
                                    exe, *args], app, 600, env)
    row["capture_s"] = round(dt, 1)
    outcomes = None
    try:
        outcomes = json.loads(out)          # --json: mepgen's JSON alone on stdout (the application's on stderr)
    except json.JSONDecodeError:
        row["stdout_not_json"] = out[:200]
        try:
            outcomes = _json_tail(out)
        except json.JSONDecodeError:
            pass
    if outcomes is None:
        row["error"] = f"capture exit {rc}: " + (err or out).strip()[-400:]
        return row
    app_ncu = _ncu_app(app, exe, args, env) if ncu else {}
    for o in outcomes:
        k = {"kernel": o["kernel"], "outcome": o["outcome"], "reason": o.get("reason"),
             "complete": o.get("complete"), "todo": o.get("todo"), "mep_error": o.get("mep_error"),
             "relocations": o.get("relocations"), "allocations": o.get("allocations"),
             "bytes": o.get("bytes_captured"), "app_kernel_ms": o.get("kernel_ms"), "grid": o.get("grid"),
             "block": o.get("block")}
        if o.get("mep"):
            mep = Path(o["mep"])
            k.update(reproduces(mep, env))
            rc, out, err, _ = sh(MEPGEN + ["run", o["kernel"], "-C", str(app), "--json", "--rounds", "1"], app, 300, env)
            k["run_rc"] = rc
            try:
                base = json.loads(out)["baseline"]
                k["run_status"] = base.get("status")
                k["mep_median_ms"] = (base.get("timed") or {}).get("median_ms")
                if base.get("status") != "ok":
                    k["run_why"] = str(base.get("mep_error") or base.get("fault") or base.get("wrong")
                                       or base.get("compile_failed"))[:300]
            except (json.JSONDecodeError, AttributeError, KeyError, TypeError):
                text = (err or out).strip()
                # mepgen's own error: its last `mepgen:` line (the first says which sandbox), with what follows
                lines = text.splitlines()
                said = [i for i, ln in enumerate(lines) if ln.startswith("mepgen:") and not ln.startswith("mepgen: sandbox:")]
                k["run_status"] = f"exit {rc}: " + (" ".join(lines[said[-1]:])[:300] if said else text[-300:])
            if ncu and k.get("built"):
                k.update(_ncu_mep(mep, o["kernel"], o.get("launch_index", 0), app_ncu, env))
            rc, out, err, _ = sh(MEPGEN + ["capture", o["kernel"], "--compare", "--json", "-C", str(app)], app, 120, env)
            try:
                found = json.loads(out)[0]["disagreements"]
                line = lambda d: (d["field"] + ": " + d["static"] + " vs " + d["captured"]
                                  + (f" ({d['why']})" if d.get("why") else ""))
                # real disagreements apart from static completion's placeholders (a todo behind its value)
                k["static_vs_captured"] = [line(d) for d in found if not d.get("static_todo")]
                k["static_placeholders"] = [line(d) + (" [a stated default]" if d["static_todo"] == "default"
                                                       else f" [todo {d['static_todo']}]") for d in found
                                            if d.get("static_todo")]
            except (json.JSONDecodeError, IndexError, KeyError):
                k["static_vs_captured"] = [f"compare failed: {(err or out).strip()[-200:]}"]
        row["kernels"].append(k)
    return row


def _ncu_app(app: Path, exe: str, args: list[str], env) -> dict:
    """Nsight Compute times (us) of the first launch of every kernel in the application (`--kernel-id :::1`)."""
    from mep_fidelity import NCU, ncu_times
    rc, out, err, _ = sh([*NCU, "--kernel-id", ":::1", exe, *args], app, 600, env)
    return ncu_times(out) if rc == 0 else {"_error": [(err or out).strip()[-200:]]}


def _ncu_mep(mep: Path, kernel: str, launch: int, app_times: dict, env) -> dict:
    """The same measurement in the MEP (5 launches, median) next to the application's launch (`launch` 0 only)."""
    from mep_fidelity import NCU, ncu_times, short
    if launch != 0:
        return {"ncu": "the application's launch is not the first: not profiled"}
    rc, out, err, _ = sh([*NCU, "./mep", "--time", "--reps", "5", "--warmup", "0"], mep, 600, env)
    got = ncu_times(out).get(short(kernel)) if rc == 0 else None
    want = (app_times.get(short(kernel)) or [None])[0]
    if not got or want is None:
        return {"ncu": f"no time (app: {want}, MEP: {got}, {str(app_times.get('_error') or err[-120:])})"}
    med = float(np.median(got))
    return {"ncu_app_us": round(want, 3), "ncu_mep_us": round(med, 3), "ncu_ratio": round(med / want, 3)}


def table(rows: list[dict], meta: dict) -> str:
    lines = [f"# One capture run per application ({meta['date']}, {meta['gpu']})", "",
             f"Command: `{meta['command']}`", "",
             f"Applications: {meta['apps_ok']} of {meta['apps']} built, extracted and run under capture; kernels: "
             f"{meta['captured']} captured of {meta['kernels']} in the inventory ({meta['launched']} launched by the "
             f"run); complete MEPs: {meta['complete']}; reproducing the launch's output: {meta['reproduced']} "
             f"({meta['exact']} bit-exact).", "",
             "| app | kernel | outcome | complete | reproduces | mepgen run | app ms | MEP ms | ncu MEP/app | pointers | note |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r.get("error"):
            lines.append(f"| {r['app']} | | {r['error'][:120]} | | | | | | | | |")
        for k in r["kernels"]:
            rep = {True: "exact" if k.get("exact") else "within tol", False: "no", None: "n/a"}[k.get("reproduces")]
            note = k.get("reason") or k.get("mep_error") or "; ".join((k.get("todo") or []) + (k.get("why") or []))
            lines.append(f"| {r['app']} | {k['kernel']} | {k['outcome']} | {k.get('complete')} | {rep} | "
                         f"{k.get('run_status', '')} | {k.get('app_kernel_ms') or ''} | {k.get('mep_median_ms') or ''} | "
                         f"{k.get('ncu_ratio', '')} | {k.get('relocations') or ''} | {str(note)[:160]} |")
    n_real = sum(len(k.get("static_vs_captured") or []) for r in rows for k in r["kernels"])
    n_todo = sum(len(k.get("static_placeholders") or []) for r in rows for k in r["kernels"])
    lines += ["", f"Static vs captured (mepgen capture --compare): {n_real} disagreement(s); {n_todo} difference(s) "
              "where static completion has a placeholder (a todo behind its value), listed apart below.", "",
              "Disagreements:", ""]
    for r in rows:
        for k in r["kernels"]:
            for d in k.get("static_vs_captured") or []:
                lines.append(f"- {r['app']} {k['kernel']}: {d}")
    lines += ["", "Static placeholders the capture fills (not disagreements):", ""]
    for r in rows:
        for k in r["kernels"]:
            for d in k.get("static_placeholders") or []:
                lines.append(f"- {r['app']} {k['kernel']}: {d}")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rodinia", required=True, help="Rodinia's cuda/ folder")
    ap.add_argument("--hecbench", required=True, help="HeCBench's src/ folder")
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--apps", default=",".join(DEFAULT), help=f"comma-separated, of: {', '.join(APPS)}")
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--jobs", type=int, default=8, help="applications at a time (builds and MEPs overlap; times are then indicative)")
    ap.add_argument("--ncu", action="store_true", help="also time the first launch of each kernel under Nsight "
                    "Compute in the application and in its MEP (one more application run under ncu)")
    ap.add_argument("--keep", action="store_true", help="keep the scratch folder")
    ap.add_argument("--apps-file", type=Path, default=None,
                    help="a JSON list of applications to add (bench/apps_sample_e.json); --apps defaults to them")
    ap.add_argument("--pack", type=Path, default=None,
                    help="only copy the listed applications' folders from the corpus into PACK/rodinia and "
                         "PACK/hecbench (to carry them to a GPU machine; never into the repository), then stop")
    a = ap.parse_args()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    work = Path(tempfile.mkdtemp(prefix="capture-sweep-"))
    names = chosen_apps(a.apps, a.apps_file)
    if names is None:
        return 2
    roots = {"rodinia": a.rodinia, "hecbench": a.hecbench}
    if a.pack is not None:
        for n in names:
            suite, folder = APPS[n][0], APPS[n][1]
            dest = a.pack / suite / folder
            if not dest.exists():
                shutil.copytree(Path(roots[suite]) / folder, dest, symlinks=True)
        print(f"packed {len(names)} applications into {a.pack}")
        return 0
    t0 = time.perf_counter()
    with cf.ThreadPoolExecutor(max_workers=a.jobs) as pool:
        rows = list(pool.map(lambda n: one_app(n, APPS[n], roots, work, a.arch, a.ncu, env), names))
    ks = [k for r in rows for k in r["kernels"]]
    smi = shutil.which("nvidia-smi")
    gpu = (subprocess.run([smi, "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                          text=True).stdout.strip().splitlines()[:1] if smi else []) or ["no GPU"]
    meta = {"date": datetime.date.today().isoformat(), "gpu": gpu[0], "command": " ".join(sys.argv),
            "apps": len(rows), "apps_ok": sum(1 for r in rows if not r.get("error")), "kernels": len(ks),
            "launched": sum(1 for k in ks if k["outcome"] in ("captured", "refused")),
            "captured": sum(1 for k in ks if k["outcome"] == "captured"),
            "complete": sum(1 for k in ks if k.get("complete")),
            "reproduced": sum(1 for k in ks if k.get("reproduces")), "exact": sum(1 for k in ks if k.get("exact")),
            "wall_s": round(time.perf_counter() - t0, 1)}
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "capture_sweep.json").write_text(json.dumps({"meta": meta, "apps": rows}, indent=1) + "\n")
    (a.out / "capture_sweep.md").write_text(table(rows, meta))
    print(table(rows, meta))
    if not a.keep:
        shutil.rmtree(work, ignore_errors=True)
    else:
        print(f"scratch kept: {work}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
