"""A small fake workspace for `mepgen report`: one optimize run, one batch of two kernels (one failed), an
applied patch and a tune report, written as optimize, patch and tune write them."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path


def attempt(i: int, status: str, speedup=None, faster=False, gbps=None, gflops=None, change="", stage="time"):
    timed = None if status != "ok" else {"median_ms": 1.0 / speedup, "baseline_median_ms": 1.0, "speedup": speedup,
                                         "gbps": gbps, "gflops": gflops}
    return {"kind": "attempt", "id": f"c{i}", "parent": None, "repair_of": None, "proposer": "library",
            "source": "library", "change": change or f"change {i}", "transformations": [], "launch": None,
            "strategy": "elite", "hash": f"h{i}", "status": status, "stage": stage if status != "ok" else "time",
            "median_ms": timed["median_ms"] if timed else None, "speedup": speedup if status == "ok" else None,
            "decision": "faster" if faster else "same", "faster": faster, "pct_roofline": 40.0 if faster else None,
            "feedback": "" if status == "ok" else f"{status}: element 3 is NaN", "time": 1.0 + i,
            "result": {"status": status, "timed": timed}}


def write_run(ws: Path, kernel: str, run: str, attempts: list[dict], peaks=(3000.0, 50000.0), fidelity=None):
    folder = ws / "runs" / kernel / run
    folder.mkdir(parents=True)
    header = {"kernel": kernel, "spec_sha256": "x", "strategy": "elite", "budget": 8,
              "gpu": {"name": "NVIDIA H100 80GB HBM3", "cc": "9.0", "peak_gbps": peaks[0], "peak_gflops": peaks[1]}}
    if fidelity is not None:
        header["fidelity"] = fidelity
    (folder / "run.json").write_text(json.dumps(header))
    lines = [json.dumps(a) for a in attempts]
    lines.append(json.dumps({"kind": "event", "event": "stopped", "message": "stopped after 4 evaluation(s): budget"}))
    (folder / "trajectory.jsonl").write_text("\n".join(lines) + "\n")
    (folder / "best").mkdir()
    (folder / "best" / "kernel.cu").write_text("__global__ void k() {}\n")
    return folder


def fake_workspace(app: Path, tune: bool = True) -> Path:
    ws = app / ".mepgen"
    ws.mkdir(parents=True)
    (ws / "inventory.json").write_text(json.dumps({"kernels": [], "app_root": str(app)}))
    good = [attempt(1, "compile_failed", stage="compile"), attempt(2, "ok", 1.4, True, 900.0, 220.0, "warp_per_row"),
            attempt(3, "ok", 0.9, False, 560.0, 140.0), attempt(4, "wrong_result", stage="verify"),
            attempt(5, "ok", 3.1, True, 2000.0, 500.0, "warp_per_row + vec=4")]
    write_run(ws, "analysis.dense_matvec", "solo", good, fidelity=0.98)
    write_run(ws, "analysis.dense_matvec", "batch-1", good)
    write_run(ws, "heat.diffuse_step", "batch-1", [attempt(1, "ok", 1.1, True, 1500.0, None)],
              fidelity={"app_ms": None, "mep_ms": None, "ratio": None, "ok": None, "why": "no capture: static MEP",
                        "tolerance": 0.25, "floor_us": 10.0, "forced": False})
    rows = ws / "batches" / "batch-1" / "rows"
    rows.mkdir(parents=True)
    (rows / "analysis.dense_matvec.json").write_text(json.dumps(
        {"kernel": "analysis.dense_matvec", "name": "analysis::dense_matvec", "status": "done", "original_ms": 1.0,
         "best_ms": 0.32, "speedup": 3.1, "pct_roofline": 67.0, "change": "warp_per_row + vec=4", "fidelity_ratio": 1.02,
         "fidelity": {"app_ms": 0.98, "mep_ms": 1.0, "ratio": 1.02, "ok": True, "why": "", "tolerance": 0.25,
                      "floor_us": 10.0, "forced": False}}))
    (rows / "heat.diffuse_step.json").write_text(json.dumps(
        {"kernel": "heat.diffuse_step", "name": "heat::diffuse_step", "status": "done", "original_ms": 0.5,
         "best_ms": 0.45, "speedup": 1.1, "pct_roofline": 50.0, "change": "block 256"}))
    (rows / "cg.spmv_csr.json").write_text(json.dumps(
        {"kernel": "cg.spmv_csr", "name": "cg::spmv_csr", "status": "failed", "error": "the worker died of signal 9"}))
    # an applied patch: the file is the patched one
    src = app / "src" / "analysis.cu"
    src.parent.mkdir(parents=True, exist_ok=True)
    src.write_text("patched\n")
    pdir = ws / "patches" / "analysis.dense_matvec"
    pdir.mkdir(parents=True)
    (pdir / "manifest.json").write_text(json.dumps(
        {"kernel": "analysis::dense_matvec", "file": "src/analysis.cu", "original_sha256": "0" * 64,
         "patched_sha256": hashlib.sha256(b"patched\n").hexdigest(), "applied": "2026-11-28T05:00:00+00:00"}))
    (ws / "patches" / "analysis.dense_matvec.diff").write_text("--- a\n+++ b\n")
    if tune:
        (ws / "tune").mkdir()
        (ws / "tune" / "report.json").write_text(json.dumps(
            {"app": str(app), "command": ["./heatcg", "512"], "app_speedup": 1.87, "check_passed": True,
             "app_gpu_speedup": 2.4, "app_verdict": "faster", "outcome": "1 patch kept", "before": {"runs": []},
             "kernels": [{"id": "analysis.dense_matvec", "kernel": "analysis::dense_matvec", "capture": "captured",
                          "todo": [], "optimize": "done", "fidelity_ratio": 1.02, "mep_speedup": 3.1,
                          "app_kernel_speedup": 2.9, "change": "warp_per_row", "patch": "kept", "patch_why": None},
                         {"id": "heat.diffuse_step", "kernel": "heat::diffuse_step", "capture": "captured",
                          "optimize": "done", "mep_speedup": 1.1, "patch": "reverted",
                          "patch_why": "the application got slower"}]}))
    return ws
