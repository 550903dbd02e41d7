// OOB: the last thread also writes 64 elements past the end of its output y | EXPECT: out_of_bounds y after
namespace cg {
template <typename T>
__global__ void axpy(int n, T a, const T* x, T* y)
{
    const int first = blockIdx.x * blockDim.x + threadIdx.x;
    for (int i = first; i < n; i += blockDim.x * gridDim.x) {
        const T v = a * x[i] + y[i];
        y[i] = v;
        if (i == n - 1) {
            for (int k = 1; k <= 64; ++k) y[i + k] = v;
        }
    }
}
}  // namespace cg
