"""Input sets for an MEP: the `.npy` files its harness loads, generated from mep.yaml's `init` entries.

Shared by `mepgen mep` (the default set in `data/in/`) and the evaluator (fresh sets, one per seed).
Inputs are made here in numpy rather than in the harness so that every backend, the reference run and a
person with a notebook see exactly the same bytes; each buffer draws from its own generator seeded by
(seed, buffer name), so adding a parameter never changes the data of the others.
"""
from __future__ import annotations

import os
import re
import zlib
from pathlib import Path

import numpy as np

from . import cexpr
from .errors import MepgenError
from .spec import Buffer, Constant, Init, Param, Spec, itemsize


def const_file_name(symbol: str) -> str:
    """`heat::c_grid` -> `const.heat.c_grid.npy` (the harness protocol's name for a constant's input); an
    instantiation of a variable template, `taps<double>` -> `const.taps.double.npy`."""
    return f"const.{re.sub(r'[^A-Za-z0-9_]+', '.', symbol).strip('.')}.npy"


#: the most bytes an MEP's buffers (inputs, outputs, chain buffers, constants) may take together: above it
#: mepgen allocates nothing and says which sizes to scale down
MAX_MEP_BYTES = 16 << 30


def footprint(spec: Spec) -> tuple[int, list[tuple[int, str]]]:
    """(total bytes of the MEP's buffers, [(bytes, name)] largest first), from sizes alone (nothing allocated).
    Raises MepgenError for a count that does not evaluate."""
    items = []
    for item in [*spec.params, *spec.buffers, *spec.constants]:
        if getattr(item, "role", "in") == "scalar" or item.count is None or not item.dtype:
            continue
        items.append((spec.count(item) * (itemsize(item.dtype) or 1), item.name))
    items.sort(reverse=True)
    return sum(b for b, _ in items), items


def check_footprint(spec: Spec, limit: int = MAX_MEP_BYTES) -> str | None:
    """Why the MEP's buffers are too large to allocate (one line), else None."""
    total, items = footprint(spec)
    if total <= limit:
        return None
    big = ", ".join(f"{n} {b / 2 ** 30:.1f} GiB" for b, n in items[:3])
    return (f"its buffers would take {total / 2 ** 30:.1f} GiB ({big}), more than the {limit >> 30} GiB an MEP may "
            f"allocate; scale its sizes down (`--size SYM=N`, or `sizes` in mep.yaml)")


def make_inputs(spec: Spec, mep_dir: Path, seed: int, out_dir: Path, keep: bool = True) -> dict[str, np.ndarray]:
    """Write `<param>.npy` for every in/inout buffer, `<buffer>.npy` for every chain buffer with an `init`
    and `const.<symbol>.npy` for every constant that has an `init` into `out_dir`; return the arrays by file
    stem (`x`, `const.heat.c_stencil`). Parameters the chain computes (`init: {kind: chain}`) get no file.

    Deterministic: the same spec, seed and files give the same bytes. Constants described by a C++ `value`
    (struct-typed symbols) have no file: the harness initializes them from the expression. `keep=False`: each
    array is dropped once written (the result is empty), so memory holds one input at a time.
    """
    check_fits(spec, Path(mep_dir))
    too_big = check_footprint(spec)
    if too_big:
        raise MepgenError(f"{spec.kernel.name}: {too_big}")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    arrays: dict[str, np.ndarray] = {}
    for p in [*spec.inputs, *spec.chain_inputs]:
        arrays[p.name] = make_array(spec, p, Path(mep_dir), seed)
        np.save(out_dir / f"{p.name}.npy", arrays[p.name], allow_pickle=False)
        if not keep:
            del arrays[p.name]
    for c in spec.constants:
        if c.init is None:
            continue
        stem = const_file_name(c.name)[:-len(".npy")]
        arrays[stem] = make_array(spec, c, Path(mep_dir), seed)
        np.save(out_dir / f"{stem}.npy", arrays[stem], allow_pickle=False)
        if not keep:
            del arrays[stem]
    return arrays


