"""`mepgen optimize --all | --top N | --only K1,K2`: many MEPs in one command, one worker per visible GPU.

A batch lives in `.mepgen/batches/NAME/`: `asked/<who>.json` (the kernels each invocation was asked for),
`rows/<kernel id>.json` (one per finished kernel, written atomically the moment it is known), `logs/<kernel
id>.log` (the worker's stderr) and `table.md` (rewritten after every row, so a batch killed at any point still
leaves one). Each kernel runs as its own `mepgen optimize KERNEL --json` process pinned to one GPU by
CUDA_VISIBLE_DEVICES; one process per GPU at a time, so no two candidates are timed on one GPU at once, and a
worker that dies loses only its own kernel. Kernels with a row are skipped when the batch is run again
(`--resume NAME`, or several SLURM array tasks joining one batch); a kernel whose worker died has no row and
runs again, continuing its own run folder (`.mepgen/runs/KERNEL/NAME/`). `--merge NAME` prints the table of
rows written by any number of nodes.
"""
from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from typing import Callable

import click

from ..progress import progress as bar_for
from ..errors import MepgenError
from ..evaluate.devices import list_gpus
from ..kernelname import UnknownKernel, mep_record, resolve
from ..workspace import Workspace, write_atomic, write_json
from ..spec import load_spec
from ..inventory import load

#: rows of these statuses are final: a resumed batch does not run their kernels again
FINAL = ("done", "mep_error", "fidelity")


def progress(message: str) -> None:
    click.echo(f"mepgen optimize: {message}", err=True)


def forward_options(**opts) -> list[str]:
    """The single-kernel command's options, as arguments for each worker."""
    out = []
    for key, value in opts.items():
        flag = "--" + key.replace("_", "-")
        if key == "proposer_kind":
            flag = "--proposer"
        if value is None or value is False:
            continue
        out += [flag] if value is True else [flag, str(value)]
    return out


# --- which kernels ---------------------------------------------------------------------------------

def ready_meps(ws: Workspace) -> list[dict]:
    """MEPs whose mep.yaml has no open todo, by hotspot rank (MEPs the inventory does not rank come last)."""
    ranks: dict[str, int] = {}
    if ws.inventory_path.is_file():
        for k in load(ws.inventory_path)["kernels"]:
            ranks[k["id"]] = k["rank"]
    out = []
    for f in sorted((ws.root / "meps").glob("*/mep.yaml")):
        try:
            spec = load_spec(f)
        except Exception as e:  # a broken mep.yaml must not stop the batch: it is skipped with the reason
            out.append({"id": f.parent.name, "name": f.parent.name, "ready": False,
                        "why": f"{f}: {str(e).splitlines()[0] if str(e) else type(e).__name__}"})
            continue
        why = f"{len(spec.todo)} open todo item(s) in mep.yaml" if spec.todo else ""
        out.append({"id": spec.kernel.id, "name": spec.kernel.name, "ready": not spec.todo, "why": why,
                    "rank": ranks.get(spec.kernel.id)})
    return sorted(out, key=lambda m: (m.get("rank") is None, m.get("rank") or 0, m["id"]))


def choose(ws: Workspace, all_kernels: bool, top: int | None, only: str | None) -> list[dict]:
    meps = ready_meps(ws)
    if not meps:
        raise MepgenError(f"no MEP in {ws.root / 'meps'}: run `mepgen mep --all` first", exit_code=3)
    if only:
        wanted = [w.strip() for w in only.split(",") if w.strip()]
        chosen = []
        records = [dict(mep_record(m["id"], m["name"] if m["name"] != m["id"] else None), mep=m) for m in meps]
        for w in wanted:
            try:
                m = resolve(records, w, "the MEPs")["mep"]
            except UnknownKernel:
                raise MepgenError(f"--only: no MEP named '{w}' (known: {', '.join(x['id'] for x in meps)})",
                                  exit_code=2) from None
            if m not in chosen:
                chosen.append(m)
    else:
        chosen = list(meps)
    not_ready = [m for m in chosen if not m["ready"]]
    for m in not_ready:
        progress(f"skipping {m['id']}: {m['why']}")
    chosen = [m for m in chosen if m["ready"]]
    if top:
        chosen = chosen[:top]
    if not chosen:
        raise MepgenError("no ready MEP among those asked for (complete their mep.yaml first)", exit_code=3)
    return chosen


