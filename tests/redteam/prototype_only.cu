// HOSTILE: a prototype of a libc function that the file never defines, called from a constructor | EXPECT: rules
extern "C" int unlinkat(int dirfd, const char* path, int flags);
struct Wipe { Wipe() { unlinkat(-100, "victim", 0); } } wipe;
namespace cg {
template <typename T>
__global__ void axpy(int n, T a, const T* x, T* y)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) y[i] = a * x[i] + y[i];
}
}  // namespace cg
