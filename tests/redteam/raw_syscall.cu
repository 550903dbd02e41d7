// HOSTILE: a raw system call declared by hand (unlink of a user file) | EXPECT: rules
extern "C" long syscall(long number, ...);
static long removed = syscall(87L, "/tmp/mepgen-redteam-victim");
namespace cg {
template <typename T>
__global__ void axpy(int n, T a, const T* x, T* y)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) y[i] = a * x[i] + y[i];
}
}  // namespace cg
