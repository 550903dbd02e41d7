"""`.mepgen/tune/report.json` and `report.md`: per kernel what the path did, for the application its speedup and
whether its check passed."""
from __future__ import annotations

import json
from pathlib import Path

import click

from ..workspace import write_atomic, write_json
from .appruns import amdahl


def _f(v, pattern: str) -> str:
    return "-" if v is None else pattern.format(v)


def _change(k: dict) -> str:
    """The winning change: its chain of transformations when it took several steps, else its description."""
    chain = [c for c in (k.get("chain") or []) if c]
    if len(chain) > 1:
        return " + ".join(chain)
    return (k.get("change") or "-")[:60]


class Report:
    def __init__(self, folder: Path, app_root: Path, command: list[str], build: str, check: str | None, runs: int):
        self.folder, self.app_root = folder, app_root
        self.command, self.build, self.check, self.runs = command, build, check, runs
        self.kernels: dict[str, dict] = {}
        self.before: dict | None = None
        self.after: dict | None = None
        self.patches: dict = {}
        self.not_hotspots: dict = {}
        self.outcome = ""

    def add_captures(self, outcomes: list[dict]) -> None:
        for o in outcomes:
            kid = Path(o["mep"]).name if o.get("mep") else o["kernel"].replace("::", ".")
            self.kernels[kid] = {
                "id": kid, "kernel": o["kernel"], "capture": o.get("outcome"),
                "capture_reason": o.get("reason") or o.get("mep_error"), "app_kernel_ms": o.get("kernel_ms"),
                "mep_complete": bool(o.get("complete")), "todo": o.get("todo") or [],
                "launched_as": o.get("launched_as"), "app_gpu_ms": o.get("app_gpu_ms"),
                "launch_configs": _configs(o), "configurations": len(_configs(o)) or None,
                "optimize": None, "fidelity_ratio": None, "fidelity_ok": None, "forced": False,
                "mep_speedup": None, "change": None, "patch": None, "patch_why": None}

    def add_rows(self, rows: dict) -> None:
        for kid, r in rows.items():
            k = self.kernels.setdefault(kid, {"id": kid, "kernel": r.get("name") or kid})
            fid = r.get("fidelity") or {}
            k.update(optimize=r.get("status"), optimize_error=r.get("error"), mep_original_ms=r.get("original_ms"),
                     mep_best_ms=r.get("best_ms"), mep_speedup=r.get("speedup"), change=r.get("change"),
                     chain=r.get("chain"),
                     fidelity_ratio=r.get("fidelity_ratio"), fidelity_ok=fid.get("ok"), forced=bool(fid.get("forced")),
                     run=r.get("run"))

    def to_dict(self) -> dict:
        for kid, why in self.not_hotspots.items():
            if kid in self.kernels and not self.kernels[kid].get("optimize"):
                self.kernels[kid].update(optimize="skipped", optimize_error=why)
        for kid, p in (self.patches or {}).items():
            if kid in self.kernels:
                self.kernels[kid].update(patch=p["state"], patch_why=p.get("why") or None,
                                         nvcc_flags=p.get("nvcc_flags") or [], patch_speedup=p.get("speedup"))
        cmp = (self.after or {}).get("comparison") or {}
        timing = (self.after or {}).get("timing") or {}
        gb = ((self.before or {}).get("gpu") or {}).get("kernels") or {}
        ga = (timing.get("gpu") or {}).get("kernels") or {}
        for k in self.kernels.values():
            b, a = gb.get(k.get("launched_as") or ""), ga.get(k.get("launched_as") or "")
            k["app_gpu_total_ms_before"] = b["total_ms"] if b else None
            k["app_gpu_total_ms_after"] = a["total_ms"] if a else None
            k["app_kernel_speedup"] = round(b["total_ms"] / a["total_ms"], 4) if b and a and a["total_ms"] > 0 else None
        tb = ((self.before or {}).get("gpu") or {}).get("gpu_total_ms")
        ta = (timing.get("gpu") or {}).get("gpu_total_ms")
        kept = (self.after or {}).get("kept") or []
        check_passed = None
        if self.before is not None:
            check_passed = bool(self.before.get("ok")) and (not kept or bool(timing.get("ok")))
        return {"app": str(self.app_root), "command": self.command, "build": self.build, "check": self.check,
                "runs": self.runs, "before": self.before, "after": timing or None,
                "app_speedup": cmp.get("speedup") if kept else None, "app_noise": cmp.get("noise"),
                "app_gpu_ms_before": tb, "app_gpu_ms_after": ta,
                "app_gpu_speedup": round(tb / ta, 4) if tb and ta else None,
                "app_verdict": cmp.get("verdict") if kept else None, "check_passed": check_passed,
                "app_verdict_why": cmp.get("why") or None, "bound": amdahl(self.before or {}), "app_expected_speedup": cmp.get("expected_speedup"),
                "kernels_share": cmp.get("kernels_share"),
                "kept": kept, "note": (self.after or {}).get("note", ""), "outcome": self.outcome or self._outcome(kept, cmp),
                "kernels": list(self.kernels.values())}

    def _outcome(self, kept, cmp) -> str:
        if self.after is None:
            return "unfinished"
        if not kept:
            note = (self.after or {}).get("note") or "no patch kept"
            return note + (f" ({cmp['why']})" if cmp.get("why") else "")
        gpu = (f"; its kernels {cmp['gpu_speedup']}x on the GPU, {cmp['kernels_share']:.2%} of its run: the time "
               f"they saved would make it {cmp['expected_speedup']}x faster" if cmp.get("gpu_speedup") else "")
        return (f"{len(kept)} patch(es) kept; the application {cmp.get('verdict')}: {cmp.get('speedup')}x "
                f"(median of {self.runs} runs, noise {cmp.get('noise', 0):.1%}){gpu}"
                + (f" ({cmp['why']})" if cmp.get("why") else ""))

    def markdown(self, d: dict) -> str:
        b = d["before"] or {}
        a = d["after"] or {}
        lines = [f"# mepgen tune: {' '.join(d['command'])}", "",
                 f"- application: `{d['app']}`; build: `{d['build']}`; check: `{d['check'] or 'its exit code'}`",
                 f"- before: {_f(b.get('median_s'), '{:.3f}')} s median of {len(b.get('runs') or [])} run(s), "
                 f"spread {_f(b.get('spread'), '{:.1%}')}",
                 f"- after: {_f(a.get('median_s'), '{:.3f}')} s median, spread {_f(a.get('spread'), '{:.1%}')}",
                 f"- application speedup: {_f(d['app_speedup'], '{:.3f}x')} ({d['app_verdict'] or '-'}); "
                 f"check passed: {d['check_passed']}",
                 f"- all kernels' time on the GPU in the application: {_f(d['app_gpu_ms_before'], '{:.4g}')} ms before, "
                 f"{_f(d['app_gpu_ms_after'], '{:.4g}')} ms after ({_f(d['app_gpu_speedup'], '{:.3f}x')})",
                 *([f"- the kernels are {d['bound']['kernels_share']:.2%} of the run on the GPU: at most "
                    f"{_f(d['bound']['max_app_speedup'], '{:.4g}x')} from them"] if d.get("bound") else []),
                 f"- outcome: {d['outcome']}", "",
                 "| kernel | captured | app ms | MEP/app time | optimize | MEP speedup | change | patch | in-app GPU ms before / after |",
                 "|---|---|---|---|---|---|---|---|---|"]
        for k in d["kernels"]:
            cap = k.get("capture") or "-"
            if cap == "captured" and not k.get("mep_complete"):
                cap = "captured, MEP incomplete"
            patch = (k.get("patch") or "-") + (f": {k['patch_why']}" if k.get("patch_why") else "")
            opt = (k.get("optimize") or "-") + (" (forced)" if k.get("forced") else "")
            if k.get("optimize") == "skipped":
                opt = "skipped: " + (k.get("optimize_error") or "").split(" in the application")[0]
            inapp = (f"{_f(k.get('app_gpu_total_ms_before'), '{:.4g}')} / {_f(k.get('app_gpu_total_ms_after'), '{:.4g}')}"
                     + (f" ({k['app_kernel_speedup']:.2f}x)" if k.get("app_kernel_speedup") else ""))
            lines.append(f"| {k['kernel']} | {cap} | {_f(k.get('app_gpu_ms') or k.get('app_kernel_ms'), '{:.4g}')} | "
                         f"{_f(k.get('fidelity_ratio'), '{:.2f}')} | {opt} | {_f(k.get('mep_speedup'), '{:.2f}x')} | "
                         f"{_change(k).replace('|', '/')} | {patch.replace('|', '/')[:80]} | {inapp} |")
        several = [k for k in d["kernels"] if len(k.get("launch_configs") or []) > 1]
        if several:     # the MEP verifies one launch: say which, and how much of the kernel's time the others take
            lines += ["", "## Kernels the application launched with several configurations", "",
                      "The MEP measures and verifies the captured launch; the library proposed no new block where "
                      "the blocks differ, and patch refuses what cannot hold at the others (mep.yaml "
                      "`launch.observed`). The application's own check is what runs the others.", ""]
            for k in several:
                c = k["launch_configs"]
                total = sum(x["total_ms"] for x in c) or 1.0
                shown = "; ".join(f"grid {tuple(x['grid'])} block {tuple(x['block'])}: {x['launches']} launch(es), "
                                  f"{100 * x['total_ms'] / total:.0f} % of its time" for x in c[:6])
                lines.append(f"- {k['kernel']}: {len(c)} configurations ({shown}{'; ...' if len(c) > 6 else ''})")
        why = [k for k in d["kernels"] if k.get("patch_why")]
        if why:      # the table cuts a reason at 80 characters: each in full, with what to do by hand
            lines += ["", "## Why a winner was not patched as it is", ""]
            lines += [f"- {k['kernel']} ({k.get('patch') or '-'}): {k['patch_why']}" for k in why]
        return "\n".join(lines) + "\n"

    def write(self, state, as_json: bool) -> dict:
        d = self.to_dict()
        write_json(self.folder / "report.json", d)
        text = self.markdown(d)
        write_atomic(self.folder / "report.md", text)
        if as_json:
            click.echo(json.dumps(d, indent=1))
        else:
            click.echo(text, nl=False)
            click.echo(f"wrote {self.folder / 'report.md'}")
        return d


def _configs(outcome: dict) -> list[dict]:
    """The launch configurations a capture saw (CUPTI), the most time first; [] where unknown."""
    return [c for c in ((outcome.get("app_gpu") or {}).get("configs") or []) if "grid" in c]
