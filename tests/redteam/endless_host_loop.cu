// HOSTILE: an endless loop at load time, before the harness can time anything | EXPECT: rules
static volatile int spin = [] { volatile int k = 0; for (;;) ++k; return 0; }();
namespace cg {
template <typename T>
__global__ void axpy(int n, T a, const T* x, T* y)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) y[i] = a * x[i] + y[i];
}
}  // namespace cg
