// ADVERSARY: skips work (processes only the first half of the vector) | EXPECT: wrong_result
namespace cg {
template <typename T>
__global__ void axpy(int n, T a, const T* x, T* y)
{
    const int stride = blockDim.x * gridDim.x;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n / 2; i += stride) {
        y[i] = a * x[i] + y[i];
    }
}
}  // namespace cg
