// HOSTILE: a load-time function whose attribute hides behind a macro of its own | EXPECT: rules
#define AT_LOAD __attribute__((__constructor__))
AT_LOAD static void early() { }
namespace cg {
template <typename T>
__global__ void axpy(int n, T a, const T* x, T* y)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) y[i] = a * x[i] + y[i];
}
}  // namespace cg
