"""Turn launch times into medians, a noise estimate and a decision: faster, same or slower.

A candidate counts as faster only when its gain exceeds the measured noise. Baseline and candidate are
timed in alternating rounds of the same session (A B A B ...), so drift in clocks or temperature hits both;
the noise is the larger of (a) how much each side's round medians disagree with each other and (b) twice
the bootstrap standard error of each side's median. On top of that, the candidate must win every round.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: smallest relative gain ever called a win, whatever the measured noise
MIN_GAIN = 0.01
#: host-timed launches may exceed event-timed ones by launch overhead; beyond this (ms), work escaped
ESCAPE_SLACK_MS = 0.02
_BOOTSTRAP = 200


@dataclass
class Summary:
    median_ms: float
    spread: float          # interquartile range / median
    min_ms: float
    max_ms: float
    launches: int
    round_medians_ms: list[float]


def summarize(rounds: list[list[float]]) -> Summary:
    """Pool the launches of every round; keep each round's median for the noise estimate."""
    rounds = [list(r) for r in rounds if len(r)]
    if not rounds:
        raise ValueError("no launch times")
    allt = np.concatenate([np.asarray(r, dtype=np.float64) for r in rounds])
    med = float(np.median(allt))
    q1, q3 = np.percentile(allt, [25, 75])
    return Summary(median_ms=med, spread=float((q3 - q1) / med) if med > 0 else 0.0,
                   min_ms=float(allt.min()), max_ms=float(allt.max()), launches=int(allt.size),
                   round_medians_ms=[float(np.median(r)) for r in rounds])


def round_range(round_medians: list[float]) -> float:
    """Relative range of repeated medians: (max - min) / median; 0 with fewer than two rounds."""
    if len(round_medians) < 2:
        return 0.0
    m = np.asarray(round_medians, dtype=np.float64)
    mid = float(np.median(m))
    return float((m.max() - m.min()) / mid) if mid > 0 else 0.0


def bootstrap_error(times: np.ndarray, seed: int = 0) -> float:
    """Relative standard error of the median, by resampling (deterministic: a fixed seed)."""
    if times.size < 2:
        return 0.0
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, times.size, size=(_BOOTSTRAP, times.size))
    meds = np.median(times[idx], axis=1)
    mid = float(np.median(times))
    return float(meds.std() / mid) if mid > 0 else 0.0


def noise(rounds: list[list[float]]) -> float:
    allt = np.concatenate([np.asarray(r, dtype=np.float64) for r in rounds if len(r)])
    return max(round_range([float(np.median(r)) for r in rounds if len(r)]), 2.0 * bootstrap_error(allt))


@dataclass
class Decision:
    decision: str          # faster | same | slower
    speedup: float         # baseline median / candidate median
    noise: float
    threshold: float
    why: str


def decide(baseline: list[list[float]], candidate: list[list[float]], min_gain: float = MIN_GAIN) -> Decision:
    """Compare interleaved rounds of launch times (ms) of the baseline and a candidate."""
    b, c = summarize(baseline), summarize(candidate)
    nz = max(noise(baseline), noise(candidate))
    threshold = max(nz, min_gain)
    speedup = b.median_ms / c.median_ms if c.median_ms > 0 else float("inf")
    pairs = list(zip(b.round_medians_ms, c.round_medians_ms))
    wins = sum(1 for bm, cm in pairs if cm < bm)
    numbers = (f"candidate {c.median_ms:.4g} ms vs baseline {b.median_ms:.4g} ms "
               f"(x{speedup:.3f}; noise {nz:.1%}, threshold {threshold:.1%}; won {wins}/{len(pairs)} rounds)")
    if c.median_ms < b.median_ms * (1.0 - threshold) and wins == len(pairs):
        return Decision("faster", speedup, nz, threshold, f"faster: {numbers}")
    if c.median_ms > b.median_ms * (1.0 + threshold):
        return Decision("slower", speedup, nz, threshold, f"slower: {numbers}")
    return Decision("same", speedup, nz, threshold, f"not distinguishable from the baseline: {numbers}")


def timer_escape(event_median_ms: float, sync_ms: list[float]) -> str | None:
    """Why the event-timed median cannot be the kernel's time, or None.

    `sync_ms` is the host-timed cost of back-to-back launches followed by a device synchronization, per
    launch (the harness's `sync_ms`, no L2 flush, so if anything faster than the event times). Events on the
    launch stream far below it mean the work ran somewhere the events do not see (another stream, a thread).
    """
    if not sync_ms:
        return None
    host = float(np.median(sync_ms))
    if event_median_ms < 0.5 * host and host - event_median_ms > ESCAPE_SLACK_MS:
        return (f"events time the launch at {event_median_ms:.4g} ms, but launches synchronized on the host take "
                f"{host:.4g} ms each: the work escaped the timed stream")
    return None


