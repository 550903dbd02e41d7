"""The HTML page: one file, no external resources (CSS inline, plots as inline SVG)."""
from __future__ import annotations

import datetime

import jinja2

from .. import __version__
from ..templating import template_loader
from . import plots
from .load import KernelRun, Report


def _fmt(v, pattern: str = "{:.4g}") -> str:
    return "–" if v is None else pattern.format(v)


def kernel_view(k: KernelRun) -> dict:
    best = k.best
    row = k.row or {}
    roof = plots.roofline(k)
    peaks = k.peaks
    if roof is None:
        why = ("no candidate evaluated" if not k.attempts else "the run recorded no measured peaks" if "peak_gbps" not in peaks or "peak_gflops" not in peaks
               else "no verified candidate has both GB/s and GFLOP/s (mep.yaml `work.flops` unset: a memory-bound "
                    "kernel is placed by its % of peak bandwidth)")
    else:
        why = None
    # a batch's row is what the batch reported; a run alone: its best verified candidate
    src = row if row else {"best_ms": (best or {}).get("median_ms"), "speedup": (best or {}).get("speedup"),
                           "pct_roofline": (best or {}).get("pct_roofline")}
    best_ms, speedup, pct = src.get("best_ms"), src.get("speedup"), src.get("pct_roofline")
    fidelity = k.fidelity
    fidelity_text, fidelity_note = fidelity_of(fidelity)
    return {
        "id": k.kernel, "name": k.name, "folder": str(k.folder) if k.folder else None,
        "status": row.get("status") or ("done" if k.attempts else "no attempts"), "error": row.get("error"),
        "original_ms": _fmt(k.original_ms), "best_ms": _fmt(best_ms), "speedup": _fmt(speedup, "{:.2f}x"),
        "pct_roofline": _fmt(pct, "{:.0f}%"), "change": (best or {}).get("change") or row.get("change") or
        ("no verified win" if k.attempts else "–"),
        "candidates": len(k.attempts), "verified": len(k.verified),
        "rejected": sum(1 for a in k.attempts if a.get("status") != "ok"),
        "stop_reason": k.stop_reason, "fidelity": fidelity_text, "fidelity_note": fidelity_note,
        "patch": {"state": k.patch.get("state"), "file": k.patch.get("file"), "when": k.patch.get("when"),
                  "diff": k.patch.get("diff")},
        "gpu": peaks.get("name") or "", "trajectory_svg": plots.trajectory(k), "roofline_svg": roof,
        "roofline_why": why,
        "attempts": [{"id": a.get("id"), "proposer": a.get("proposer"), "change": a.get("change") or "",
                      "status": a.get("status"), "stage": a.get("stage"), "speedup": _fmt(a.get("speedup"), "{:.2f}x"),
                      "faster": a.get("faster"),
                      "feedback": (a.get("feedback") or "").splitlines()[0][:160] if a.get("status") != "ok" else ""}
                     for a in k.attempts],
    }


def fidelity_of(fidelity) -> tuple[str | None, str | None]:
    """(the ratio for the table, a sentence for the kernel's section) from what optimize recorded: the guard's
    record (mepgen/fidelity.py: ratio, ok, why, tolerance, forced) or a bare ratio."""
    if isinstance(fidelity, (int, float)):
        return f"{fidelity:.3f}", None
    if not isinstance(fidelity, dict):
        return None, None
    ratio = fidelity.get("ratio")
    if ratio is None:
        return None, f"fidelity not measured: {fidelity.get('why') or 'no application time recorded'}"
    verdict = {True: "within the guard", False: "OUTSIDE the guard"}.get(fidelity.get("ok"), "")
    if fidelity.get("forced"):
        verdict += ", optimized anyway (--force)"
    tol = fidelity.get("tolerance")
    band = f" (±{tol:.0%}" + (f" or {fidelity['floor_us']:g} us" if fidelity.get("floor_us") else "") + ")" \
        if isinstance(tol, (int, float)) else ""
    note = f"fidelity (MEP vs application time) {ratio:.3f}" + (f": {verdict}{band}" if verdict else "")
    if fidelity.get("l2") == "warm":
        note += "; the MEP was timed from a warm L2, as the application ran it (flushed, it was off the guard)"
    return f"{ratio:.3f}" + ("" if fidelity.get("ok") is not False else " !"), note


#: the per-kernel columns of `mepgen tune`'s report.json worth a table, in this order (mepgen/tune/report.py)
TUNE_COLUMNS = ["kernel", "capture", "configurations", "optimize", "fidelity_ratio", "mep_speedup", "app_kernel_speedup", "change",
                "patch", "patch_why", "speedup", "patched"]


def tune_view(tune: dict | None) -> dict | None:
    """`mepgen tune`'s report.json as it is: the application's speedup, its check, and its per-kernel rows."""
    if not tune:
        return None
    rows = next((tune[key] for key in ("kernels", "rows", "per_kernel") if isinstance(tune.get(key), list)), [])
    rows = [r for r in rows if isinstance(r, dict)]
    present = {c for r in rows for c, v in r.items() if not isinstance(v, (dict, list))}
    columns = [c for c in TUNE_COLUMNS if c in present] or sorted(present)
    scalars = {k: v for k, v in tune.items() if not isinstance(v, (dict, list))
               and k not in ("app_speedup", "check_passed", "app")}
    if isinstance(tune.get("command"), list):
        scalars["command"] = " ".join(map(str, tune["command"]))
    return {"app_speedup": _fmt(tune.get("app_speedup"), "{:.3f}x"), "check_passed": tune.get("check_passed"),
            "columns": columns, "rows": [[_cell(r.get(c)) for c in columns] for r in rows],
            "other": {k: _cell(v) for k, v in scalars.items()}}


def _cell(v) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return "–" if v is None else str(v)


def render(report: Report) -> str:
    env = jinja2.Environment(loader=template_loader("report"), autoescape=True, trim_blocks=True, lstrip_blocks=True,
                             undefined=jinja2.StrictUndefined)
    return env.get_template("page.html.j2").render(
        title=report.title, kind=report.kind, name=report.name, app_root=str(report.app_root),
        kernels=[kernel_view(k) for k in report.kernels], tune=tune_view(report.tune), version=__version__,
        written=datetime.datetime.now().isoformat(timespec="seconds"))
