// The original kernel file of the red-team suite: what `mepgen mep` writes for an axpy kernel.
#include <algorithm>
#include <cmath>
#include <vector>

namespace cg {
template <typename T>
__global__ void axpy(int n, T a, const T* x, T* y)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) y[i] = a * x[i] + y[i];
}
}  // namespace cg
