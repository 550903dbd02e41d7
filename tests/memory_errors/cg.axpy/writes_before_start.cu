// OOB: the first thread also writes 64 elements before the start of its output y | EXPECT: out_of_bounds y before
namespace cg {
template <typename T>
__global__ void axpy(int n, T a, const T* x, T* y)
{
    const int first = blockIdx.x * blockDim.x + threadIdx.x;
    for (int i = first; i < n; i += blockDim.x * gridDim.x) {
        const T v = a * x[i] + y[i];
        y[i] = v;
        if (i == 0) y[i - 64] = v;
    }
}
}  // namespace cg
