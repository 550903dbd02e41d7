"""The readable end of a run: `summary.md` (best variant, its chain, every attempt) and `best/kernel.cu`."""
from __future__ import annotations

import json
from pathlib import Path

import click

from ..workspace import write_atomic
from .proposer import Attempt
from .search import Outcome
from .trajectory import Trajectory, pct_roofline


#: a memory-bound kernel's bandwidth against one perfect streaming launch of its bytes (peaks.Peaks.stream_gbs)
STREAM = " ({:.0f}% of what one perfect streaming launch of the same bytes reaches)"


def chain(best: Attempt | None, attempts: dict[str, Attempt]) -> list[Attempt]:
    """The attempts from the original to `best`, repairs included, oldest first."""
    out = []
    a = best
    while a is not None:
        out.append(a)
        nxt = a.repair_of or a.parent
        a = attempts.get(nxt) if nxt else None
    return out[::-1]


def chain_names(best: Attempt, attempts: list[Attempt]) -> list[str]:
    """The winner's transformations by name, oldest first, with an inherited step spelled out
    (`inherited:spread_iterations`): a library chain built on an inherited attempt names that step `inherited`
    only, and the inherited attempt on the path holds what it replayed."""
    inherited = [a for a in chain(best, {x.id: x for x in attempts}) if a.proposal.source == "inherited"]
    out = []
    for t in best.proposal.transformations:
        name = t.get("name")
        if name == "inherited" and inherited:
            name = "inherited:" + "+".join(x.get("name", "?") for x in inherited.pop(0).proposal.transformations)
        out.append(name)
    return out


def _fmt(v, pattern: str, none: str = "-") -> str:
    return none if v is None else pattern.format(v)


def write(traj: Trajectory, outcome: Outcome, kernel: str, baseline=None, command: str = "") -> Path | None:
    """Write summary.md and best/kernel.cu; returns the path of best/kernel.cu (None: no verified win)."""
    by_id = {a.id: a for a in outcome.attempts}
    best = outcome.best
    best_path = traj.write_best(best.proposal.text) if best is not None else None
    lines = [f"# mepgen optimize {kernel}", ""]
    if command:
        lines += [f"`{command}`", ""]
    base_t = getattr(baseline, "timed", None)
    if base_t is not None:
        lines.append(f"- original: {base_t.median_ms:.4g} ms median"
                     + _fmt(pct_roofline(baseline), ", {:.0f}% of roofline", "")
                     + _fmt(getattr(base_t, "pct_stream", None), STREAM, ""))
    if base_t is not None and getattr(base_t, "plan", ""):
        lines.append(f"- timing: {base_t.plan} (each candidate's plan is in its result)")
    if traj.header.get("backend"):
        lines.append(f"- backend: {traj.header['backend']}"
                     + (f" ({traj.header['backend_why']})" if traj.header.get("backend_why") else ""))
    lines.append(f"- evaluations: {outcome.evaluations}; stopped: {outcome.stop_reason}")
    for name, why in outcome.unavailable.items():
        lines.append(f"- proposer {name} unavailable: {why}")
    if best is not None:
        t = best.result.timed
        lines += [f"- **best: {best.id}**, {t.median_ms:.4g} ms median, **{t.speedup:.2f}x** over the original "
                  f"({t.why})" + _fmt(pct_roofline(best.result), ", {:.0f}% of roofline", "")
                  + _fmt(getattr(t, "pct_stream", None), STREAM, ""),
                  f"- best kernel: `{best_path}`",
                  f"- apply it: `mepgen patch {kernel} --from {best_path}`", "", "## The winning chain", ""]
        for a in chain(best, by_id):
            how = "repair of " + a.repair_of if a.repair_of else "from " + (a.parent or "the original")
            sp = _fmt(a.result.timed.speedup if a.ok and a.result.timed else None, "{:.2f}x", a.result.status)
            lines.append(f"1. {a.id} ({how}, {a.proposal.source}): {a.proposal.change} -> {sp}")
            if a.proposal.transformations:
                lines.append("   transformations: " + ", ".join(
                    f"{t.get('name')}({', '.join(f'{k}={v}' for k, v in (t.get('params') or {}).items())})"
                    for t in a.proposal.transformations))
    else:
        lines.append("- no verified variant was faster than the original")
    lines += ["", "## Attempts", "", "| id | from | proposer | change | status | median ms | speedup | roofline |",
              "|---|---|---|---|---|---|---|---|"]
    for rec in traj.attempts():
        origin = f"repair of {rec['repair_of']}" if rec.get("repair_of") else (rec.get("parent") or "original")
        change = (rec.get("change") or "").replace("|", "\\|")[:90]
        status = rec["status"] + (f" ({rec['decision']})" if rec.get("decision") else "")
        lines.append(f"| {rec['id']} | {origin} | {rec['proposer']} | {change} | {status} | "
                     f"{_fmt(rec.get('median_ms'), '{:.4g}')} | {_fmt(rec.get('speedup'), '{:.2f}x')} | "
                     f"{_fmt(rec.get('pct_roofline'), '{:.0f}%')} |")
    failures = [r for r in traj.attempts() if r["status"] not in ("ok", "not_timed") and r.get("feedback")]
    if failures:
        lines += ["", "## Evidence of failures", ""]
        for rec in failures:
            first = rec["feedback"].strip().splitlines()[:4]
            lines.append(f"- {rec['id']} ({rec['status']} at {rec['stage']}): " + " / ".join(first)[:300])
    write_atomic(traj.folder / "summary.md", traj.redact("\n".join(lines) + "\n"))
    return best_path


