// ADVERSARY: moves the work to another stream so the harness's events time nothing | EXPECT: rejected_by_rules
#include <cuda_runtime.h>
namespace cg {
template <typename T>
__global__ void axpy_work(int n, T a, const T* x, T* y)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) y[i] = a * x[i] + y[i];
}
template <typename T>
__global__ void axpy(int n, T a, const T* x, T* y) { }
}  // namespace cg
static cudaStream_t mepgen_side_stream()
{
    static cudaStream_t s = [] { cudaStream_t t; cudaStreamCreateWithFlags(&t, cudaStreamNonBlocking); return t; }();
    return s;
}
// every event the harness records lands on the idle side stream instead
#define cudaEventRecord(event, stream) cudaEventRecord(event, mepgen_side_stream())
