// HOSTILE: a global object whose constructor reads a file at load time | EXPECT: rules
#include <cstdio>
struct Snoop { Snoop() { if (std::FILE* f = std::fopen("/etc/passwd", "r")) std::fclose(f); } };
Snoop snoop_at_start;
namespace cg {
template <typename T>
__global__ void axpy(int n, T a, const T* x, T* y)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) y[i] = a * x[i] + y[i];
}
}  // namespace cg
