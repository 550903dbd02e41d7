// HOSTILE: a device-heap cache keyed on a few inputs, published through a __device__ pointer to const | EXPECT: rules
__device__ const float* memo_table;
__device__ float memo_key;
namespace cg {
template <typename T>
__global__ void axpy(int n, T a, const T* x, T* y)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (memo_table != nullptr && memo_key == x[0] + x[n - 1]) { if (i < n) y[i] = memo_table[i]; return; }
    for (; i < n; i += blockDim.x * gridDim.x) y[i] = a * x[i] + y[i];
}
}  // namespace cg
