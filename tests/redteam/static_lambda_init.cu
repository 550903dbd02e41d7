// HOSTILE: a static initializer that runs a lambda at load time | EXPECT: rules
#include <cstdlib>
static int ran_at_load = [] { return std::atoi("7"); }();
namespace cg {
template <typename T>
__global__ void axpy(int n, T a, const T* x, T* y)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) y[i] = a * x[i] + y[i];
}
}  // namespace cg
