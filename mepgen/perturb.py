"""Inputs that change between timed launches, and the perturbation re-check after timing.

A kernel that remembers its results (a device-heap table keyed on a few of its inputs) computes honestly on
every input set it has not seen and copies on the ones it has: if timed launches saw the same inputs again,
it would be timed copying, and a re-check on an input set it saw during verification would pass. So both
backends (the native harness, templates/harness/perturb.h, and the pycuda worker) do the same thing:

- before every launch of a timing session (warm-up and timed, outside the timed window) one block of
  `BLOCK` consecutive elements of every perturbable input takes other values of the same buffer (the
  block's previous change is undone first): no two launches see the same inputs;
- after timing, the candidate and then the original kernel run once more at the step `RECHECK_STEP` (a
  block no earlier launch used), and their outputs must agree: a result reused instead of computed does
  not follow the change.

The blocks are a function of (seed, step, buffer index, element count) only - splitmix64, the same
arithmetic here and in perturb.h (a test compiles the header and compares) - so both backends change the
same elements and agree on every verdict. The seed comes from the candidate's text (unknown to its
author when it is written).

Perturbable inputs: `in`/`inout` buffers whose values are random draws (init `uniform` or `normal`), or
floating-point data read from a file (captured values). Index arrays, row pointers, ramps and constants keep
their structure (an index moved elsewhere could fall out of its row, a ramp stops being sorted), and so do buffers
holding device pointers (mep.yaml `relocate`).
"""
from __future__ import annotations

import numpy as np

from .contenthash import digest
from .spec import Param, Spec, is_fed

#: elements changed per buffer and launch
BLOCK = 16
#: the step of the re-check after timing (timed launches count up from 0 and never reach it)
RECHECK_STEP = 0xFFFFFFFF
MASK = (1 << 64) - 1
#: harness flag that turns perturbation on (support is read from harness.cu)
FLAG = "--perturb-seed"


def splitmix64(x: int) -> int:
    z = (x + 0x9E3779B97F4A7C15) & MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def block(seed: int, step: int, buffer: int, n: int) -> tuple[int, int, int]:
    """(pos, src, m): elements [pos, pos + m) of buffer number `buffer` (n elements) take the original values
    at [src, src + m) rotated by one (element pos + i gets src + (i + 1) % m)."""
    m = min(BLOCK, n)
    if m == 0:
        return 0, 0, 0
    span = n - m + 1
    s = splitmix64((seed ^ splitmix64(((step << 8) ^ buffer) & MASK)) & MASK)
    return s % span, splitmix64(s) % span, m


def values(orig: np.ndarray, src: int, m: int) -> np.ndarray:
    """The block's new values: orig[src:src+m] rotated by one."""
    return np.roll(orig[src:src + m], -1)


def apply(arr: np.ndarray, seed: int, step: int, buffer: int) -> np.ndarray:
    """A copy of `arr` (the original) as perturbed at `step` (what the harness holds then)."""
    out = arr.copy()
    pos, src, m = block(seed, step, buffer, arr.size)
    out[pos:pos + m] = values(arr, src, m)
    return out


def perturbable(p: Param) -> bool:
    if p.role not in ("in", "inout") or is_fed(p) or p.init is None or p.dtype in (None, "bool") or p.relocate:
        return False                     # (a buffer holding device pointers keeps them where mepgen wrote them)
    if p.init.kind in ("uniform", "normal"):
        return True
    return p.init.kind == "file" and np.dtype(p.dtype).kind == "f"


def names(spec: Spec) -> list[str]:
    """The perturbable inputs, in parameter order (a buffer's index in this list is its `buffer` number)."""
    return [p.name for p in spec.params if perturbable(p)]


def seed_for(*parts: str) -> int:
    """A 63-bit seed from the candidate's identity (its text, the reference it is judged against)."""
    return int(digest("perturb", *parts)[:15], 16)

