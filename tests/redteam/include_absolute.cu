// HOSTILE: includes an arbitrary file of the user by an absolute path | EXPECT: rules
#include "/root/.ssh/id_rsa"
namespace cg {
template <typename T>
__global__ void axpy(int n, T a, const T* x, T* y)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) y[i] = a * x[i] + y[i];
}
}  // namespace cg
