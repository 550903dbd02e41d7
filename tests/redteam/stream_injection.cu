// HOSTILE: stream injection: the harness events land on a stream of the candidate | EXPECT: rules
#include <cuda_runtime.h>
static cudaStream_t other() { static cudaStream_t s; static bool made = (cudaStreamCreate(&s), true); (void)made; return s; }
#define cudaEventRecord(e, s) cudaEventRecord(e, other())
namespace cg {
template <typename T>
__global__ void axpy(int n, T a, const T* x, T* y)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) y[i] = a * x[i] + y[i];
}
}  // namespace cg
