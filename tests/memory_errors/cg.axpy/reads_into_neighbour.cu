// OOB: a halo read 128 elements ahead with no bound: the last threads read the 512 bytes after x, in the application the next cudaMalloc'd buffer | EXPECT: memcheck x after
namespace cg {
template <typename T>
__global__ void axpy(int n, T a, const T* x, T* y)
{
    const int first = blockIdx.x * blockDim.x + threadIdx.x;
    for (int i = first; i < n; i += blockDim.x * gridDim.x) {
        T v = a * x[i] + y[i];
        if (x[i + 128] == T(12345)) v += T(1e-30);
        y[i] = v;
    }
}
}  // namespace cg
