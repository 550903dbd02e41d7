"""Digests of outputs, so that a native harness process need not write back outputs equal to the references.

The harness (templates/harness/digest.h) computes two keyed 64-bit digests of each output on the GPU and reports
them in its result line. The references' digests come from the original kernel's own runs (its reference run, or a
later run whose outputs were bit for bit the references); they are never given to a candidate's process. Before a
run, the parent hands the harness lane A of each reference digest (`--skip NAME:HEX`): an output whose lane A
matches is not written. The parent then takes the output as matched only when the harness reported both lanes equal
to the reference's. Lane A, on the command line, is no secret; lane B never leaves the parent, so a process that
skips writing an output without computing it (a candidate's host code that escaped the rules) cannot report it,
and an output that is neither matched nor written is a fault. A candidate that is not bit for bit the original
(a reordered float sum) writes its outputs and is compared on the host with the tolerance, as without digests.

This module computes the same digests in numpy (tests, the fake harness; the evaluator never needs it), and takes the
references' digests from the original's runs and the store.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from .verify import unchanged

#: the lanes' keys (public: the references, not the keys, are what a candidate cannot know)
KEY_A, KEY_B = 0x243F6A8885A308D3, 0x13198A2E03707344
_M = np.uint64(0xFFFFFFFFFFFFFFFF)


def _mix(z: np.ndarray) -> np.ndarray:
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def of_bytes(data: bytes | np.ndarray, chunk: int = 1 << 22) -> tuple[str, str]:
    """The (lane A, lane B) digests of a buffer's bytes, as the harness prints them (16 hex digits each)."""
    raw = np.frombuffer(data if isinstance(data, (bytes, bytearray)) else np.ascontiguousarray(data).tobytes(),
                        np.uint8)
    pad = (-raw.size) % 8
    words = np.concatenate([raw, np.zeros(pad, np.uint8)]).view("<u8") if pad else raw.view("<u8")
    sums = []
    with np.errstate(over="ignore"):
        for key in (KEY_A, KEY_B):
            total = 0
            for lo in range(0, words.size, chunk):
                i = np.arange(lo, min(lo + chunk, words.size), dtype=np.uint64)
                k = _mix(np.uint64(key) + (i + np.uint64(1)) * np.uint64(0x9E3779B97F4A7C15))
                total = (total + int(_mix(words[lo:lo + chunk] ^ k).sum(dtype=np.uint64))) & int(_M)
            sums.append(f"{total:016x}")
    return sums[0], sums[1]


def matched(reported: dict | None, references: dict[str, list[str]], names) -> list[str]:
    """The outputs among `names` whose reported digests (harness record: name -> [A, B]) are the references'."""
    if not isinstance(reported, dict):
        return []
    return [n for n in names if n in references and isinstance(reported.get(n), list)
            and [str(v) for v in reported[n]] == list(references[n])]


def of_run(outputs, out, refs: dict[str, np.ndarray]) -> dict[str, list[str]]:
    """The digests a run of the original reported (its record's `digests`) for the outputs (spec.outputs) it wrote
    back bit for bit as `refs`: only these ever stand for a reference."""
    reported = out.record.get("digests") if out.record else None
    if not isinstance(reported, dict):
        return {}
    return {p.name: [str(v) for v in reported[p.name]] for p in outputs
            if isinstance(reported.get(p.name), list) and len(reported[p.name]) == 2
            and p.name in out.outputs and p.name in refs and unchanged(refs[p.name], out.outputs[p.name])}


def stored(ref_dir: Path) -> dict[str, list[str]]:
    """The reference digests kept in a reference folder's meta.json ({} when none: an older mepgen's)."""
    try:
        meta = json.loads((Path(ref_dir) / "meta.json").read_text())
    except (OSError, ValueError):
        return {}
    got = meta.get("digests") if isinstance(meta, dict) else None
    return {n: [str(x) for x in v] for n, v in got.items() if isinstance(v, list) and len(v) == 2} \
        if isinstance(got, dict) else {}
