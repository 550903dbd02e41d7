// HOSTILE: timer tampering: its own definition of the runtime timer function wins at link time | EXPECT: rules
#include <cuda_runtime.h>
extern "C" cudaError_t cudaEventElapsedTime_v2(float* ms, cudaEvent_t a, cudaEvent_t b) { *ms = 0.001f; return cudaSuccess; }
namespace cg {
template <typename T>
__global__ void axpy(int n, T a, const T* x, T* y)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) y[i] = a * x[i] + y[i];
}
}  // namespace cg
