// HOSTILE: a kernel that never returns (the GPU run must be killed by the time-out) | EXPECT: timeout
namespace cg {
template <typename T>
__global__ void axpy(int n, T a, const T* x, T* y)
{
    volatile int spin = 1;
    while (spin) { }
}
}  // namespace cg
