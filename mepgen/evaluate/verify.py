"""Compare a candidate's outputs with the reference outputs of the original kernel.

The rules (DESIGN.md, "The evaluator's rules"): NaN and Inf never match, not even where the reference
has them (a reference with NaN is the MEP's problem, reported by :func:`reference_problem`); an element
still holding the poison the harness wrote before the launch was never written, and is counted apart; where
the original itself leaves elements unwritten (it writes one plane, a sub-range), only the elements it writes
are compared and the others must stay unwritten (:func:`written_region`);
integers and bools must match exactly; floats within `|got - ref| <= atol + rtol * |ref|`, with the
tolerance from `mep.yaml` or a default for the dtype.
"""
from __future__ import annotations

import numpy as np

from ..spec import Spec, Tolerance
from .results import Mismatch

#: byte the harness fills integer outputs with before each launch
INT_POISON_BYTE = 0xA5
#: byte the harness fills floating outputs with: all-ones bits are a NaN in every float format
FLOAT_POISON_BYTE = 0xFF

#: tolerance when mep.yaml states none: loose enough for a reordered reduction, tight enough for a bug
DEFAULT_TOLERANCE = {
    "float16": Tolerance(rtol=1e-2, atol=1e-3),
    "float32": Tolerance(rtol=1e-4, atol=1e-5),
    "float64": Tolerance(rtol=1e-9, atol=1e-12),
}


def tolerance_for(spec: Spec, name: str) -> Tolerance:
    """The tolerance of output `name`: mep.yaml's, else the dtype's default (exact for integers)."""
    if name in spec.verify.tolerance:
        return spec.verify.tolerance[name]
    item = next((x for x in [*spec.params, *spec.buffers, *spec.constants] if x.name == name), None)
    return DEFAULT_TOLERANCE.get((item.dtype if item is not None else None) or "", Tolerance(rtol=0.0, atol=0.0))


#: elements per slice of the comparisons: their float64 temporaries stay in the CPU's caches (a 64M-element
#: output compared in one piece allocates several 512 MiB temporaries and took seconds per output)
CHUNK = 1 << 20
_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def _poisoned(arr: np.ndarray) -> np.ndarray:
    """Elements whose every byte is still the poison byte."""
    byte = FLOAT_POISON_BYTE if arr.dtype.kind == "f" else INT_POISON_BYTE
    flat = np.ascontiguousarray(arr).reshape(-1)
    size = flat.dtype.itemsize
    if size in _UINT:      # one integer compare per element (same answer as comparing its bytes one by one)
        return flat.view(_UINT[size]) == _UINT[size](int.from_bytes(bytes([byte]) * size, "little"))
    return np.all(flat.view(np.uint8).reshape(-1, size) == byte, axis=1)


def poison_like(arr: np.ndarray) -> int:
    """How many elements of `arr` hold the poison's bits (a reference `out` buffer with any would read as unwritten)."""
    return int(_poisoned(np.asarray(arr)).sum()) if np.asarray(arr).size else 0


def reference_problem(name: str, ref: np.ndarray, input_set: int, poisoned: bool = True) -> str | None:
    """Why a reference output cannot serve as one (NaN, Inf, no element written), or None. An output the
    original writes only in part (one plane of a 3D array, a sub-range) is no problem: the elements it writes
    are the ones checked (:func:`written_region`), the others must stay unwritten. `poisoned`: whether the
    harness poisons the buffer before the launch (role `out`); an `inout` buffer starts from its inputs, so an
    element that looks like the poison is data (a 0xA5 byte of a record kept as bytes), not an unwritten one."""
    flat = ref.reshape(-1)
    poisoned = _poisoned(flat) if poisoned else np.zeros(flat.shape, bool)
    unwritten = int(poisoned.sum())
    if flat.size and unwritten == flat.size:
        return (f"the original kernel leaves {unwritten} of {flat.size} elements of '{name}' unwritten "
                f"(input set {input_set}): give '{name}' the role 'inout' in mep.yaml so those elements "
                "keep their input values, or fix the launch configuration")
    if flat.dtype.kind == "f":
        bad = int((~np.isfinite(flat) & ~poisoned).sum())      # in the array's own type: no float64 copy
        if bad:
            return (f"the original kernel writes {bad} NaN/Inf values into '{name}' (input set {input_set}): "
                    "change the inputs' init in mep.yaml so the reference is finite, or record the application's "
                    "own inputs with `mepgen capture KERNEL --use -- ./app ARGS`")
    return None


def written_region(name: str, ref: np.ndarray, input_set: int) -> str | None:
    """A note when the original writes only part of an output (None when it writes all of it): the rule
    "every output element is written" is "every element the original writes is written, the same way"."""
    flat = ref.reshape(-1)
    unwritten = int(_poisoned(flat).sum())
    if not unwritten:
        return None
    idx = np.flatnonzero(~_poisoned(flat))
    span = f"; written elements lie in [{int(idx[0])}, {int(idx[-1])}]" if idx.size else ""
    return (f"the original kernel writes {flat.size - unwritten} of {flat.size} elements of '{name}' (input set "
            f"{input_set}{span}): only those are compared, and a candidate must leave the others unwritten as "
            "the original does")


