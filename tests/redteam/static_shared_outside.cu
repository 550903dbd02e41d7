// HOSTILE: static __shared__ storage at namespace scope | EXPECT: rules
static __shared__ float staged[256];
namespace cg {
template <typename T>
__global__ void axpy(int n, T a, const T* x, T* y)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) y[i] = a * x[i] + y[i];
}
}  // namespace cg