# --- sequential timing against a baseline timed once per run ---------------------------------------------
#
# The original is timed once per run (Evaluator.baseline_result); a candidate's session times the candidate in
# the plan's rounds with a few launches of the original among them (the controls). The verdict is still decide()'s
# on the stored baseline's rounds and the candidate's; what changes is when timing stops:
# - settled(): after each round from MIN_ROUNDS on, the session stops when decide() gives a verdict and a bootstrap
#   interval of the ratio candidate/baseline lies on that verdict's side of the threshold (a candidate 30x faster
#   or slower stops at MIN_ROUNDS; one near the threshold gets every round of the plan, as before);
# - drift(): the controls say whether the original still runs at its stored speed (clocks, temperature); when it
#   moved beyond the noise, the evaluator times the original again before it decides anything.

#: rounds a candidate is timed before an early verdict (decide()'s every-round win then covers two rounds)
MIN_ROUNDS = 2
#: two-sided level of the ratio's bootstrap interval in settled()
CONFIDENCE = 0.99


def ratio_interval(baseline: list[list[float]], candidate: list[list[float]], level: float = CONFIDENCE,
                   seed: int = 0) -> tuple[float, float]:
    """A bootstrap interval of median(candidate) / median(baseline) over the pooled launches of each side
    (deterministic: a fixed seed)."""
    b = np.concatenate([np.asarray(r, dtype=np.float64) for r in baseline if len(r)])
    c = np.concatenate([np.asarray(r, dtype=np.float64) for r in candidate if len(r)])
    rng = np.random.default_rng(seed)
    mb = np.median(b[rng.integers(0, b.size, size=(_BOOTSTRAP, b.size))], axis=1)
    mc = np.median(c[rng.integers(0, c.size, size=(_BOOTSTRAP, c.size))], axis=1)
    ratios = mc / np.where(mb > 0, mb, np.inf)
    tail = (1.0 - level) / 2.0 * 100.0
    lo, hi = np.percentile(ratios, [tail, 100.0 - tail])
    return float(lo), float(hi)


def settled(baseline: list[list[float]], candidate: list[list[float]], min_gain: float = MIN_GAIN,
            min_rounds: int = MIN_ROUNDS) -> Decision | None:
    """The verdict when it can no longer change with more rounds of the candidate, else None.

    faster: decide() says faster and the whole interval of candidate/baseline lies below 1 - threshold;
    slower: decide() says slower and the whole interval lies above 1 + threshold;
    same: decide() says same and the whole interval lies within MIN_GAIN of 1 (no threshold, however low more
    rounds make the noise, could then call it faster or slower)."""
    cand = [r for r in candidate if len(r)]
    if len(cand) < min_rounds or not any(len(r) for r in baseline):
        return None
    d = decide(baseline, cand, min_gain)
    lo, hi = ratio_interval(baseline, cand)
    if d.decision == "faster" and hi < 1.0 - d.threshold:
        return d
    if d.decision == "slower" and lo > 1.0 + d.threshold:
        return d
    if d.decision == "same" and 1.0 - min_gain < lo and hi < 1.0 + min_gain:
        return d
    return None


@dataclass
class Drift:
    moved: bool
    ratio: float           # median of the controls / median of the stored baseline
    threshold: float
    why: str


def drift(stored: list[list[float]], controls: list[list[float]], min_gain: float = MIN_GAIN) -> Drift:
    """Whether the original's control launches of a candidate's session still match its stored timing.

    Moved when their median differs from the stored median by more than the larger of MIN_GAIN, the stored
    timing's own noise (noise()) and twice the controls' bootstrap error: the noise the verdicts allow for, so a
    drift that could turn a verdict is caught, and the scatter of a few launches alone is not called a drift."""
    ctrl = [r for r in controls if len(r)]
    if not ctrl:
        return Drift(False, 1.0, 0.0, "no control launch of the original in this session")
    s = summarize(stored)
    allc = np.concatenate([np.asarray(r, dtype=np.float64) for r in ctrl])
    med = float(np.median(allc))
    threshold = max(min_gain, noise(stored), 2.0 * bootstrap_error(allc))
    ratio = med / s.median_ms if s.median_ms > 0 else float("inf")
    moved = abs(ratio - 1.0) > threshold
    why = (f"{allc.size} control launch(es) of the original: median {med:.4g} ms against {s.median_ms:.4g} ms "
           f"stored ({ratio - 1.0:+.1%}, allowed {threshold:.1%})")
    return Drift(moved, ratio, threshold, ("the original's speed moved: " if moved else "") + why)
