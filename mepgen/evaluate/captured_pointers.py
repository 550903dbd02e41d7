"""Device pointers a capture found inside arguments and buffers (mep.yaml `relocate`), rewritten by the pycuda
worker as the native harness rewrites them (templates/harness/harness.cu.j2):

- inside a by-value argument (a struct holding device pointers, or a pointer into another parameter's allocation):
  its bytes as captured, with the address of the MEP's buffer `buffer` plus `offset` bytes written at byte `at`,
  for each input set (the harness's `arg_<name>`);
- inside an `in` or `inout` parameter or a buffer of mep.yaml `buffers`: the same, written into the input set's
  data before it is uploaded (the harness writes them after loading the inputs: an `inout` one into the copy every
  run starts from). An `out` parameter is poisoned before every run, so what would be written there is never read
  (the harness's write is overwritten the same way).

The address is the one the kernel sees: an `out`/`inout` parameter's or an `inout` buffer's output buffer, an `in`
parameter's or another buffer's copy of the input set. Pointers are 8 bytes, little-endian (64-bit CUDA).
"""
from __future__ import annotations

from typing import Callable

import numpy as np

POINTER_BYTES = 8


def _write(raw, at: int, address: int, holder: str, size: int) -> None:
    if at < 0 or at + POINTER_BYTES > size:
        raise ValueError(f"relocation inside {holder}: a pointer at byte {at} does not fit in its {size} bytes")
    memoryview(raw)[at:at + POINTER_BYTES] = int(address).to_bytes(POINTER_BYTES, "little")


def patch_bytes(value: bytes, relocate: list[dict], address_of: Callable[[str], int], holder: str) -> bytes:
    """A by-value argument's bytes with each relocation's address written in."""
    raw = bytearray(value)
    for r in relocate:
        _write(raw, int(r["at"]), address_of(r["buffer"]) + int(r["offset"]), holder, len(raw))
    return bytes(raw)


def patch_array(arr: np.ndarray, relocate: list[dict], address_of: Callable[[str], int], holder: str) -> np.ndarray:
    """A buffer's data (a new array, `arr` is left as it was) with each relocation's address written in."""
    out = np.array(arr, copy=True, order="C").reshape(-1)
    raw = out.view(np.uint8)
    for r in relocate:
        _write(raw, int(r["at"]), address_of(r["buffer"]) + int(r["offset"]), holder, raw.size)
    return out
