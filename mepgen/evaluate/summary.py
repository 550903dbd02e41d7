"""The readable summary `mepgen run` prints: one block per evaluated kernel file."""
from __future__ import annotations

from .results import EvalResult

_VERDICT = {"rejected_by_rules": "REJECTED (source rules)", "compile_failed": "COMPILE FAILED",
            "runtime_fault": "RUNTIME FAULT", "wrong_result": "WRONG RESULT", "impossible": "IMPOSSIBLE TIMING",
            "mep_error": "MEP PROBLEM",
            "not_timed": "VERIFIED, NOT TIMED (time limit)"}


def _compile_line(r: EvalResult) -> str | None:
    c = r.compile
    if c is None:
        return None
    parts = [f"compile {'cached' if c.cached else f'{c.seconds:.1f} s'}"]
    if c.registers is not None:
        parts.append(f"{c.registers} registers")
    if c.spill_stores or c.spill_loads:
        parts.append(f"spills {c.spill_stores or 0} B stored / {c.spill_loads or 0} B loaded")
    elif c.spill_stores is not None:
        parts.append("no spills")
    if c.shared_bytes:
        parts.append(f"{c.shared_bytes} B static shared")
    return ", ".join(parts)


def _timing_lines(r: EvalResult) -> list[str]:
    t = r.timed
    if t is None:
        return []
    line = f"time {t.median_ms:.4g} ms median of {t.launches} launches in {t.rounds} round(s), spread {t.spread:.1%}"
    lines = [line]
    rate = []
    if t.gbps is not None:
        pct = [f"{t.pct_peak_bw:.0f}% of measured peak"] if t.pct_peak_bw is not None else []
        if getattr(t, "pct_stream", None) is not None:
            pct.append(f"{t.pct_stream:.0f}% of a perfect stream of these bytes")
        rate.append(f"{t.gbps:.0f} GB/s" + (f" ({'; '.join(pct)})" if pct else ""))
    if t.gflops is not None:
        rate.append(f"{t.gflops:.0f} GFLOP/s" + (f" ({t.pct_peak_flops:.0f}% of peak)" if t.pct_peak_flops is not None else ""))
    if rate:
        lines.append(", ".join(rate))
    if t.why:
        lines.append(t.why)
    return lines


def render(r: EvalResult) -> str:
    if r.ok and r.timed is not None and r.timed.decision in ("faster", "same", "slower"):
        verdict = r.timed.decision.upper() + (f" x{r.timed.speedup:.3f}" if r.timed.speedup else "")
    elif r.ok and r.stage in ("lint", "compile"):
        verdict = "COMPILED"
    elif r.ok:
        verdict = "OK"
    else:
        verdict = _VERDICT.get(r.status, r.status.upper())
    head = f"{r.name}: {verdict}" + (f"  [{r.device}]" if r.device else "")
    body = []
    comp = _compile_line(r)
    if comp:
        body.append(comp)
    if r.stage in ("time", "done") and r.status in ("ok", "impossible"):
        body.append(f"verified on {r.input_sets} input set(s) and re-checked after timing")
    body += _timing_lines(r)
    if not r.ok:
        body += r.feedback().splitlines()[:20]
    if r.profile:
        body.append("profile: " + ", ".join(f"{k} {v:g}" if isinstance(v, float) else f"{k} {v}"
                                            for k, v in r.profile.items()))
    body += r.notes
    return "\n".join([head] + [f"    {b}" for b in body])
