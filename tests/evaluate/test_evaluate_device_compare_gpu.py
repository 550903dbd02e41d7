"""On a GPU: device_compare.py's kernels give verify.compare's verdict element for element (the mismatch count and
the first bad index), on the cases the rule is made of: tolerance boundaries, NaN and Inf on either side, -0.0,
the poison of unwritten elements (role out and inout), float16/32/64, integers and bools; and the references on the
GPU hold masked bytes, not the outputs."""
from __future__ import annotations

import numpy as np
import pytest

from mepgen.evaluate import device_compare
from mepgen.evaluate.verify import compare
from mepgen.spec import Tolerance

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def gpu(tmp_path_factory):
    cuda = pytest.importorskip("pycuda.driver")
    cuda.init()
    ctx = cuda.Device(0).make_context()
    cc = "".join(str(v) for v in cuda.Device(0).compute_capability())
    module = cuda.module_from_buffer(device_compare.build_cubin(f"sm_{cc}", tmp_path_factory.mktemp("cmp")).read_bytes())
    yield cuda, module
    ctx.pop()


def on_device(gpu, got: np.ndarray, ref: np.ndarray, tol: Tolerance, poisoned: bool) -> tuple[int, int | None]:
    cuda, module = gpu
    key = 0x1234_5678_9ABC_DEF1
    g, r = cuda.to_device(np.ascontiguousarray(got)), cuda.to_device(np.ascontiguousarray(ref))
    n = np.uint64(ref.size)
    module.get_function(f"mepgen_mask{ref.itemsize}")(r, n, np.uint64(key), block=(256, 1, 1), grid=(4, 1))
    masked = cuda.from_device(r, ref.shape, ref.dtype)
    if ref.size >= 16:
        assert masked.tobytes() != ref.tobytes()        # what a candidate kernel could read is not the reference
    counts = cuda.to_device(np.array([0, 2**64 - 1], np.uint64))
    kernel = device_compare.kernel_for(ref.dtype.str)
    args = (g, r, n, np.uint64(key))
    if kernel.startswith("mepgen_close"):
        args += (np.float64(tol.rtol), np.float64(tol.atol), np.int32(poisoned))
    module.get_function(kernel)(*args, counts, block=(256, 1, 1), grid=(4, 1))
    out = cuda.from_device(counts, (2,), np.uint64)
    return int(out[0]), (int(out[1]) if out[0] else None)


def host(got, ref, tol, poisoned) -> tuple[int, int | None]:
    m = compare("y", got, ref, tol, 0, "run", poisoned)
    return (0, None) if m is None else (m.bad, m.first_bad_index)


def poison(dtype, n) -> np.ndarray:
    byte = 0xFF if np.dtype(dtype).kind == "f" else 0xA5
    return np.frombuffer(bytes([byte]) * (np.dtype(dtype).itemsize * n), dtype).copy()


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("poisoned", [True, False])
def test_floats_get_the_host_s_verdict(gpu, dtype, poisoned):
    rng = np.random.default_rng(3)
    tol = Tolerance(rtol=1e-3, atol=1e-4) if dtype == "float16" else Tolerance(rtol=1e-5, atol=1e-7)
    ref = (rng.standard_normal(5000) * 10).astype(dtype)
    ref[:40] = poison(dtype, 40)                          # elements the original leaves unwritten
    ref[40], ref[41], ref[42] = 0.0, -0.0, np.finfo(dtype).max
    cases = []
    for scale in (0.0, 0.5, 0.999, 1.0, 1.001, 2.0):     # around the tolerance, in float64 then rounded
        r64 = ref.astype(np.float64)
        step = (tol.atol + tol.rtol * np.abs(r64)) * scale
        got = np.where(np.isfinite(r64), r64 + step, r64).astype(dtype)
        got[:40] = ref[:40]
        cases.append(got)
    bad = cases[0].copy()
    bad[45], bad[46], bad[47], bad[48] = np.nan, np.inf, -np.inf, -0.0
    bad[10] = 1.0                                        # written where the original writes nothing
    bad[20:25] = poison(dtype, 5)
    cases.append(bad)
    unwritten = cases[0].copy()
    unwritten[100:120] = poison(dtype, 20)              # left unwritten where the original writes
    cases.append(unwritten)
    nan_ref = ref.copy()
    nan_ref[50] = np.nan
    for got in cases:
        assert on_device(gpu, got, ref, tol, poisoned) == host(got, ref, tol, poisoned)
    assert on_device(gpu, cases[0], nan_ref, tol, poisoned) == host(cases[0], nan_ref, tol, poisoned) != (0, None)
    # the original leaves 40 elements at the poison bits: matched as unwritten only where poisoning is on (NaN never
    # matches otherwise), on the device as on the host
    assert on_device(gpu, cases[0], ref, tol, poisoned) == ((0, None) if poisoned else (40, 0))


@pytest.mark.parametrize("dtype", ["int8", "uint16", "int32", "int64", "bool"])
def test_integers_and_bools_match_bit_for_bit(gpu, dtype):
    rng = np.random.default_rng(4)
    ref = rng.integers(0, 2 if dtype == "bool" else 100, 3000).astype(dtype)
    got = ref.copy()
    assert on_device(gpu, got, ref, Tolerance(0.0, 0.0), True) == (0, None)
    got = ref.copy()
    got[[7, 1500, 2999]] = ~ref[[7, 1500, 2999]] if dtype == "bool" else ref[[7, 1500, 2999]] + 1
    if dtype == "bool":
        got.view(np.uint8)[9] = 0xA5                     # a poisoned bool does not read as True
        got.view(np.uint8)[8] = 2 if not ref[8] else 0xA5
    assert on_device(gpu, got, ref, Tolerance(0.0, 0.0), True) == host(got, ref, Tolerance(0.0, 0.0), True)


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_broken_counts_what_perturb_recheck_counts(gpu, dtype):
    """mepgen_broken: elements non-finite in the original's outputs on changed inputs and finite in the reference."""
    cuda, module = gpu
    rng = np.random.default_rng(5)
    ref = rng.standard_normal(4000).astype(dtype)
    ref[[3, 4]] = np.nan
    now = ref.copy()
    now[[4, 10, 11, 3999]] = [np.inf, np.nan, -np.inf, np.nan]
    key = 0x0F0F_0F0F_1234_5678
    r, g = cuda.to_device(ref), cuda.to_device(now)
    n = np.uint64(ref.size)
    module.get_function(f"mepgen_mask{ref.itemsize}")(r, n, np.uint64(key), block=(256, 1, 1), grid=(4, 1))
    counts = cuda.to_device(np.array([0, 2**64 - 1], np.uint64))
    module.get_function(f"mepgen_broken{ref.itemsize}")(g, r, n, np.uint64(key), counts, block=(256, 1, 1),
                                                         grid=(4, 1))
    got = cuda.from_device(counts, (2,), np.uint64)
    assert int(got[0]) == int((~np.isfinite(now) & np.isfinite(ref)).sum()) == 3 and int(got[1]) == 10
