// HOSTILE: a __constant__ pointer that carries a buffer from one launch to the next | EXPECT: rules
__constant__ float* remembered;
namespace cg {
template <typename T>
__global__ void axpy(int n, T a, const T* x, T* y)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) y[i] = a * x[i] + y[i];
}
}  // namespace cg
