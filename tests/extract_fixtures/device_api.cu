// Valid CUDA (nvcc -arch=sm_90 compiles it) that calls the device API kernels commonly use: math functions
// without <cmath>, intrinsics, half precision, warp collectives, cooperative groups. mepgen must parse it
// with no error (tests/test_extract_inputs.py).
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cooperative_groups.h>
#include <cstdint>
namespace cg = cooperative_groups;
__global__ void many(const float* __restrict__ a, float* b, double* d, int* c, unsigned long long* u, __half* h, int n)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = __ldg(a + i);
    v += __shfl_xor_sync(0xffffffffu, v, 16);
    v += __shfl_down_sync(0xffffffffu, v, 8);
    v += __shfl_up_sync(0xffffffffu, v, 1);
    v += __shfl_sync(0xffffffffu, v, 0);
    unsigned m = __activemask(); unsigned bal = __ballot_sync(m, v > 0.f);
    int pc = __popc(bal) + __clz(bal) + __ffs(bal);
    v = __fdividef(v, 3.0f) + __expf(v) + __logf(1.f + fabsf(v)) + rsqrtf(2.f) + fmaf(v, v, 1.f) + __saturatef(v);
    v += sinf(v) * cosf(v) + sqrtf(fabsf(v)) + exp2f(v) + powf(v, 2.f) + fminf(v, 1.f) + fmaxf(v, 0.f) + tanhf(v) + erff(v);
    double dd = d[i]; dd = fma(dd, 2.0, 1.0) + sqrt(fabs(dd)) + exp(dd) + log1p(fabs(dd)) + __dmul_rn(dd, dd);
    atomicAdd(b, v); atomicAdd(d, dd); atomicMax(c, pc); atomicCAS(c, 0, 1); atomicExch(c, 2); atomicAdd(u, 1ull);
    atomicMin(c, 3); atomicInc((unsigned*)c, 10u); atomicOr(c, 1); atomicAnd(c, 1); atomicXor(c, 1); atomicSub(c, 1);
    __half hv = __float2half(v); h[i] = __hadd(hv, __float2half(1.0f)); float back = __half2float(h[i]);
    long long t0 = clock64(); __nanosleep(10); __syncwarp(); __threadfence(); __threadfence_system();
    int lane = threadIdx.x & (warpSize - 1);
    cg::thread_block blk = cg::this_thread_block(); blk.sync();
    cg::thread_block_tile<32> tile = cg::tiled_partition<32>(blk);
    v += tile.shfl_down(v, 1);
    float4 f4 = reinterpret_cast<const float4*>(a)[0]; v += f4.x + f4.y + f4.z + f4.w;
    float2 f2 = make_float2(v, v); int4 i4 = make_int4(1, 2, 3, 4); uint32_t w = static_cast<uint32_t>(i4.x);
    v += __int_as_float(__float_as_int(v)) + __uint2float_rn(w) + __float2int_rn(v) + (float)__double2float_rn(dd);
    v += min(i, n) + max(i, n) + umin(1u, 2u) + llmin(1ll, 2ll);
    v += __ldcs(a + i) + __ldcg(a + i) + __ldca(a + i) + __ldlu(a + i);
    __stcs(b + i, v); __stwt(b + i, v);
    b[i] = v + back + lane + (float)t0 + f2.x + isnan(v) + isinf(v) + signbit(v) + copysignf(v, -1.f) + truncf(v) + floorf(v) + ceilf(v) + roundf(v) + rintf(v) + INFINITY;
    if (__any_sync(m, v > 1.f) && __all_sync(m, v > 0.f)) __syncthreads();
    int r = __syncthreads_count(v > 0.f) + __reduce_add_sync(m, (unsigned)pc) + __match_any_sync(m, pc);
    c[i] = r + __brev(r) + __popcll(1ull) + __byte_perm(r, r, 0) + __funnelshift_l(r, r, 3) + __mul24(r, r) + __umulhi(r, r) + __vabsdiffu4(r, r);
}
