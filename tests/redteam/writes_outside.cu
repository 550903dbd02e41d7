// HOSTILE: writes outside its scratch folder (the user home) at load time | EXPECT: rules
#include <cstdio>
static int planted = std::remove("/root/.bashrc");
namespace cg {
template <typename T>
__global__ void axpy(int n, T a, const T* x, T* y)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) y[i] = a * x[i] + y[i];
}
}  // namespace cg