def compare(name: str, got: np.ndarray, ref: np.ndarray, tol: Tolerance, input_set: int,
            phase: str = "run", poisoned: bool = True) -> Mismatch | None:
    """None when `got` matches `ref` element for element; otherwise the evidence (`poisoned`: as in
    reference_problem; an `inout` buffer's elements are never counted as unwritten)."""
    total = int(ref.size)
    if got.dtype != ref.dtype or got.size != ref.size:
        return Mismatch(name, input_set, phase, total, total,
                        note=f"expected {ref.size} elements of {ref.dtype}, got {got.size} of {got.dtype}")
    g, r = got.reshape(-1), ref.reshape(-1)
    if g.dtype.kind == "f" and _floats_match(g, r, tol, poisoned):
        return None
    unwritten = _poisoned(g) if poisoned else np.zeros(g.shape, bool)
    if g.dtype.kind == "f":
        # elements the original leaves unwritten (only an out buffer is poisoned): they must stay so
        outside = _poisoned(r) if poisoned else np.zeros(r.shape, bool)
        g64, r64 = g.astype(np.float64), r.astype(np.float64)
        nan, inf = np.isnan(g64), np.isinf(g64)
        finite = np.isfinite(g64) & np.isfinite(r64)
        with np.errstate(invalid="ignore", over="ignore"):
            err = np.abs(np.where(finite, g64 - r64, 0.0))
        bad = ~finite | (err > tol.atol + tol.rtol * np.abs(np.where(finite, r64, 0.0)))
        bad = np.where(outside, ~unwritten, bad)
        unwritten = unwritten & ~outside
        if not bad.any():
            return None
        rel = err / np.maximum(np.abs(np.where(finite, r64, 0.0)), np.finfo(np.float64).tiny)
        first = int(np.flatnonzero(bad)[0])
        return Mismatch(name, input_set, phase, total, int(bad.sum()),
                        max_abs_err=float(err[finite].max()) if finite.any() else None,
                        max_rel_err=float(rel[finite].max()) if finite.any() else None,
                        first_bad_index=first, expected=float(r64[first]), got=float(g64[first]),
                        nan=int((nan & ~unwritten).sum()), inf=int(inf.sum()), unwritten=int(unwritten.sum()),
                        rtol=tol.rtol, atol=tol.atol)
    if g.dtype == np.bool_:  # compare the bytes: a poisoned bool (0xA5) must not read as True
        g, r = g.view(np.uint8), r.view(np.uint8)
    bad = g != r
    if not bad.any():
        return None
    first = int(np.flatnonzero(bad)[0])
    return Mismatch(name, input_set, phase, total, int(bad.sum()), first_bad_index=first,
                    expected=_scalar(r[first]), got=_scalar(g[first]),
                    unwritten=int((unwritten & bad).sum()), rtol=tol.rtol, atol=tol.atol)


def _floats_match(g: np.ndarray, r: np.ndarray, tol: Tolerance, poisoned: bool = True) -> bool:
    """True when every element passes `compare`'s float rule, decided slice by slice (the full evidence is
    computed only for a mismatch). Same rule: in float64, |g - r| <= atol + rtol * |r| with both finite; a NaN
    or Inf on either side gives a NaN or Inf difference, which fails the `isfinite` test. Where the buffer is
    poisoned (`poisoned`) and the original left an element unwritten, the element matches when it is unwritten
    in `g` too (the poison is a NaN pattern: without this, an output the original writes only in part took the
    slow full comparison on every run)."""
    same = _UINT.get(g.dtype.itemsize)
    for lo in range(0, g.size, CHUNK):
        gc, rc = g[lo:lo + CHUNK], r[lo:lo + CHUNK]
        # the common case first: bit for bit the reference, all finite (two passes instead of ten); where the
        # original leaves elements unwritten in every slice (a grid's border columns), bit for bit the reference
        # with every non-finite element the poison is the same verdict: unwritten in both
        if same is not None and np.array_equal(gc.view(same), rc.view(same)):
            finite = np.isfinite(rc)
            if finite.all() or poisoned and _poisoned(rc[~finite]).all():
                continue
        g64 = gc.astype(np.float64)
        r64 = rc.astype(np.float64)
        with np.errstate(invalid="ignore", over="ignore"):
            err = np.abs(g64 - r64)
            ok = np.isfinite(err) & np.isfinite(r64)
            ok &= err <= tol.atol + tol.rtol * np.abs(r64)
        if poisoned and not ok.all():
            outside = _poisoned(rc)
            if outside.any():
                ok = np.where(outside, _poisoned(gc), ok)
        if not ok.all():
            return False
    return True


def _scalar(v) -> float:
    return float(v) if not isinstance(v, (bool, np.bool_)) else float(bool(v))


def changed_elements(a: np.ndarray, b: np.ndarray) -> int:
    """How many elements differ bit for bit between two arrays of one dtype and size (one pass; a note's count,
    not a verdict)."""
    if a.dtype != b.dtype or a.size != b.size:
        return int(max(a.size, b.size))
    u = _UINT.get(a.dtype.itemsize)
    a, b = np.ascontiguousarray(a).reshape(-1), np.ascontiguousarray(b).reshape(-1)
    if u is None:
        return int(np.any(a.view(np.uint8).reshape(a.size, -1) != b.view(np.uint8).reshape(b.size, -1), axis=1).sum())
    return int(np.count_nonzero(a.view(u) != b.view(u)))


def unchanged(before: np.ndarray, after: np.ndarray) -> bool:
    """Bit-exact equality: an `in` buffer must come back from the kernel exactly as it went in."""
    if before.dtype != after.dtype or before.shape != after.shape:
        return False
    return bool(np.array_equal(np.ascontiguousarray(before).view(np.uint8),
                               np.ascontiguousarray(after).view(np.uint8)))
