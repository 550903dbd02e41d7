// HOSTILE: the CUDA host API through a function pointer, no call syntax on the name | EXPECT: rules
#include <cuda_runtime.h>
static cudaStream_t hidden_stream;
static auto make_stream = cudaStreamCreate;
static int stream_made = make_stream(&hidden_stream);
namespace cg {
template <typename T>
__global__ void axpy(int n, T a, const T* x, T* y)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) y[i] = a * x[i] + y[i];
}
}  // namespace cg
