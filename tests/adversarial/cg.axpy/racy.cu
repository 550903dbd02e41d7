// ADVERSARY: races (neighbouring threads update each other's element without synchronization) | EXPECT: wrong_result
namespace cg {
template <typename T>
__global__ void axpy(int n, T a, const T* x, T* y)
{
    const int stride = blockDim.x * gridDim.x;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        y[i] = a * x[i] + y[i];
        if (i + 1 < n) y[i + 1] += T(1e-3) * y[i];
    }
}
}  // namespace cg
