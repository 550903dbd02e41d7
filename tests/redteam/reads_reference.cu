// HOSTILE: reads the reference outputs at load time from the evaluator folder | EXPECT: rules
#include <cstdio>
static std::FILE* ref = std::fopen("../../ref/set0/y.npy", "rb");
namespace cg {
template <typename T>
__global__ void axpy(int n, T a, const T* x, T* y)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) y[i] = a * x[i] + y[i];
}
}  // namespace cg
