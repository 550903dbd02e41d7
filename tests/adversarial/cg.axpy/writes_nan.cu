// ADVERSARY: writes NaN for some elements | EXPECT: wrong_result
namespace cg {
template <typename T>
__global__ void axpy(int n, T a, const T* x, T* y)
{
    const int stride = blockDim.x * gridDim.x;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const T v = a * x[i] + y[i];
        y[i] = (x[i] > T(0.999)) ? T(0.0) / T(0.0) : v;
    }
}
}  // namespace cg
