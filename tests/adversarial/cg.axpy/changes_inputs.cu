// ADVERSARY: changes its input buffer x (casts away const) | EXPECT: wrong_result
namespace cg {
template <typename T>
__global__ void axpy(int n, T a, const T* x, T* y)
{
    const int stride = blockDim.x * gridDim.x;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const T v = a * x[i] + y[i];
        const_cast<T*>(x)[i] = v;
        y[i] = v;
    }
}
}  // namespace cg
