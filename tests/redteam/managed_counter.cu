// HOSTILE: managed memory that counts launches (timing launches could then skip work) | EXPECT: rules
__managed__ unsigned launches_seen;
namespace cg {
template <typename T>
__global__ void axpy(int n, T a, const T* x, T* y)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) y[i] = a * x[i] + y[i];
}
}  // namespace cg
