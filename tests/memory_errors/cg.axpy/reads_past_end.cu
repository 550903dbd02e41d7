// OOB: reads 4 KiB past the end of its input x (a value it then ignores: the result is right) | EXPECT: memcheck x after
namespace cg {
template <typename T>
__global__ void axpy(int n, T a, const T* x, T* y)
{
    const int first = blockIdx.x * blockDim.x + threadIdx.x;
    for (int i = first; i < n; i += blockDim.x * gridDim.x) {
        T v = a * x[i] + y[i];
        if (i == n - 1 && x[n + 1024] == T(12345)) v += T(1e-30);
        y[i] = v;
    }
}
}  // namespace cg
