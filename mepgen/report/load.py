"""What a report shows, read from the workspace's files only (never from another stage's code):

- a run: `.mepgen/runs/KERNEL/RUN/` (`run.json`, `trajectory.jsonl`, `best/kernel.cu`, `summary.md`);
- a batch: `.mepgen/batches/NAME/rows/*.json`, each kernel's run folder `.mepgen/runs/KERNEL/NAME/`;
- the patch state: `.mepgen/patches/KERNEL.diff` and `.mepgen/patches/KERNEL/manifest.json`;
- the application's speedup: `.mepgen/tune/report.json`, written by `mepgen tune` (when it ran).
"""
from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import MepgenError
from ..workspace import Workspace, read_jsonl

VERIFIED = "ok"


@dataclass
class KernelRun:
    kernel: str                      # the id (analysis.dense_matvec)
    name: str                        # the qualified name when known
    folder: Path | None              # the run folder; None: a batch row without one
    header: dict = field(default_factory=dict)
    attempts: list[dict] = field(default_factory=list)
    events: list[dict] = field(default_factory=list)
    row: dict | None = None          # the batch's row for this kernel
    patch: dict = field(default_factory=dict)

    @property
    def verified(self) -> list[dict]:
        return [a for a in self.attempts if a.get("status") == VERIFIED]

    @property
    def best(self) -> dict | None:
        wins = [a for a in self.verified if a.get("speedup") and a.get("faster")]
        return max(wins, key=lambda a: a["speedup"]) if wins else None

    @property
    def original_ms(self) -> float | None:
        if self.row and self.row.get("original_ms") is not None:
            return self.row["original_ms"]
        for a in self.attempts:
            t = (a.get("result") or {}).get("timed") or {}
            if t.get("baseline_median_ms"):
                return t["baseline_median_ms"]
        return None

    @property
    def peaks(self) -> dict:
        """GB/s and GFLOP/s the run measured on its GPU (run.json `gpu`); NaN or missing: not known."""
        gpu = self.header.get("gpu") or {}
        return {k: gpu.get(k) for k in ("peak_gbps", "peak_gflops") if _finite(gpu.get(k))} | \
            {"name": gpu.get("name") or "", "cc": gpu.get("cc")}

    @property
    def fidelity(self):
        """The MEP-vs-application fidelity ratio where a stage recorded one (a batch row, run.json, or the best
        attempt's result), else None."""
        for where in (self.row or {}, self.header, (self.best or {}).get("result") or {}):
            if where.get("fidelity") is not None:
                return where["fidelity"]
            if where.get("fidelity_ratio") is not None:
                return where["fidelity_ratio"]
        return None

    @property
    def stop_reason(self) -> str | None:
        if self.row and self.row.get("stop_reason"):
            return self.row["stop_reason"]
        stops = [e["message"] for e in self.events if e.get("event") in ("stopped", "stop")]
        return stops[-1] if stops else None


@dataclass
class Report:
    title: str
    kind: str                        # run | batch
    name: str
    app_root: Path
    kernels: list[KernelRun]
    tune: dict | None = None


def _finite(v) -> bool:
    return isinstance(v, (int, float)) and math.isfinite(v) and v > 0


def _json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, json.JSONDecodeError) as e:
        raise MepgenError(f"{path} is unreadable: {e}") from None


def load_run(ws: Workspace, folder: Path, row: dict | None = None) -> KernelRun:
    header = _json(folder / "run.json")
    records = read_jsonl(folder / "trajectory.jsonl")
    kernel = header.get("kernel") or folder.parent.name
    return KernelRun(kernel=kernel, name=(row or {}).get("name") or kernel.replace(".", "::"), folder=folder,
                     header=header, attempts=[r for r in records if r.get("kind") == "attempt"],
                     events=[r for r in records if r.get("kind") == "event"], row=row,
                     patch=patch_state(ws, kernel))


