// HOSTILE: a kernel that never returns (the GPU run must be killed by the time-out) | EXPECT: timeout
namespace cg {
template <typename T>
__global__ void axpy(int n, T a, const T* x, T* y)
{
    for (;;) {            // __nanosleep is a side effect: the compiler may not drop the loop (an empty
        __nanosleep(1000);  // endless loop is undefined behaviour in C++, and nvcc 13 removed one)
    }
}
}  // namespace cg
