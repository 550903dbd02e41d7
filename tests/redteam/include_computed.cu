// HOSTILE: a computed include (the name comes from a macro) | EXPECT: rules
#define WHERE "../../eval/ref/set0/y.npy"
#include WHERE
namespace cg {
template <typename T>
__global__ void axpy(int n, T a, const T* x, T* y)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) y[i] = a * x[i] + y[i];
}
}  // namespace cg
