"""Outputs compared with the reference outputs on the GPU, for the pycuda worker: only a count comes back.

The rule is verify.compare's, element for element, in the same arithmetic: a floating element (float16, float32,
float64) matches when, in float64, `|got - ref| <= atol + rtol * |ref|` with the difference and the reference
finite (NaN and Inf never match), each operation rounded as numpy rounds it (no fused multiply-add); where the
buffer is poisoned (role `out`) and the reference element still holds the poison (the original leaves it
unwritten), it matches only when it is unwritten in the candidate's output too; integers and bools match bit for
bit. Every other dtype (complex, records) is compared on the host. A mismatch count above zero sends the outputs
back to the parent, which computes the evidence with verify.compare: the device only says "all match" faster.

The perturbation re-check (perturb.recheck) runs there too: the candidate's outputs on the changed inputs against
the original's on the same inputs (the latter masked in place first), how many of the original's elements the
change moved (`followed`, against the reference) and whether it made any non-finite (`broken`); only when all
match does nothing come back. The same kernels tell whether a run wrote into an `in` buffer: its bits against a copy of the input set's (the
worker's _differs), instead of copying every input back to the host after every run.

The references stay on the GPU across candidates, each element XORed with a mask drawn from a key the worker
keeps in its own memory and passes to these kernels by value: a candidate kernel that reads device memory it was
not given finds no reference outputs to copy.
"""
from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

import numpy as np

from .. import mepbuild
from ..errors import MepgenError
from . import process
from .verify import tolerance_for

BLOCK = 256

SOURCE = r"""
#include <cuda_fp16.h>
typedef unsigned long long u64;
__device__ __forceinline__ u64 mepgen_mask(u64 key, u64 i) {            /* splitmix64 of key and index */
    u64 z = key + (i + 1) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
template <typename U> __device__ void mask_bits(U *a, u64 n, u64 key) {
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x)
        a[i] ^= (U)mepgen_mask(key, i);
}
__device__ __forceinline__ void mepgen_bad(u64 *out, u64 i) { atomicAdd(&out[0], 1ull); atomicMin(&out[1], i); }
template <typename U> __device__ void same_bits(const U *got, const U *ref, u64 n, u64 key, u64 *out) {
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x)
        if (got[i] != (U)(ref[i] ^ (U)mepgen_mask(key, i))) mepgen_bad(out, i);
}
__device__ __forceinline__ double as_double(unsigned short b) { return (double)__half2float(__ushort_as_half(b)); }
__device__ __forceinline__ double as_double(unsigned int b) { return (double)__uint_as_float(b); }
__device__ __forceinline__ double as_double(u64 b) { return __longlong_as_double((long long)b); }
template <typename U> __device__ void close_floats(const U *got, const U *ref, u64 n, u64 key, double rtol,
                                                  double atol, int poisoned, u64 *out) {
    const U poison = (U)~(U)0;
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) {
        U gb = got[i], rb = (U)(ref[i] ^ (U)mepgen_mask(key, i));
        bool ok;
        if (poisoned && rb == poison) {
            ok = gb == poison;
        } else {
            double g = as_double(gb), r = as_double(rb);
            double err = fabs(__dsub_rn(g, r));
            ok = isfinite(err) && isfinite(r) && err <= __dadd_rn(atol, __dmul_rn(rtol, fabs(r)));
        }
        if (!ok) mepgen_bad(out, i);
    }
}
#define MEPGEN_BITS(S, U) \
    extern "C" __global__ void mepgen_mask##S(U *a, u64 n, u64 key) { mask_bits(a, n, key); } \
    extern "C" __global__ void mepgen_same##S(const U *g, const U *r, u64 n, u64 key, u64 *out) { \
        same_bits(g, r, n, key, out); }
MEPGEN_BITS(1, unsigned char) MEPGEN_BITS(2, unsigned short) MEPGEN_BITS(4, unsigned int) MEPGEN_BITS(8, u64)
#define MEPGEN_CLOSE(S, U) \
    extern "C" __global__ void mepgen_close##S(const U *g, const U *r, u64 n, u64 key, double rtol, double atol, \
                                               int poisoned, u64 *out) { \
        close_floats(g, r, n, key, rtol, atol, poisoned, out); }
MEPGEN_CLOSE(2, unsigned short) MEPGEN_CLOSE(4, unsigned int) MEPGEN_CLOSE(8, u64)
/* the perturbation re-check's guard: elements non-finite in `now` (the original on changed inputs) and finite in
   the masked reference (perturb.recheck's `broken`) */
template <typename U> __device__ void broken_floats(const U *now, const U *ref, u64 n, u64 key, u64 *out) {
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x)
        if (!isfinite(as_double(now[i])) && isfinite(as_double((U)(ref[i] ^ (U)mepgen_mask(key, i)))))
            mepgen_bad(out, i);
}
#define MEPGEN_BROKEN(S, U) \
    extern "C" __global__ void mepgen_broken##S(const U *now, const U *r, u64 n, u64 key, u64 *out) { \
        broken_floats(now, r, n, key, out); }
MEPGEN_BROKEN(2, unsigned short) MEPGEN_BROKEN(4, unsigned int) MEPGEN_BROKEN(8, u64)
"""


def kernel_for(dtype: str) -> str | None:
    """The comparison kernel of an output's dtype (without the mask's), or None: compared on the host."""
    dt = np.dtype(dtype)
    if dt.kind == "f" and dt.itemsize in (2, 4, 8):
        return f"mepgen_close{dt.itemsize}"
    if dt.kind in "iub" and dt.itemsize in (1, 2, 4, 8):
        return f"mepgen_same{dt.itemsize}"
    return None


def build_cubin(arch: str, build_dir: Path, timeout: float = 300.0) -> Path:
    """The comparison kernels compiled for `arch` (cached by arch and source); MepgenError when nvcc fails."""
    out = Path(build_dir) / f"compare-{arch}-{hashlib.sha256(SOURCE.encode()).hexdigest()[:12]}.cubin"
    if out.is_file():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    src = out.with_suffix(".cu")
    src.write_text(SOURCE)
    tmp = out.with_name(f"{out.stem}.{os.getpid()}.{time.monotonic_ns()}.tmp")
    # -fmad=false besides the _rn intrinsics: no contraction anywhere in the rule
    cmd = [mepbuild.nvcc_executable(), mepbuild.arch_flag(arch), "-fmad=false", "-cubin", str(src), "-o", str(tmp)]
    try:
        done = process.run(cmd, timeout=timeout)
    except FileNotFoundError:
        raise MepgenError(f"{cmd[0]} not found: install the CUDA toolkit or set $NVCC") from None
    if done.returncode != 0 or not tmp.is_file():
        tmp.unlink(missing_ok=True)
        why = "timed out" if done.timed_out else (done.stderr or done.stdout).strip()[-300:]
        raise MepgenError(f"cannot build the output comparison kernels for {arch}: {why}")
    os.replace(tmp, out)
    return out


def rules_for(spec) -> dict[str, list]:
    """Each output the GPU can compare: [kernel, rtol, atol, poisoned] (verify.tolerance_for; poisoned: role out)."""
    rules = {}
    for p in spec.outputs:
        kernel = kernel_for(p.dtype) if p.dtype else None
        if kernel is not None:
            tol = tolerance_for(spec, p.name)
            rules[p.name] = [kernel, float(tol.rtol), float(tol.atol), p.role == "out"]
    return rules
