#!/usr/bin/env python3
"""The table of an `mepgen optimize --all --json` sweep over applications (issue 36, criterion 1).

    python3 bench/optimize_table.py OUT.md APP=ROWS.json [APP=ROWS.json ...] [--none APP=N:WHY ...]

ROWS.json is what `mepgen optimize --all --json` printed in the application's folder: one row per kernel (status,
original and best time, speedup, winning chain, fidelity). `--capture APP=N`: the application's launched kernels
`--none APP=N:WHY`: N launched kernels of the application that have no row, and why (capture left them without
a complete MEP; the sweep ran out of time): they count as kernels the user gets nothing for.
`--without APP:KERNEL:WHY`: a kernel counted in the headline but also left out of a second mean, said with its
reason (a win with no output to compare, which would carry the mean alone).

Writes OUT.md: every kernel with its outcome; the geometric mean of the speedups over every kernel launched (1.0
where the original was kept or the kernel was not optimized: a failure gives the user nothing) and over the kernels
optimize finished; how many kernels each outcome holds; and the share of the summed log speedups by the winning
chain's first step.
"""
from __future__ import annotations

import argparse
import json
import math
from collections import Counter, defaultdict
from pathlib import Path


def rows_of(path: Path) -> list[dict]:
    text = path.read_text().strip() if path.is_file() else ""
    if not text:
        return []
    doc = json.loads(text)
    rows = doc if isinstance(doc, list) else doc.get("rows") or doc.get("kernels") or []
    return [r for r in rows if isinstance(r, dict)]


def speedup(row: dict) -> float:
    s = row.get("speedup")
    return float(s) if row.get("status") == "done" and s else 1.0


def geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def table(apps: dict[str, list[dict]], uncaptured: dict[str, tuple[int, str]],
          without: dict[tuple[str, str], str] | None = None) -> str:
    without = without or {}
    every = [(app, r) for app, rows in apps.items() for r in rows]
    done = [(a, r) for a, r in every if r.get("status") == "done"]
    all_speedups = [speedup(r) for _, r in every] + [1.0] * sum(n for n, _ in uncaptured.values())
    left = [(a, r) for a, r in every if (a, r.get("kernel")) in without]
    if len(left) != len(without):
        missing = sorted(set(without) - {(a, r.get("kernel")) for a, r in left})
        raise SystemExit(f"--without names no row: {', '.join(f'{a}:{k}' for a, k in missing)}")
    kept = [speedup(r) for a, r in every if (a, r.get("kernel")) not in without] + \
        [1.0] * sum(n for n, _ in uncaptured.values())
    kept_done = [speedup(r) for a, r in done if (a, r.get("kernel")) not in without]
    statuses = Counter(r.get("status") or "?" for _, r in every)
    for n, why in uncaptured.values():
        statuses[why] += n
    share: dict[str, float] = defaultdict(float)
    kernels: Counter = Counter()
    for _, r in done:
        first = (r.get("chain") or ["(none)"])[0] if speedup(r) > 1.0 else "(none)"
        share[first] += math.log(speedup(r))
        kernels[first] += 1
    total = sum(share.values())
    lines = [f"# `mepgen optimize --all` over {len(set(apps) | set(uncaptured))} applications", "",
             f"**{len(all_speedups)} kernels launched: geometric mean {geomean(all_speedups):.3f}x** (1.0 where the "
             f"original was kept or the kernel was not optimized); over the {len(done)} that optimize finished: "
             f"{geomean([speedup(r) for _, r in done]):.3f}x.", ""]
    if without:
        lines += [f"**Without {', '.join(f'{a} {k} ({why})' for (a, k), why in without.items())}: "
                  f"{len(kept)} kernels, geometric mean {geomean(kept):.3f}x**; over the {len(kept_done)} finished: "
                  f"{geomean(kept_done):.3f}x.", ""]
    lines += ["| outcome | kernels |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in statuses.most_common()]
    lines += ["", "Share of the log-gain by the winning chain's first step:", "",
              "| first step | kernels | share |", "|---|---|---|"]
    lines += [f"| {k} | {kernels[k]} | {100 * share[k] / total:.1f}% |" if total else f"| {k} | {kernels[k]} | - |"
              for k in sorted(kernels, key=lambda k: -share[k])]
    lines += ["", "| application | kernel | status | original ms | speedup | winning chain | fidelity ratio | why not |",
              "|---|---|---|---|---|---|---|---|"]
    for app, r in sorted(every, key=lambda x: (x[0], x[1].get("kernel") or "")):
        why = "" if r.get("status") == "done" else (r.get("error") or "").replace("|", "/").replace("\n", " ")[:110]
        ms = f"{r['original_ms']:.4f}" if r.get("original_ms") else "-"
        chain = " + ".join(r.get("chain") or []) if speedup(r) > 1.0 else "(original kept)" \
            if r.get("status") == "done" else "-"
        fid = r.get("fidelity_ratio")
        lines.append(f"| {app} | {r.get('kernel')} | {r.get('status')} | {ms} | {speedup(r):.2f}x | {chain} | "
                     f"{fid if fid is not None else '-'} | {why} |")
    for app, (n, why) in uncaptured.items():
        if n:
            lines.append(f"| {app} | ({n} kernel(s)) | {why} | - | 1.00x | - | - | |")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path)
    ap.add_argument("rows", nargs="+", help="APP=ROWS.json")
    ap.add_argument("--none", action="append", default=[], help="APP=N:WHY launched kernels without a row")
    ap.add_argument("--without", action="append", default=[],
                    help="APP:KERNEL:WHY a kernel also left out of a second mean, with the reason")
    a = ap.parse_args()
    apps = {}
    for item in a.rows:
        app, _, path = item.partition("=")
        if not path:
            ap.error(f"{item}: not APP=ROWS.json")
        apps[app] = rows_of(Path(path))
    uncaptured = {}
    for item in a.none:
        app, _, rest = item.partition("=")
        n, _, why = rest.partition(":")
        if not n.isdigit() or not why:
            ap.error(f"--none {item}: not APP=N:WHY")
        uncaptured[app] = (int(n), why)
    without = {}
    for item in a.without:
        app, kernel, why = (item.split(":", 2) + ["", ""])[:3]
        if not app or not kernel or not why:
            ap.error(f"--without {item}: not APP:KERNEL:WHY")
        without[(app, kernel)] = why
    a.out.write_text(table(apps, uncaptured, without))
    print(a.out.read_text().splitlines()[2])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