def patch_state(ws: Workspace, kernel: str) -> dict:
    """applied (and whether the file is still the patched one), a diff written but not applied, or none."""
    manifest = _json(ws.root / "patches" / kernel / "manifest.json")
    diff = ws.root / "patches" / f"{kernel}.diff"
    if manifest:
        target = ws.app_root / manifest.get("file", "")
        try:
            now = hashlib.sha256(target.read_bytes()).hexdigest()
        except OSError:
            now = None
        state = "applied" if now == manifest.get("patched_sha256") else \
            "applied, but the file changed since" if now != manifest.get("original_sha256") else "reverted by hand"
        return {"state": state, "file": manifest.get("file"), "when": manifest.get("applied"),
                "diff": str(diff) if diff.is_file() else None}
    if diff.is_file():
        return {"state": "diff written, not applied", "diff": str(diff)}
    return {"state": "not patched"}


def load_tune(ws: Workspace) -> dict | None:
    path = ws.root / "tune" / "report.json"
    return _json(path) if path.is_file() else None


def runs_of(ws: Workspace) -> list[Path]:
    return sorted((p.parent for p in (ws.root / "runs").glob("*/*/run.json")), key=lambda p: p.stat().st_mtime)


def batches_of(ws: Workspace) -> list[Path]:
    return sorted((p for p in (ws.root / "batches").glob("*") if (p / "rows").is_dir() or (p / "asked").is_dir()),
                  key=lambda p: p.stat().st_mtime)


def load_batch(ws: Workspace, folder: Path) -> Report:
    rows = {}
    for f in sorted((folder / "rows").glob("*.json")):
        row = _json(f)
        if row.get("kernel"):
            rows[row["kernel"]] = row
    kernels = []
    for kid, row in rows.items():
        run = ws.root / "runs" / kid / folder.name
        kernels.append(load_run(ws, run, row) if (run / "run.json").is_file() else
                       KernelRun(kernel=kid, name=row.get("name") or kid, folder=None, row=row,
                                 patch=patch_state(ws, kid)))
    return Report(title=f"mepgen optimize batch {folder.name}", kind="batch", name=folder.name, app_root=ws.app_root,
                  kernels=kernels, tune=load_tune(ws))


def choose(ws: Workspace, run: str | None, batch: str | None) -> Report:
    """The report asked for (`--run KERNEL/RUN` or `KERNEL`: its newest run; `--batch NAME`), else the newest run or
    batch of the workspace."""
    if run and batch:
        raise MepgenError("--run and --batch choose the report two ways: give one")
    if batch:
        folder = ws.root / "batches" / batch
        if not folder.is_dir():
            known = ", ".join(p.name for p in batches_of(ws)) or "none"
            raise MepgenError(f"no batch '{batch}' in {ws.root / 'batches'} (known: {known})")
        return load_batch(ws, folder)
    if run:
        kid, _, name = run.replace("::", ".").partition("/")
        folders = [p for p in runs_of(ws) if p.parent.name == kid and (not name or p.name == name)]
        if not folders:
            raise MepgenError(f"no optimize run '{run}' in {ws.root / 'runs'}: `mepgen optimize {kid}` writes one")
        return _single(ws, folders[-1])
    candidates = [(p.stat().st_mtime, "run", p) for p in runs_of(ws)] + \
        [(p.stat().st_mtime, "batch", p) for p in batches_of(ws)]
    if not candidates:
        raise MepgenError(f"nothing to report in {ws.root}: run `mepgen optimize KERNEL` (or --all) first")
    _, kind, folder = max(candidates, key=lambda c: c[0])
    return load_batch(ws, folder) if kind == "batch" else _single(ws, folder)


def _single(ws: Workspace, folder: Path) -> Report:
    k = load_run(ws, folder)
    return Report(title=f"mepgen optimize {k.name} ({folder.name})", kind="run", name=f"{k.kernel}/{folder.name}",
                  app_root=ws.app_root, kernels=[k], tune=load_tune(ws))