def machine_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 1 << 40


def check_fits(spec: Spec, mep_dir: Path) -> None:
    """Each generated buffer is made in host memory (through float64 for floats): one that cannot fit in
    this machine's memory is an error naming its count and the sizes behind it, not a crash of numpy."""
    memory = machine_memory()
    for group, items in (("params", spec.params), ("constants", spec.constants), ("buffers", spec.buffers)):
        for i, item in enumerate(items):
            if item.dtype is None or item.count is None or item.init is None:
                continue
            count = spec.count(item)
            need = count * max(8, np.dtype(item.dtype).itemsize)
            if need > memory:
                used = ", ".join(f"{k}={spec.sizes[k]}" for k in sorted(cexpr.names(str(item.count)) & set(spec.sizes)))
                raise MepgenError(f"{Path(mep_dir) / 'mep.yaml'}: {group}[{i}].count: {item.name} has {count} "
                                  f"elements ({used or item.count}), {need / 2**30:.3g} GiB to generate, more than this "
                                  f"machine's {memory / 2**30:.3g} GiB: lower the sizes (`mepgen mep {spec.kernel.name} "
                                  f"--size SYM=VALUE`, or in mep.yaml), or fix the count '{item.count}' if it is not "
                                  "the buffer's element count")


def make_array(spec: Spec, item: Param | Constant | Buffer, mep_dir: Path, seed: int) -> np.ndarray:
    """One buffer's data as a 1-D array of its dtype and element count."""
    if item.dtype is None or item.init is None:
        raise MepgenError(f"{item.name}: needs a dtype and an init to generate its input")
    count = spec.count(item)
    dtype = np.dtype(item.dtype)
    rng = np.random.default_rng([seed & 0xFFFFFFFF, zlib.crc32(item.name.encode())])
    data = _generate(item.init, dtype, count, spec, mep_dir, rng, item.name)
    if data.shape != (count,):
        raise MepgenError(f"{item.name}: init '{item.init.kind}' made {data.size} elements, "
                          f"the spec says {count}")
    return np.ascontiguousarray(data.astype(dtype, copy=False))


def _number(value, spec: Spec, what: str) -> float | int:
    """A literal number (`0.5`, `1e-3f`), or an integer expression over the size symbols (`NBINS - 1`)."""
    if isinstance(value, (int, float)):
        return value
    text = str(value).strip()
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text[:-1] if text[-1:] in "fF" and not text.lower().startswith("0x") else text)
    except ValueError:
        pass
    v = cexpr.evaluate(text, spec.sizes)
    if v is None:
        raise MepgenError(f"{what}: cannot evaluate '{value}' over the sizes {spec.sizes}")
    return v


