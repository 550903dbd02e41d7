// The L2 flush before each timed launch (the harness's --time loop, peaks.cu's streaming curve, and the pycuda
// backend's worker, which launches the same kernel with the geometry of mepgen/evaluate/l2_flush.py).
//
// A kernel reads a buffer of twice the L2's size, so the lines it leaves in the L2 are clean: the timed
// kernel then starts with nothing of its own cached and never pays for writing back the flush. A memset
// (mepgen's flush until 2026-11) leaves the L2 full of dirty lines, and a streaming kernel evicts them inside
// its timed window: on an H200 a 64 MiB read then wrote 20-23 MB to DRAM and took 24-25 us instead of
// 18-19 us (bench/results/l2_flush.md).
extern "C" __global__ void mepgen_l2_flush(const int4* __restrict__ buffer, unsigned long long count, int* sink)
{
    int acc = 0;
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < count;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        const int4 v = buffer[i];
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == 0x5eed5eed) *sink = acc;   // the buffer is zeroed once, so never true: it only keeps the loads
}

constexpr int mepgen_l2_flush_block = 512;           // threads per block
constexpr int mepgen_l2_flush_blocks_per_sm = 8;

// The flush buffer's size for an L2 of `l2_bytes`: twice the L2 (at least 2 MiB), in whole int4s.
inline size_t mepgen_l2_flush_bytes(int l2_bytes)
{
    return 2 * static_cast<size_t>(l2_bytes > (1 << 20) ? l2_bytes : (1 << 20)) / 16 * 16;
}

// One flush on `stream` over `buffer` (mepgen_l2_flush_bytes long, zeroed once by the caller).
inline void mepgen_l2_flush_launch(const void* buffer, size_t bytes, int* sink, int sms, cudaStream_t stream)
{
    mepgen_l2_flush<<<sms * mepgen_l2_flush_blocks_per_sm, mepgen_l2_flush_block, 0, stream>>>(
        static_cast<const int4*>(buffer), bytes / 16, sink);
}
