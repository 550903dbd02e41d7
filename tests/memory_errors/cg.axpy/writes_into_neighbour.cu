// OOB: writes one element past the end of its input x, in the application the next cudaMalloc'd buffer (x itself is left as it was) | EXPECT: out_of_bounds x after
namespace cg {
template <typename T>
__global__ void axpy(int n, T a, const T* x, T* y)
{
    const int first = blockIdx.x * blockDim.x + threadIdx.x;
    for (int i = first; i < n; i += blockDim.x * gridDim.x) {
        y[i] = a * x[i] + y[i];
        if (i == n - 1) const_cast<T*>(x)[n] = a;
    }
}
}  // namespace cg
