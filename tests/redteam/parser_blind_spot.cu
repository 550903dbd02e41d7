// HOSTILE: host code only a compiler other than the rules parser would see | EXPECT: rules
#ifndef __clang__
static int only_gcc_sees = 1;
#endif
namespace cg {
template <typename T>
__global__ void axpy(int n, T a, const T* x, T* y)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) y[i] = a * x[i] + y[i];
}
}  // namespace cg
