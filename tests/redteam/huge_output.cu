// HOSTILE: prints without end at load time | EXPECT: rules
#include <cstdio>
static int spam = [] { for (;;) std::puts("flood flood flood flood flood flood flood flood"); return 0; }();
namespace cg {
template <typename T>
__global__ void axpy(int n, T a, const T* x, T* y)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) y[i] = a * x[i] + y[i];
}
}  // namespace cg