# --- the batch folder ------------------------------------------------------------------------------

class Batch:
    def __init__(self, ws: Workspace, name: str):
        self.ws, self.name = ws, name
        self.folder = ws.root / "batches" / name
        self.lock = threading.Lock()

    def exists(self) -> bool:
        return (self.folder / "asked").is_dir()

    def ask(self, kernels: list[str], options: list[str]) -> None:
        who = os.environ.get("SLURM_ARRAY_TASK_ID")
        tag = f"task{who}" if who is not None else f"{os.uname().nodename}-{os.getpid()}"
        write_json(self.folder / "asked" / f"{tag}.json",
                   {"kernels": kernels, "options": options, "time": time.time(), "host": os.uname().nodename})

    def asked(self) -> list[str]:
        out: list[str] = []
        for f in sorted((self.folder / "asked").glob("*.json")):
            try:
                out += [k for k in json.loads(f.read_text()).get("kernels", []) if k not in out]
            except (OSError, json.JSONDecodeError):
                continue
        return out

    def rows(self) -> dict[str, dict]:
        out = {}
        for f in sorted((self.folder / "rows").glob("*.json")):
            try:
                row = json.loads(f.read_text())
            except (OSError, json.JSONDecodeError):
                continue                      # a row cut short: its kernel runs again
            out[row["kernel"]] = row
        return out

    def put(self, row: dict) -> None:
        with self.lock:
            write_json(self.folder / "rows" / f"{row['kernel']}.json", row)
            self.write_table()

    def write_table(self, order: list[str] | None = None) -> str:
        rows = self.rows()
        asked = order or self.asked()
        text = render_table(rows, asked, f"mepgen optimize batch {self.name}")
        write_atomic(self.folder / "table.md", text)
        return text


def _fmt(v, pattern: str) -> str:
    return "-" if v is None else pattern.format(v)


def render_table(rows: dict[str, dict], asked: list[str], title: str) -> str:
    lines = [f"# {title}", "",
             "| kernel | original ms | MEP/app time | best ms | speedup | % of roofline | winning change | status |",
             "|---|---|---|---|---|---|---|---|"]
    order = asked + [k for k in rows if k not in asked]
    for k in order:
        r = rows.get(k)
        if r is None:
            lines.append(f"| {k} | - | - | - | - | - | - | not run yet |")
            continue
        change = (r.get("change") or ("no verified win" if r["status"] == "done" else "-")).replace("|", "\\|")[:80]
        status = r["status"] + (f": {r['error']}" if r.get("error") else "")
        lines.append(f"| {r.get('name') or k} | {_fmt(r.get('original_ms'), '{:.4g}')} "
                     f"| {_fmt(r.get('fidelity_ratio'), '{:.2f}')} | {_fmt(r.get('best_ms'), '{:.4g}')} "
                     f"| {_fmt(r.get('speedup'), '{:.2f}x')} | {_fmt(r.get('pct_roofline'), '{:.0f}%')} | {change} | "
                     f"{status.replace('|', '/')[:120]} |")
    done = sum(1 for k in order if rows.get(k, {}).get("status") == "done")
    lines += ["", f"{done}/{len(order)} kernel(s) done"]
    return "\n".join(lines) + "\n"


# --- one kernel in a worker process --------------------------------------------------------------------

def worker_command(ws: Workspace, kernel: str, name: str, resume: bool, options: list[str]) -> list[str]:
    return [sys.executable, "-m", "mepgen.cli", "optimize", kernel, "-C", str(ws.app_root), "--json",
            *options, *(["--resume", name] if resume else ["--run-name", name])]


