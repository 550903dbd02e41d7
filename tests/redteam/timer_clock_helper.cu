// HOSTILE: timer tampering through a host helper of the same name as the harness clock | EXPECT: rules
#include <chrono>
namespace std { namespace chrono { inline int mepgen_now_hook() { return 0; } } }
namespace cg {
template <typename T>
__global__ void axpy(int n, T a, const T* x, T* y)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) y[i] = a * x[i] + y[i];
}
}  // namespace cg
