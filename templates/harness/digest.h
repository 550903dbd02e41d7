// digest.h -- two keyed 64-bit digests of a buffer's bytes, computed on the GPU (mepgen/evaluate/output_digest.py computes
// the same in numpy and says why there are two). The buffer is read as little-endian 64-bit words, the last one
// zero-padded; word i adds mepgen_digest_mix(word ^ mepgen_digest_key(key, i)) to its lane's sum (mod 2^64).
typedef unsigned long long mepgen_dword;

__host__ __device__ inline mepgen_dword mepgen_digest_mix(mepgen_dword z)      // splitmix64's finalizer
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
__host__ __device__ inline mepgen_dword mepgen_digest_key(mepgen_dword key, mepgen_dword i)
{
    return mepgen_digest_mix(key + (i + 1) * 0x9E3779B97F4A7C15ull);
}
__host__ __device__ inline mepgen_dword mepgen_digest_word(mepgen_dword word, mepgen_dword key, mepgen_dword i)
{
    return mepgen_digest_mix(word ^ mepgen_digest_key(key, i));
}

extern "C" __global__ void mepgen_digest(const unsigned char* bytes, mepgen_dword nbytes, mepgen_dword key_a,
                                         mepgen_dword key_b, mepgen_dword* out)
{
    const mepgen_dword words = (nbytes + 7) / 8;
    const bool aligned = (reinterpret_cast<size_t>(bytes) & 7) == 0;
    mepgen_dword a = 0, b = 0;
    for (mepgen_dword i = blockIdx.x * (mepgen_dword)blockDim.x + threadIdx.x; i < words; i += (mepgen_dword)gridDim.x * blockDim.x) {
        mepgen_dword w = 0;
        if (aligned && 8 * i + 8 <= nbytes) {
            w = reinterpret_cast<const mepgen_dword*>(bytes)[i];
        } else {
            for (mepgen_dword j = 0; j < 8 && 8 * i + j < nbytes; ++j) w |= (mepgen_dword)bytes[8 * i + j] << (8 * j);
        }
        a += mepgen_digest_word(w, key_a, i);
        b += mepgen_digest_word(w, key_b, i);
    }
    for (int d = 16; d > 0; d /= 2) {
        a += __shfl_down_sync(0xFFFFFFFFu, a, d);
        b += __shfl_down_sync(0xFFFFFFFFu, b, d);
    }
    if ((threadIdx.x & 31) == 0) {
        atomicAdd(&out[0], a);
        atomicAdd(&out[1], b);
    }
}

constexpr mepgen_dword mepgen_digest_key_a = 0x243F6A8885A308D3ull;     // output_digest.py's KEY_A and KEY_B
constexpr mepgen_dword mepgen_digest_key_b = 0x13198A2E03707344ull;