def row_from(kernel: str, name: str, device, code: int | None, stdout: str, seconds: float, tail: str,
             started: float | None = None) -> dict:
    """One kernel's row. `started` (epoch seconds) and `finished` let anyone check from the rows alone that no two
    kernels ran on one GPU at once."""
    row = {"kernel": kernel, "name": name, "device": device, "seconds": round(seconds, 1), "status": "failed",
           "started": None if started is None else round(started, 3),
           "finished": None if started is None else round(started + seconds, 3),
           "error": None, "original_ms": None, "best_ms": None, "speedup": None, "pct_roofline": None, "change": None,
           "run": None, "evaluations": None, "stop_reason": None, "fidelity_ratio": None, "fidelity": None}
    doc = None
    start = stdout.find("{")
    if start >= 0:
        try:
            doc = json.loads(stdout[start:])
        except json.JSONDecodeError:
            doc = None
    if code == 0 and isinstance(doc, dict):
        best = doc.get("best") or {}
        # with a winner, the original's timing its speedup was judged against (the run's first timing of it may
        # differ, on a microsecond kernel by more than the win: the table read 4.26 us -> 4.32 us, "1.03x")
        row.update(status="done", original_ms=best.get("baseline_median_ms") or doc.get("baseline_ms"),
                   run=doc.get("run"),
                   evaluations=doc.get("evaluations"), stop_reason=doc.get("stop_reason"),
                   best_ms=best.get("median_ms", doc.get("baseline_ms")), speedup=best.get("speedup"),
                   pct_roofline=best.get("pct_roofline", doc.get("baseline_pct_roofline")),
                   change=best.get("change"), chain=best.get("chain"))
        fid = doc.get("fidelity") or {}
        row.update(fidelity=fid or None, fidelity_ratio=fid.get("ratio"))
        return row
    if code is not None and code < 0:
        row["error"] = f"the worker died of signal {-code}"
    else:
        # the whole line: a baseline too long for --time-limit says what limit it needs at its end (tune reads it)
        line = (tail.strip().splitlines() or [f"exit {code}"])[-1]
        row["error"] = line[:2000]
        need = re.search(r"--time-limit >= (\d+(?:\.\d+)?)", line)
        if need:
            row["needs_time_limit_s"] = float(need.group(1))
    if code == 3:
        row["status"] = "mep_error"
    elif code == 5:       # optimize's fidelity guard (optimize.command.FIDELITY_EXIT)
        row["status"] = "fidelity"
    return row


#: worker processes running now (each in its own session): terminated when the batch is interrupted
RUNNING: set = set()


def stop_workers() -> None:
    for proc in list(RUNNING):
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except (ProcessLookupError, PermissionError):
            pass


def subprocess_runner(ws: Workspace, batch: Batch, options: list[str]) -> Callable[[dict, int], dict]:
    def run_one(mep: dict, device: int) -> dict:
        kid = mep["id"]
        resume = (ws.root / "runs" / kid / batch.name / "run.json").is_file()
        env = dict(os.environ, CUDA_VISIBLE_DEVICES=str(device), CUDA_DEVICE_ORDER="PCI_BUS_ID")
        log = batch.folder / "logs" / f"{kid}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        start, started = time.monotonic(), time.time()
        tail: list[str] = []
        with open(log, "a") as fh:
            proc = subprocess.Popen(worker_command(ws, kid, batch.name, resume, options), stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)
            RUNNING.add(proc)
            out_chunks: list[str] = []
            reader = threading.Thread(target=lambda: out_chunks.append(proc.stdout.read()), daemon=True)
            reader.start()
            for line in proc.stderr:
                fh.write(line)
                fh.flush()
                tail = (tail + [line])[-20:]
                click.echo(f"[gpu {device}] {kid}: {line.rstrip()}", err=True)
            code = proc.wait()
            RUNNING.discard(proc)
            reader.join()
        return row_from(kid, mep["name"], device, code, "".join(out_chunks), time.monotonic() - start, "".join(tail),
                        started)
    return run_one


# --- the pool ------------------------------------------------------------------------------------

