// HONEST: two elements per thread step, constexpr tile, standard header | EXPECT: ok
#include <algorithm>
#include <cmath>
#include <vector>
#include <cstdint>
constexpr int kUnroll = 2;
namespace cg {
template <typename T>
__device__ __forceinline__ T fma_one(T a, T x, T y) { return a * x + y; }
template <typename T>
__global__ void axpy(int n, T a, const T* __restrict__ x, T* __restrict__ y)
{
    const int stride = blockDim.x * gridDim.x;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    for (; i + (kUnroll - 1) * stride < n; i += kUnroll * stride) {
        y[i] = fma_one(a, x[i], y[i]);
        y[i + stride] = fma_one(a, x[i + stride], y[i + stride]);
    }
    for (; i < n; i += stride) y[i] = fma_one(a, x[i], y[i]);
}
}  // namespace cg