def _generate(init: Init, dtype: np.dtype, count: int, spec: Spec, mep_dir: Path, rng, name: str) -> np.ndarray:
    a = init.args
    num = lambda key: _number(a[key], spec, f"{name}.init.{key}")
    kind = init.kind
    is_int = dtype.kind in "iu"
    if kind == "zeros":
        return np.zeros(count, dtype)
    if kind == "constant":
        return np.full(count, num("value"), dtype=dtype)
    if kind == "arange":
        start, step = _number(a.get("start", 0), spec, name), _number(a.get("step", 1), spec, name)
        return (start + step * np.arange(count, dtype=np.float64 if not is_int else np.int64)).astype(dtype)
    if kind == "uniform":
        low, high = num("low"), num("high")
        if dtype.kind == "b":
            return rng.random(count) < 0.5
        if is_int:
            return rng.integers(int(low), int(high), size=count, endpoint=True).astype(dtype)
        work = np.float32 if dtype.itemsize <= 4 else np.float64
        out = np.empty(count, dtype)
        step = 1 << 20     # a slice at a time (each double is one draw: the same numbers as one call)
        for s in range(0, count, step):
            out[s:s + step] = rng.uniform(low, high, size=min(step, count - s)).astype(work)
        return out
    if kind == "normal":
        out = rng.normal(num("mean"), num("std"), size=count)
        return np.rint(out).astype(dtype) if is_int else out.astype(dtype)
    if kind == "index":
        low, high = int(num("low")), int(num("high"))
        if high <= low:
            raise MepgenError(f"{name}.init: index range [{low}, {high}) is empty")
        if "band" in a:
            return _banded(low, high, int(num("band")), count, rng, name, dtype)
        return rng.integers(low, high, size=count).astype(dtype)
    if kind == "csr_row_ptr":
        return _csr_row_ptr(int(num("rows")), int(num("nnz")), count, rng, name).astype(dtype)
    if kind == "values":
        vals = np.asarray(a["values"], dtype=np.float64)
        if vals.size == 0 or count % vals.size:
            raise MepgenError(f"{name}.init: {vals.size} values do not tile the {count} elements")
        return np.tile(vals, count // vals.size).astype(dtype)
    if kind == "file":
        return _from_file(mep_dir / a["path"], dtype, count, name)
    if kind == "chain":
        raise MepgenError(f"{name}: computed by the chain ({a.get('by')}), not generated")
    raise MepgenError(f"{name}.init: unknown init kind '{kind}'")


def _banded(low: int, high: int, band: int, count: int, rng, name: str, dtype=np.int64) -> np.ndarray:
    """Indices near the diagonal: element k lies within +-band of low + k * (high - low) / count (clipped to
    [low, high)). For CSR column indices over rows of near-equal length (csr_row_ptr) that is the row's own
    diagonal: the matrix is banded, as a PDE or FEM matrix in its mesh ordering is."""
    if band < 0:
        raise MepgenError(f"{name}.init: band {band} is negative")
    out = np.empty(count, dtype)
    step = 1 << 20     # a slice at a time, written in the target type: the same numbers as one call
    for s in range(0, count, step):
        e = min(count, s + step)
        centre = low + (np.arange(s, e, dtype=np.int64) * (high - low)) // max(count, 1)
        out[s:e] = np.clip(centre + rng.integers(-band, band, size=e - s, endpoint=True), low, high - 1)
    return out


def _csr_row_ptr(rows: int, nnz: int, count: int, rng, name: str) -> np.ndarray:
    """Row pointers of a CSR matrix: 0, monotone, ending at nnz, rows of near-equal length (as a stencil
    or FEM matrix has), with the remainder spread over random rows."""
    if count != rows + 1:
        raise MepgenError(f"{name}: csr_row_ptr has rows + 1 = {rows + 1} entries, the count says {count}")
    if rows < 0 or nnz < 0:
        raise MepgenError(f"{name}: csr_row_ptr needs rows >= 0 and nnz >= 0 (got {rows}, {nnz})")
    lengths = np.full(rows, nnz // rows if rows else 0, dtype=np.int64)
    extra = nnz - int(lengths.sum())
    if extra:
        lengths[rng.choice(rows, size=extra, replace=False)] += 1
    out = np.zeros(rows + 1, dtype=np.int64)
    np.cumsum(lengths, out=out[1:])
    return out


def _from_file(path: Path, dtype: np.dtype, count: int, name: str) -> np.ndarray:
    try:
        data = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise MepgenError(f"{name}: input file {path} not found") from None
    except (OSError, ValueError) as e:
        raise MepgenError(f"{name}: cannot read {path} as .npy ({e})") from None
    if data.dtype != dtype:
        raise MepgenError(f"{name}: {path} holds {data.dtype}, the spec says {dtype}")
    if data.size != count:
        raise MepgenError(f"{name}: {path} holds {data.size} elements, the spec says {count}")
    return data.reshape(-1)