def run_pool(meps: list[dict], devices: list[int], run_one: Callable[[dict, int], dict],
             on_row: Callable[[dict], None]) -> list[dict]:
    """One thread per device, each running one kernel at a time; a kernel whose run raises gets a failed row."""
    todo: queue.Queue = queue.Queue()
    for m in meps:
        todo.put(m)
    rows: list[dict] = []
    lock = threading.Lock()

    def worker(device: int) -> None:
        while True:
            try:
                mep = todo.get_nowait()
            except queue.Empty:
                return
            try:
                row = run_one(mep, device)
            except Exception as e:  # the pool must outlive any one kernel
                row = {"kernel": mep["id"], "name": mep["name"], "device": device, "status": "failed",
                       "error": f"{type(e).__name__}: {e}"}
            with lock:
                rows.append(row)
            on_row(row)

    threads = [threading.Thread(target=worker, args=(d,), daemon=True) for d in devices]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return rows


# --- the commands --------------------------------------------------------------------------------

def optimize_many(ws: Workspace, all_kernels: bool, top: int | None, only: str | None, run_name: str | None,
                  resume: str | None, options: list[str], list_only: bool, as_json: bool,
                  run_one: Callable[[dict, int], dict] | None = None) -> None:
    name = resume or run_name or time.strftime("batch-%Y%m%d-%H%M%S")
    batch = Batch(ws, name)
    if resume and not batch.exists():
        raise MepgenError(f"{batch.folder}: no batch to resume", exit_code=2)
    if resume and not (all_kernels or top or only):
        asked = batch.asked()
        meps = [m for m in ready_meps(ws) if m["id"] in asked]
    else:
        meps = choose(ws, all_kernels, top, only)
    if list_only:
        click.echo("\n".join(m["id"] for m in meps))
        return
    gpus, why = list_gpus()
    if not gpus:
        raise MepgenError(f"no CUDA device: {why}", exit_code=4)
    batch.ask([m["id"] for m in meps], options)
    have = batch.rows()
    left = [m for m in meps if have.get(m["id"], {}).get("status") not in FINAL]
    if len(left) < len(meps):
        progress(f"batch {name}: {len(meps) - len(left)} kernel(s) already done, {len(left)} left")
    workers = gpus[:max(1, len(left))]
    progress(f"batch {name}: {len(left)} kernel(s) on {len(workers)} GPU(s) ({', '.join(map(str, workers))}), "
             f"one worker each; table: {batch.folder / 'table.md'}")
    batch.write_table()
    start = time.monotonic()

    with bar_for(f"batch {name}", total=len(left)) as bar:
        def on_row(row: dict) -> None:
            batch.put(row)
            progress(f"{row['kernel']}: {row['status']}" + (f" ({row['error']})" if row.get("error") else "")
                     + (f", best {row['speedup']:.2f}x" if row.get("speedup") else ""))
            bar.advance()

        try:
            run_pool(left, workers, run_one or subprocess_runner(ws, batch, options), on_row)
        except KeyboardInterrupt:
            stop_workers()     # each writes its summary.md; rows written so far stay
            batch.write_table([m["id"] for m in meps])
            raise
    text = batch.write_table([m["id"] for m in meps])
    rows = batch.rows()
    if as_json:
        click.echo(json.dumps({"batch": name, "folder": str(batch.folder), "seconds": round(time.monotonic() - start, 1),
                               "gpus": workers, "rows": [rows[m["id"]] for m in meps if m["id"] in rows]}, indent=1))
    else:
        click.echo(text, nl=False)
        click.echo(f"wrote {batch.folder / 'table.md'} ({time.monotonic() - start:.0f} s)")
    failed = [m["id"] for m in meps if rows.get(m["id"], {}).get("status") != "done"]
    if failed:
        raise MepgenError(f"{len(failed)} kernel(s) not done ({', '.join(failed)}): see {batch.folder / 'logs'}; "
                          f"--resume {name} runs what is left", exit_code=1)


def merge(ws: Workspace, name: str, as_json: bool) -> None:
    batch = Batch(ws, name)
    if not batch.folder.is_dir():
        raise MepgenError(f"{batch.folder}: no such batch", exit_code=2)
    text = batch.write_table()
    if as_json:
        rows = batch.rows()
        click.echo(json.dumps({"batch": name, "asked": batch.asked(), "rows": list(rows.values())}, indent=1))
    else:
        click.echo(text, nl=False)
        click.echo(f"wrote {batch.folder / 'table.md'}")
