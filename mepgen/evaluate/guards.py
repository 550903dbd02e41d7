"""Guard zones around every device buffer: an out-of-bounds write is a verdict, on both backends.

The native harness (templates/harness/guards.h) and the pycuda worker (DeviceGuards below) place each buffer the
kernel sees inside a larger allocation: GUARD_BYTES before its first byte and, after its end, up to the next
256-byte boundary plus GUARD_BYTES, filled with one 32-bit word drawn when the process starts (a candidate
cannot know it). After each verification launch the guards are read back; a changed byte is a
`RuntimeFault("out_of_bounds")` naming the buffer, the side and the offset (`describe`). Guards are multiples of
256 bytes, so every buffer keeps the alignment it had (vectorized loads lose nothing) and a `placement` keeps its
offset from a PLACEMENT_SPAN boundary. Reads out of bounds change nothing: compute-sanitizer finds those
(memcheck.py), on the winner.
"""
from __future__ import annotations

import os

import numpy as np

#: bytes of guard before each buffer and after its 256-byte-rounded end (a multiple of 256)
GUARD_BYTES = 65536
ALIGN = 256


def after_bytes(nbytes: int) -> int:
    """The guard after a buffer of `nbytes`: to the next 256-byte boundary, then GUARD_BYTES."""
    return (nbytes + ALIGN - 1) // ALIGN * ALIGN - nbytes + GUARD_BYTES


def describe(hit: dict) -> str:
    """One line for a guard a kernel wrote into: hit = {buffer, side, offset, bytes, phase} (both backends)."""
    side = hit.get("side")
    where = "past the end" if side == "after" else "before the start"
    offset = int(hit.get("offset") or 0)
    first = (f"{offset} byte(s) {where}" if side == "before" else
             f"at byte {offset} {where}" if offset else f"right {where}")
    return (f"out-of-bounds write {where} of {hit.get('buffer')}: {int(hit.get('bytes') or 0)} byte(s) of its guard "
            f"zone changed, the nearest {first} (in {hit.get('phase') or 'a launch'}); in the application this "
            "write lands in other memory")


def hit_of_record(record: dict) -> dict:
    return {k: record.get(k) for k in ("buffer", "side", "offset", "bytes", "phase")}


class DeviceGuards:
    """The pycuda worker's guards (pycuda.driver as `cuda`): allocate(), then check() after a launch."""

    def __init__(self, cuda):
        self.cuda = cuda
        word = int.from_bytes(os.urandom(4), "little") | 1
        self.pattern = np.frombuffer(word.to_bytes(4, "little") * ((GUARD_BYTES + ALIGN) // 4), np.uint8).copy()
        self.zones: list[tuple[str, int, int, int]] = []        # name, start, bytes, after
        self.held: list = []                                    # the allocations behind the buffers

    def allocate(self, nbytes: int, placement: int | None, span: int, name: str) -> int:
        """A buffer of `nbytes` with its guards; placed as the harness places it (mep_alloc): `placement` bytes
        past a `span` boundary, or on one for a buffer of `span` bytes or more; returns its address."""
        after = after_bytes(nbytes)
        placed = not (placement is None and nbytes < span)
        shift = placement or 0
        raw = self.cuda.mem_alloc(GUARD_BYTES + (span + shift if placed else 0) + nbytes + after)
        self.held.append(raw)
        start = int(raw) + GUARD_BYTES
        if placed:
            start = (start + span - 1) // span * span + shift
        self.zones.append((name, start, nbytes, after))
        self._fill(start, nbytes, after)
        return start

    def _fill(self, start: int, nbytes: int, after: int) -> None:
        self.cuda.memcpy_htod(start - GUARD_BYTES, self.pattern[:GUARD_BYTES])
        self.cuda.memcpy_htod(start + nbytes, self.pattern[:after])

    def check(self, phase: str) -> dict | None:
        """The first guard changed since the last check (then every guard is filled again, for the next
        candidate), or None."""
        hit = None
        seen = np.empty(GUARD_BYTES + ALIGN, np.uint8)
        for name, start, nbytes, after in self.zones:
            for side, base, n in (("before", start - GUARD_BYTES, GUARD_BYTES), ("after", start + nbytes, after)):
                self.cuda.memcpy_dtoh(seen[:n], base)
                bad = np.flatnonzero(seen[:n] != self.pattern[:n])
                if bad.size and hit is None:
                    offset = int(n - bad[-1]) if side == "before" else int(bad[0])
                    hit = {"buffer": name, "side": side, "offset": offset, "bytes": int(bad.size), "phase": phase}
            if hit is not None:
                break
        if hit is not None:
            for name, start, nbytes, after in self.zones:
                self._fill(start, nbytes, after)
        return hit


class ExactAllocations:
    """The pycuda worker's allocations under compute-sanitizer's memcheck (memcheck_worker.py), as the native
    harness makes them under --exact-alloc: each buffer its own allocation of its own size, no guard zones and no
    placement (the sanitizer pads each allocation), its address told on stdout (`MEPGEN_BUFFER name address
    bytes`, which memcheck.buffers_of reads) so that an error is told as the buffer it was meant for."""

    def __init__(self, cuda):
        self.cuda = cuda
        self.held: list = []

    def allocate(self, nbytes: int, placement: int | None, span: int, name: str) -> int:
        """The first allocation of a name is the one the kernel sees (an output, made at setup; an input of the
        set); a later one of the same name is an input set's copy of an in/out buffer, which only resets it before
        a launch: told as NAME~input, so that an error near the kernel's buffer is told by its name."""
        raw = self.cuda.mem_alloc(nbytes)
        self.held.append((name, raw))
        told = name if sum(n == name for n, _ in self.held) == 1 else f"{name}~input"
        print(f"MEPGEN_BUFFER {told} {int(raw):#x} {nbytes}", flush=True)
        return int(raw)

    def check(self, phase: str) -> None:
        return None             # no guard zones: the sanitizer watches every access
