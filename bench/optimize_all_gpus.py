#!/usr/bin/env python3
"""GPU: `mepgen optimize --all` with one worker per visible GPU against the same batch restricted to one GPU.

    python3 bench/optimize_all_gpus.py APP OUT [--phase prepare|all|one|fault|report ...] [--budget 6]
                                       [--time-limit 120] [--work DIR]

APP is an application folder (real public code, never copied into this repository). `prepare` copies it to
WORK/base and runs `mepgen ready` (extract, then every kernel's MEP). Each timed phase copies WORK/base (its
MEPs, no run yet) to a folder of its own and runs, as a user would,

    python -m mepgen.cli optimize --all -C COPY --proposer library --no-inherit --budget B --time-limit S \
        --run-name bench --json

`all` with every GPU visible, `one` with CUDA_VISIBLE_DEVICES=0. While a batch runs, nvidia-smi is sampled twice a
second: the utilization of each GPU and the processes on it, each mapped to its process group (one group per
kernel's worker: `optimize --all` starts each in a session of its own), so the record shows how many kernels'
workers ever shared one GPU. The batch's rows (start and finish of every kernel, its GPU) are checked the same way.
`fault` runs a batch on every GPU, kills one kernel's worker (SIGKILL to its process group) once it has started,
checks that every other kernel's row is there, then `--resume`s and checks that only the killed kernel ran again.
`report` writes OUT/optimize_all_gpus.md from the phases' JSON (OUT/<phase>.json), each written when its phase ends.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def mepgen(args: list[str], cwd: Path, env: dict | None = None, timeout: float = 3000) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mepgen.cli", *args], cwd=cwd, capture_output=True, text=True,
                          env=env, timeout=timeout)


def smi(query: str, what: str = "--query-gpu") -> list[list[str]]:
    try:
        r = subprocess.run(["nvidia-smi", f"{what}={query}", "--format=csv,noheader,nounits"], capture_output=True,
                           text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [[c.strip() for c in line.split(",")] for line in r.stdout.splitlines() if line.strip()]


class Sampler(threading.Thread):
    """nvidia-smi twice a second: utilization per GPU, and the process groups holding a context on each."""

    def __init__(self):
        super().__init__(daemon=True)
        self.stop, self.samples = threading.Event(), []
        self.bus = {row[1].lower(): int(row[0]) for row in smi("index,pci.bus_id")}

    def run(self):
        while not self.stop.is_set():
            util = {int(r[0]): float(r[1]) for r in smi("index,utilization.gpu") if r[1].replace(".", "").isdigit()}
            groups: dict[int, set] = {}
            for bus, pid in smi("gpu_bus_id,pid", "--query-compute-apps"):
                try:
                    groups.setdefault(self.bus.get(bus.lower(), -1), set()).add(os.getpgid(int(pid)))
                except (ProcessLookupError, ValueError):
                    continue
            self.samples.append({"t": time.time(), "util": util, "groups": {g: sorted(s) for g, s in groups.items()}})
            self.stop.wait(0.5)

    def summary(self) -> dict:
        gpus = sorted({g for s in self.samples for g in s["util"]})
        out = {"samples": len(self.samples), "gpus": {}}
        for g in gpus:
            util = [s["util"].get(g, 0.0) for s in self.samples]
            held = [len(s["groups"].get(g, [])) for s in self.samples]
            out["gpus"][g] = {"busy_share": round(sum(u > 0 for u in util) / max(1, len(util)), 3),
                              "mean_util": round(statistics.fmean(util), 1) if util else 0.0,
                              "held_share": round(sum(h > 0 for h in held) / max(1, len(held)), 3),
                              "max_worker_groups": max(held, default=0)}
        return out


def overlaps(rows: list[dict]) -> int:
    """Pairs of kernels whose [started, finished] intervals overlap on one GPU (from the batch's own rows)."""
    n = 0
    for dev in {r["device"] for r in rows}:
        spans = sorted((r["started"], r["finished"]) for r in rows if r["device"] == dev and r.get("started"))
        n += sum(1 for a, b in zip(spans, spans[1:]) if b[0] < a[1])
    return n


def batch_rows(app: Path, name: str) -> list[dict]:
    return [json.loads(f.read_text()) for f in sorted((app / ".mepgen" / "batches" / name / "rows").glob("*.json"))]


def options(a) -> list[str]:
    return ["--proposer", "library", "--no-inherit", "--budget", str(a.budget), "--time-limit", str(a.time_limit)]


def fresh_copy(work: Path, label: str) -> Path:
    dest = work / label
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(work / "base", dest, symlinks=True)
    return dest


def phase_prepare(a, work: Path) -> dict:
    base = work / "base"
    if base.exists():
        shutil.rmtree(base)
    shutil.copytree(a.app, base, symlinks=True, ignore=shutil.ignore_patterns(".mepgen"))
    t = time.monotonic()
    r = mepgen(["ready", "--json", "-C", str(base)], cwd=base)
    doc = json.loads(r.stdout[r.stdout.find("{"):]) if "{" in r.stdout else {}
    return {"rc": r.returncode, "seconds": round(time.monotonic() - t, 1), "summary": doc.get("summary"),
            "stderr_tail": r.stderr[-800:] if r.returncode not in (0, 3) else ""}


def phase_timed(a, work: Path, label: str, visible: str | None) -> dict:
    app = fresh_copy(work, label)
    env = dict(os.environ)
    if visible is not None:
        env["CUDA_VISIBLE_DEVICES"] = visible
    sampler = Sampler()
    sampler.start()
    t = time.monotonic()
    r = mepgen(["optimize", "--all", "-C", str(app), *options(a), "--run-name", "bench", "--json"], cwd=app, env=env)
    wall = time.monotonic() - t
    sampler.stop.set()
    sampler.join()
    doc = json.loads(r.stdout[r.stdout.find("{"):]) if "{" in r.stdout else {}
    rows = batch_rows(app, "bench")
    return {"label": label, "visible": visible, "rc": r.returncode, "wall_s": round(wall, 1),
            "batch_s": doc.get("seconds"), "gpus": doc.get("gpus"), "kernels": len(rows),
            "done": sum(r["status"] == "done" for r in rows), "row_overlaps": overlaps(rows),
            "per_gpu_kernels": {str(d): sum(r["device"] == d for r in rows) for d in {r["device"] for r in rows}},
            "sampler": sampler.summary(), "rows": rows,
            "table": (app / ".mepgen" / "batches" / "bench" / "table.md").read_text(),
            "stderr_tail": r.stderr[-600:] if r.returncode not in (0,) else ""}


def phase_fault(a, work: Path) -> dict:
    app = fresh_copy(work, "fault")
    ids = mepgen(["optimize", "--all", "-C", str(app), "--list"], cwd=app).stdout.split()
    victim = ids[0]
    proc = subprocess.Popen([sys.executable, "-m", "mepgen.cli", "optimize", "--all", "-C", str(app), *options(a),
                             "--run-name", "fault", "--json"], cwd=app, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    log = app / ".mepgen" / "batches" / "fault" / "logs" / f"{victim}.log"
    killed, deadline = None, time.monotonic() + 300
    while killed is None and time.monotonic() < deadline and proc.poll() is None:
        if log.is_file() and log.stat().st_size > 0:
            pids = subprocess.run(["pgrep", "-f", f"optimize {victim} -C {app}"], capture_output=True,
                                  text=True).stdout.split()
            for pid in pids:
                try:
                    os.killpg(int(pid), signal.SIGKILL)     # the worker's session: it and its children
                    killed = int(pid)
                except (ProcessLookupError, PermissionError):
                    continue
        time.sleep(0.2)
    out, err = proc.communicate()
    rows = {r["kernel"]: r for r in batch_rows(app, "fault")}
    first = {"rc": proc.returncode, "victim": victim, "killed_pid": killed,
             "victim_row": {k: rows.get(victim, {}).get(k) for k in ("status", "error", "device")},
             "others_done": sum(r["status"] == "done" for k, r in rows.items() if k != victim),
             "others": len(ids) - 1, "last_error_line": err.strip().splitlines()[-1] if err.strip() else ""}
    t = time.monotonic()
    r = mepgen(["optimize", "--resume", "fault", "-C", str(app), *options(a), "--json"], cwd=app)
    rows2 = {x["kernel"]: x for x in batch_rows(app, "fault")}
    rerun = [k for k, x in rows2.items() if x.get("started") != rows.get(k, {}).get("started")]
    left_line = next((line for line in r.stderr.splitlines() if "already done" in line), "")
    return {"first": first, "resume": {"rc": r.returncode, "seconds": round(time.monotonic() - t, 1),
                                       "rerun": rerun, "progress": left_line,
                                       "victim_status": rows2.get(victim, {}).get("status"),
                                       "done": sum(x["status"] == "done" for x in rows2.values()),
                                       "kernels": len(ids)}}


def report(out: Path, a) -> None:
    got = {p: json.loads((out / f"{p}.json").read_text()) for p in ("prepare", "all", "one", "fault")
           if (out / f"{p}.json").is_file()}
    lines = ["# `mepgen optimize --all`: one worker per GPU against one GPU", "",
             f"- app: `{a.app.name}` (real public code, not in this repository); budget {a.budget} candidates, "
             f"time limit {a.time_limit} s per kernel; library proposer, no inheritance",
             f"- command: `python3 bench/optimize_all_gpus.py APP OUT --budget {a.budget} --time-limit {a.time_limit}`",
             f"- machine: {got.get('all', got.get('one', {})).get('machine', '?')}", ""]
    if "prepare" in got:
        lines += [f"- prepare (`mepgen ready`): {got['prepare']['summary']} in {got['prepare']['seconds']} s", ""]
    lines += ["| run | GPUs | kernels done | wall s | kernels per GPU | overlapping kernels on one GPU (rows) | "
              "max workers on one GPU (nvidia-smi) | share of samples each GPU held a worker | mean util % |",
              "|---|---|---|---|---|---|---|---|---|"]
    for p in ("all", "one"):
        if p in got:
            g = got[p]
            s = g["sampler"]["gpus"]
            lines.append(f"| {p} | {g['gpus']} | {g['done']}/{g['kernels']} | {g['wall_s']} | {g['per_gpu_kernels']} | "
                         f"{g['row_overlaps']} | {max((v['max_worker_groups'] for v in s.values()), default='-')} | "
                         f"{ {k: v['held_share'] for k, v in s.items()} } | { {k: v['mean_util'] for k, v in s.items()} } |")
    if "all" in got and "one" in got:
        lines += ["", f"**Speedup of the batch on {len(got['all']['gpus'] or [])} GPUs over 1 GPU: "
                      f"{got['one']['wall_s'] / got['all']['wall_s']:.2f}x** (wall time of the whole command)"]
        same = got["all"]["table"].splitlines()[2] == got["one"]["table"].splitlines()[2]
        lines.append(f"- tables identical in form (same columns): {same}")
    if "fault" in got:
        f = got["fault"]
        lines += ["", "## A worker killed mid-batch", "", "```json", json.dumps(f, indent=1), "```"]
    for p in ("all", "one"):
        if p in got:
            lines += ["", f"## Table of run `{p}`", "", got[p]["table"]]
    (out / "optimize_all_gpus.md").write_text("\n".join(lines) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("app", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--phase", action="append", choices=["prepare", "all", "one", "fault", "report"])
    ap.add_argument("--budget", type=int, default=6)
    ap.add_argument("--time-limit", type=float, default=120)
    ap.add_argument("--work", type=Path, default=Path("/tmp/optimize_all_gpus"))
    a = ap.parse_args()
    a.app = a.app.resolve()
    a.out.mkdir(parents=True, exist_ok=True)
    a.work.mkdir(parents=True, exist_ok=True)
    machine = "; ".join(" ".join(r) for r in smi("index,name,driver_version"))
    for p in a.phase or ["prepare", "all", "one", "fault", "report"]:
        if p == "report":
            report(a.out, a)
            continue
        t = time.monotonic()
        res = (phase_prepare(a, a.work) if p == "prepare" else phase_fault(a, a.work) if p == "fault"
               else phase_timed(a, a.work, p, None if p == "all" else "0"))
        res.update(machine=machine, date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                   phase_s=round(time.monotonic() - t, 1))
        (a.out / f"{p}.json").write_text(json.dumps(res, indent=1))
        print(f"{p}: {json.dumps({k: v for k, v in res.items() if k not in ('rows', 'table', 'sampler')})[:600]}",
              flush=True)


if __name__ == "__main__":
    main()
