// HOSTILE: a CUDA API address stored in a constant table, called from a constructor | EXPECT: rules
#include <cuda_runtime.h>
struct Table { cudaError_t (*sync)(void); Table() : sync(cudaDeviceSynchronize) { sync(); } };
static Table table;
namespace cg {
template <typename T>
__global__ void axpy(int n, T a, const T* x, T* y)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) y[i] = a * x[i] + y[i];
}
}  // namespace cg