def write_pending(folder: Path, kernel: str, doing: str, state: str = "still running") -> None:
    """summary.md before anything was evaluated: a run killed now still leaves one that says where it was."""
    write_atomic(Path(folder) / "summary.md", f"# mepgen optimize {kernel}\n\n- {state}: {doing}\n")


def print_outcome(name: str, run_dir: Path, outcome, best_path, baseline, as_json: bool, fid=None) -> None:
    """The run's outcome on stdout: JSON (`--json`: the fidelity, the baseline, the best with its whole chain), or
    three lines (what was evaluated, the best and how to apply it, where summary.md is)."""
    best = outcome.best
    if as_json:
        click.echo(json.dumps({"fidelity": fid.to_dict() if fid is not None else None,
            "kernel": name, "run": str(run_dir), "evaluations": outcome.evaluations, "stop_reason": outcome.stop_reason,
            "baseline_ms": baseline.timed.median_ms if baseline.timed else None,
            "baseline_pct_roofline": pct_roofline(baseline),
            "plan": baseline.timed.plan if baseline.timed else None,
            "best": None if best is None else {"id": best.id, "median_ms": best.result.timed.median_ms,
                                                # the original's timing the speedup was judged against
                                                "baseline_median_ms": best.result.timed.baseline_median_ms,
                                                "speedup": best.result.timed.speedup, "change": best.proposal.change,
                                                # the whole winning chain (the change is its last step only)
                                                "chain": chain_names(best, outcome.attempts),
                                                "pct_roofline": pct_roofline(best.result),
                                                "kernel": str(best_path)},
            "unavailable": outcome.unavailable, "summary": str(run_dir / "summary.md")}, indent=1))
        return
    click.echo(f"{outcome.evaluations} candidate(s) evaluated; stopped: {outcome.stop_reason}")
    if best is None:
        click.echo("no verified variant was faster than the original")
    else:
        t = best.result.timed
        click.echo(f"best: {best.id}, {t.median_ms:.4g} ms vs {t.baseline_median_ms or 0:.4g} ms, {t.speedup:.2f}x "
                   f"({best.proposal.change})")
        click.echo(f"apply it: mepgen patch {name} --from {best_path}")
    click.echo(f"wrote {run_dir / 'summary.md'}")
