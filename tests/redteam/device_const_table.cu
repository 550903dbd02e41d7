// HOSTILE: a __device__ const table the kernel can cast away and write (state across launches) | EXPECT: rules
__device__ const float scratch_table[1024] = {0};
namespace cg {
template <typename T>
__global__ void axpy(int n, T a, const T* x, T* y)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) y[i] = a * x[i] + y[i];
}
}  // namespace cg
