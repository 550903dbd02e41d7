// HOSTILE: a __host__ __device__ helper whose host half reaches the runtime | EXPECT: rules
#include <cuda_runtime.h>
__host__ __device__ inline int helper() {
#ifndef __CUDA_ARCH__
    cudaDeviceSynchronize();
#endif
    return 1; }
namespace cg {
template <typename T>
__global__ void axpy(int n, T a, const T* x, T* y)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) y[i] = a * x[i] + y[i];
}
}  // namespace cg
