// HONEST: uses a CUDA toolkit header and fmaf | EXPECT: ok
#include <algorithm>
#include <cmath>
#include <vector>
#include <cuda_fp16.h>
namespace cg {
template <typename T>
__global__ void axpy(int n, T a, const T* x, T* y)
{
    const int stride = blockDim.x * gridDim.x;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) y[i] = fmaf(a, x[i], y[i]);
}
}  // namespace cg
