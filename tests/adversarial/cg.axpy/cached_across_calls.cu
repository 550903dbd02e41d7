// ADVERSARY: computes once and replays the cached result on later launches | EXPECT: rejected_by_rules
__device__ float mepgen_cache[1 << 24];
__device__ int mepgen_have_cache;
namespace cg {
template <typename T>
__global__ void axpy(int n, T a, const T* x, T* y)
{
    const int stride = blockDim.x * gridDim.x;
    const bool replay = mepgen_have_cache != 0;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        if (replay) { y[i] = mepgen_cache[i]; continue; }
        y[i] = a * x[i] + y[i];
        mepgen_cache[i] = y[i];
    }
    if (blockIdx.x == 0 && threadIdx.x == 0) mepgen_have_cache = 1;
}
}  // namespace cg
