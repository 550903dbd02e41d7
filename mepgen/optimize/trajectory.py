"""The run folder of one `mepgen optimize`: every candidate, how it came about, its result and evidence.

`.mepgen/runs/<kernel id>/<run>/` holds
- `run.json`: what was asked (kernel, spec hash, strategy, proposers, budgets); checked on --resume;
- `trajectory.jsonl`: one JSON line per attempt (id, parent, repair_of, proposer, change, transformations,
  strategy, status, stage, median, speedup over the original, % of roofline, the evaluator's feedback and
  full result) and per event (a proposer that became unavailable, why the search stopped);
- `candidates/<id>.cu`: each candidate's kernel.cu; `results.jsonl`: the evaluator's journal;
- `summary.md` (the best variant, the chain that led to it, a table of attempts) and `best/kernel.cu`.
Nothing secret is written: any text holding a value from `secrets` is redacted before it reaches a file
or the terminal.
"""
from __future__ import annotations

import hashlib
import json
import sys
import time
from pathlib import Path
from typing import Callable

from ..errors import MepgenError
from ..workspace import read_jsonl, write_atomic, write_json
from .proposer import Attempt

FAILED = ("rejected_by_rules", "compile_failed", "runtime_fault", "wrong_result", "impossible", "mep_error")


def content_hash(text: str, launch: dict | None, flags=()) -> str:
    """Same text, launch and extra nvcc flags: the same candidate (flags only count when there are any,
    so hashes of earlier runs stay valid)."""
    extra = "\0" + json.dumps(list(flags)) if flags else ""
    return hashlib.sha256((text + "\0" + json.dumps(launch, sort_keys=True) + extra).encode()).hexdigest()[:20]


def pct_roofline(result) -> float | None:
    t = getattr(result, "timed", None)
    if t is None:
        return None
    vals = [v for v in (t.pct_peak_bw, t.pct_peak_flops) if v is not None]
    return max(vals) if vals else None


def speedup(result) -> float | None:
    t = getattr(result, "timed", None)
    return t.speedup if t is not None and getattr(result, "ok", False) else None


class Trajectory:
    def __init__(self, folder: Path, header: dict, resume: bool = False, secrets: tuple[str, ...] = (),
                 progress: Callable[[str], None] | None = None):
        self.folder = Path(folder)
        self.secrets = tuple(s for s in secrets if s and len(s) >= 4)
        self.progress = progress if progress is not None else (lambda line: print(line, file=sys.stderr, flush=True))
        self.file = self.folder / "trajectory.jsonl"
        self.header = header
        if resume:
            if not (self.folder / "run.json").is_file():
                raise MepgenError(f"{self.folder}: no run to resume (run.json is missing)")
            found = json.loads((self.folder / "run.json").read_text())
            for key in ("kernel", "spec_sha256"):
                if found.get(key) != header.get(key):
                    raise MepgenError(f"{self.folder}: a run of {key} {found.get(key)!r}, not {header.get(key)!r}: "
                                      f"start a new run instead of --resume")
        else:
            # summary.md says the run is starting; work/ holds the first proposals, compiled while the original was timed
            if self.folder.exists() and any(f.name not in ("summary.md", "work") for f in self.folder.iterdir()):
                raise MepgenError(f"{self.folder} exists already: use --resume or another run name")
            self.folder.mkdir(parents=True, exist_ok=True)
            write_json(self.folder / "run.json", json.loads(self.redact(json.dumps(header))))
        self.records: list[dict] = read_jsonl(self.file) if resume else []

    # --- reading back -------------------------------------------------------------------------------


    def attempts(self) -> list[dict]:
        return [r for r in self.records if r.get("kind") == "attempt"]

    def candidate_text(self, attempt_id: str) -> str:
        return (self.folder / "candidates" / f"{attempt_id}.cu").read_text()

    # --- writing ------------------------------------------------------------------------------------

    def redact(self, text: str) -> str:
        for s in self.secrets:
            text = text.replace(s, "[redacted]")
        return text

    def _append(self, record: dict) -> None:
        line = self.redact(json.dumps(record)) + "\n"
        with open(self.file, "a") as fh:
            fh.write(line)
            fh.flush()
        self.records.append(json.loads(line))

    def write_candidate(self, attempt_id: str, text: str) -> Path:
        path = self.folder / "candidates" / f"{attempt_id}.cu"
        write_atomic(path, self.redact(text))
        return path

    def add(self, a: Attempt, proposer: str, evaluations: int, budget: int) -> dict:
        r = a.result
        rec = {"kind": "attempt", "id": a.id, "parent": a.parent, "repair_of": a.repair_of, "proposer": proposer,
               "source": a.proposal.source, "change": a.proposal.change,
               "transformations": a.proposal.transformations, "launch": a.proposal.launch,
               "nvcc_flags": list(a.proposal.nvcc_flags),
               "strategy": a.proposal.strategy,
               "hash": content_hash(a.proposal.text, a.proposal.launch, a.proposal.nvcc_flags),
               "status": getattr(r, "status", "reply_rejected"), "stage": getattr(r, "stage", "reply"),
               "median_ms": r.timed.median_ms if getattr(r, "timed", None) else None,
               "speedup": speedup(r), "decision": r.timed.decision if getattr(r, "timed", None) else None,
               "faster": bool(getattr(r, "faster", False)), "pct_roofline": pct_roofline(r),
               "feedback": r.feedback() if hasattr(r, "feedback") else str(r),
               "result": r.to_dict() if hasattr(r, "to_dict") else None, "time": time.time()}
        if hasattr(r, "to_dict"):
            self.write_candidate(a.id, a.proposal.text)
        self._append(rec)
        self.progress(self.redact(progress_line(rec, evaluations, budget)))
        return rec

    def reject(self, attempt_id: str, parent: str | None, proposer: str, change: str, message: str) -> dict:
        """A reply that never became a candidate (unparseable, or refused by the guard)."""
        rec = {"kind": "attempt", "id": attempt_id, "parent": parent, "repair_of": None, "proposer": proposer,
               "source": proposer, "change": change, "transformations": [], "launch": None, "strategy": "",
               "hash": None, "status": "reply_rejected", "stage": "reply", "median_ms": None, "speedup": None,
               "decision": None, "faster": False, "pct_roofline": None, "feedback": message, "result": None,
               "time": time.time()}
        self._append(rec)
        self.progress(self.redact(f"[   -   ] {attempt_id:<6} {proposer}: reply rejected: {message.splitlines()[0][:100]}"))
        return rec

    def event(self, what: str, message: str) -> None:
        self._append({"kind": "event", "event": what, "message": message, "time": time.time()})
        self.progress(self.redact(f"mepgen optimize: {message}"))

    def write_best(self, text: str) -> Path:
        path = self.folder / "best" / "kernel.cu"
        write_atomic(path, self.redact(text))
        return path


def progress_line(rec: dict, evaluations: int, budget: int) -> str:
    if rec["status"] == "ok":
        verdict = f"ok {rec['speedup']:.2f}x ({rec['decision']})" if rec["speedup"] else "ok"
    else:
        first = (rec["feedback"] or "").splitlines()[0][:80] if rec["feedback"] else ""
        verdict = f"{rec['status']} at {rec['stage']}" + (f": {first}" if first else "")
    origin = f"<- {rec['repair_of']} (repair)" if rec["repair_of"] else f"<- {rec['parent'] or 'original'}"
    return f"[{evaluations:3d}/{budget:<3d}] {rec['id']:<6} {origin:<22} {rec['proposer']}: {rec['change'][:60]} -> {verdict}"
