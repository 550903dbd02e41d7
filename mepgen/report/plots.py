"""The report's plots, drawn offline with matplotlib (Agg) and returned as inline SVG text."""
from __future__ import annotations

import io
import re

from .load import KernelRun


def _pyplot():
    # matplotlib (about 0.7 s to import), loaded only when a report draws a plot
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _svg(fig) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})   # same plot, same bytes
    _pyplot().close(fig)
    text = buf.getvalue()
    return re.sub(r"^<\?xml[^>]*>\s*(<!DOCTYPE[^>]*>\s*)?", "", text)   # inline: the <svg> element alone


def trajectory(k: KernelRun) -> str | None:
    """Speedup over the original per candidate, in the order evaluated: verified (faster or not) as points on
    their speedup, rejected ones (compile error, fault, wrong result...) as crosses along the bottom."""
    if not k.attempts:
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 2.8))
    xs_ok, ys_ok, xs_win, ys_win, xs_bad = [], [], [], [], []
    best_so_far, curve = None, []
    for i, a in enumerate(k.attempts, start=1):
        s = a.get("speedup")
        if a.get("status") == "ok" and s:
            (xs_win if a.get("faster") else xs_ok).append(i)
            (ys_win if a.get("faster") else ys_ok).append(s)
            if a.get("faster"):
                best_so_far = max(best_so_far or 0.0, s)
        elif a.get("status") != "ok":
            xs_bad.append(i)
        curve.append(best_so_far if best_so_far is not None else 1.0)
    ax.axhline(1.0, color="#888", lw=0.8, ls="--", label="original")
    ax.step(range(1, len(curve) + 1), curve, where="post", color="#2a7", lw=1.2, label="best so far")
    ax.scatter(xs_win, ys_win, color="#2a7", s=22, zorder=3, label="verified, faster")
    ax.scatter(xs_ok, ys_ok, color="#57c", s=18, zorder=3, label="verified, not faster")
    bottom = min([1.0] + ys_ok + ys_win) * 0.9
    ax.scatter(xs_bad, [bottom] * len(xs_bad), marker="x", color="#c33", s=22, zorder=3, label="rejected")
    from matplotlib.ticker import MaxNLocator     # matplotlib: loaded with _pyplot, only for a plot
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("candidate (in the order evaluated)")
    ax.set_ylabel("speedup over the original")
    if max([1.0] + ys_win + ys_ok) / max(bottom, 1e-9) > 20:
        ax.set_yscale("log")
    ax.legend(fontsize=7, loc="upper left", frameon=False)
    ax.set_title(k.name, fontsize=9)
    return _svg(fig)


def roofline(k: KernelRun) -> str | None:
    """The verified candidates on the GPU's roofline (measured peaks from run.json): only when the run recorded
    both GB/s and GFLOP/s for them and both peaks; None otherwise (the page says why)."""
    peaks = k.peaks
    if "peak_gbps" not in peaks or "peak_gflops" not in peaks:
        return None
    pts = []
    for a in k.verified:
        t = (a.get("result") or {}).get("timed") or {}
        if t.get("gbps") and t.get("gflops"):
            pts.append((t["gflops"] / t["gbps"], t["gflops"], a is k.best, a.get("id")))
    if not pts:
        return None
    plt = _pyplot()
    bw, fl = peaks["peak_gbps"], peaks["peak_gflops"]
    lo = min(p[0] for p in pts + [(fl / bw / 100, 0, 0, 0)]) / 2
    hi = max(p[0] for p in pts + [(fl / bw * 10, 0, 0, 0)]) * 2
    xs = [lo * (hi / lo) ** (i / 200) for i in range(201)]
    fig, ax = plt.subplots(figsize=(5.2, 3.2))
    ax.plot(xs, [min(fl, x * bw) for x in xs], color="#333", lw=1.2,
            label=f"roof: {bw:.0f} GB/s, {fl:.0f} GFLOP/s (measured)")
    ax.scatter([p[0] for p in pts if not p[2]], [p[1] for p in pts if not p[2]], color="#57c", s=16,
               label="verified candidates")
    best = [p for p in pts if p[2]]
    if best:
        ax.scatter([best[0][0]], [best[0][1]], color="#2a7", s=40, marker="*", zorder=3, label=f"best ({best[0][3]})")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("FLOP per byte")
    ax.set_ylabel("GFLOP/s")
    ax.legend(fontsize=7, loc="lower right", frameon=False)
    ax.set_title(f"{k.name} on {peaks.get('name') or 'the GPU'}", fontsize=9)
    return _svg(fig)
