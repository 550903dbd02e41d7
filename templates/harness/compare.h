// compare.h -- outputs compared with the reference outputs on the GPU (mepgen/evaluate/device_compare.py says the
// rule), for the pycuda backend's worker (a cubin of this file). The native harness never holds references (its
// candidate's host code shares the process): it digests its outputs instead (digest.h).
//
// The references sit on the GPU XORed with a mask drawn from a key the host keeps and passes by value, so a kernel
// that reads device memory it was not given finds no reference outputs to copy. A float element is decoded to
// double from its bits with integer operations only (no float instruction, so no build flag such as -ftz or
// --use_fast_math can flush a denormal), and the rule's arithmetic uses the _rn intrinsics (no contraction).
typedef unsigned long long mepgen_u64;

__device__ __forceinline__ mepgen_u64 mepgen_mask(mepgen_u64 key, mepgen_u64 i)    /* splitmix64 of key and index */
{
    mepgen_u64 z = key + (i + 1) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// IEEE binary16/binary32 bits -> the bits of the same value as a binary64 (exact: every value is representable)
__host__ __device__ inline mepgen_u64 mepgen_widen_bits(mepgen_u64 sign, unsigned exp, mepgen_u64 man, int man_bits,
                                                        int bias, unsigned exp_max)
{
    const mepgen_u64 s = sign << 63;
    if (exp == exp_max) return s | 0x7FF0000000000000ull | (man << (52 - man_bits));        // Inf, NaN (payload kept)
    if (exp == 0) {
        if (man == 0) return s;                                                               // +-0
        int top = man_bits - 1;                                                               // a subnormal: normalize
        while (!((man >> top) & 1)) --top;
        const mepgen_u64 e = (mepgen_u64)(top - man_bits + 1 - bias + 1023);
        return s | (e << 52) | ((man << (52 - top)) & 0x000FFFFFFFFFFFFFull);
    }
    return s | ((mepgen_u64)(exp - bias + 1023) << 52) | (man << (52 - man_bits));
}
__host__ __device__ inline mepgen_u64 mepgen_wide_bits(unsigned short b)
{
    return mepgen_widen_bits(b >> 15, (b >> 10) & 0x1F, b & 0x3FF, 10, 15, 0x1F);
}
__host__ __device__ inline mepgen_u64 mepgen_wide_bits(unsigned int b)
{
    return mepgen_widen_bits(b >> 31, (b >> 23) & 0xFF, b & 0x7FFFFF, 23, 127, 0xFF);
}
__host__ __device__ inline mepgen_u64 mepgen_wide_bits(mepgen_u64 b) { return b; }

__device__ __forceinline__ double mepgen_as_double(mepgen_u64 bits) { return __longlong_as_double((long long)bits); }

template <typename U> __device__ void mepgen_mask_bits(U *a, mepgen_u64 n, mepgen_u64 key)
{
    for (mepgen_u64 i = blockIdx.x * (mepgen_u64)blockDim.x + threadIdx.x; i < n; i += (mepgen_u64)gridDim.x * blockDim.x)
        a[i] ^= (U)mepgen_mask(key, i);
}
__device__ __forceinline__ void mepgen_bad(mepgen_u64 *out, mepgen_u64 i) { atomicAdd(&out[0], 1ull); atomicMin(&out[1], i); }
template <typename U> __device__ void mepgen_same_bits(const U *got, const U *ref, mepgen_u64 n, mepgen_u64 key, mepgen_u64 *out)
{
    for (mepgen_u64 i = blockIdx.x * (mepgen_u64)blockDim.x + threadIdx.x; i < n; i += (mepgen_u64)gridDim.x * blockDim.x)
        if (got[i] != (U)(ref[i] ^ (U)mepgen_mask(key, i))) mepgen_bad(out, i);
}
template <typename U> __device__ void mepgen_close_floats(const U *got, const U *ref, mepgen_u64 n, mepgen_u64 key, double rtol,
                                                         double atol, int poisoned, mepgen_u64 *out)
{
    const U poison = (U)~(U)0;
    for (mepgen_u64 i = blockIdx.x * (mepgen_u64)blockDim.x + threadIdx.x; i < n; i += (mepgen_u64)gridDim.x * blockDim.x) {
        U gb = got[i], rb = (U)(ref[i] ^ (U)mepgen_mask(key, i));
        bool ok;
        if (poisoned && rb == poison) {
            ok = gb == poison;
        } else {
            double g = mepgen_as_double(mepgen_wide_bits(gb)), r = mepgen_as_double(mepgen_wide_bits(rb));
            double err = fabs(__dsub_rn(g, r));
            ok = isfinite(err) && isfinite(r) && err <= __dadd_rn(atol, __dmul_rn(rtol, fabs(r)));
        }
        if (!ok) mepgen_bad(out, i);
    }
}
#define MEPGEN_BITS(S, U) \
    extern "C" __global__ void mepgen_mask##S(U *a, mepgen_u64 n, mepgen_u64 key) { mepgen_mask_bits(a, n, key); } \
    extern "C" __global__ void mepgen_same##S(const U *g, const U *r, mepgen_u64 n, mepgen_u64 key, mepgen_u64 *out) { \
        mepgen_same_bits(g, r, n, key, out); }
MEPGEN_BITS(1, unsigned char) MEPGEN_BITS(2, unsigned short) MEPGEN_BITS(4, unsigned int) MEPGEN_BITS(8, mepgen_u64)
#define MEPGEN_CLOSE(S, U) \
    extern "C" __global__ void mepgen_close##S(const U *g, const U *r, mepgen_u64 n, mepgen_u64 key, double rtol, \
                                               double atol, int poisoned, mepgen_u64 *out) { \
        mepgen_close_floats(g, r, n, key, rtol, atol, poisoned, out); }
MEPGEN_CLOSE(2, unsigned short) MEPGEN_CLOSE(4, unsigned int) MEPGEN_CLOSE(8, mepgen_u64)
// the perturbation re-check's guard: elements non-finite in `now` (the original on changed inputs) and finite in
// the masked reference (perturb.recheck's `broken`)
template <typename U> __device__ void mepgen_broken_floats(const U *now, const U *ref, mepgen_u64 n, mepgen_u64 key, mepgen_u64 *out)
{
    for (mepgen_u64 i = blockIdx.x * (mepgen_u64)blockDim.x + threadIdx.x; i < n; i += (mepgen_u64)gridDim.x * blockDim.x)
        if (!isfinite(mepgen_as_double(mepgen_wide_bits(now[i])))
            && isfinite(mepgen_as_double(mepgen_wide_bits((U)(ref[i] ^ (U)mepgen_mask(key, i))))))
            mepgen_bad(out, i);
}
#define MEPGEN_BROKEN(S, U) \
    extern "C" __global__ void mepgen_broken##S(const U *now, const U *r, mepgen_u64 n, mepgen_u64 key, mepgen_u64 *out) { \
        mepgen_broken_floats(now, r, n, key, out); }
MEPGEN_BROKEN(2, unsigned short) MEPGEN_BROKEN(4, unsigned int) MEPGEN_BROKEN(8, mepgen_u64)
