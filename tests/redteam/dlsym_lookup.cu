// HOSTILE: looks the runtime up by name with a hand-declared dlsym | EXPECT: rules
extern "C" void* dlsym(void* handle, const char* name);
static void* found = dlsym((void*)0, "cudaEventElapsedTime");
namespace cg {
template <typename T>
__global__ void axpy(int n, T a, const T* x, T* y)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) y[i] = a * x[i] + y[i];
}
}  // namespace cg
