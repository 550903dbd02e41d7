// HOSTILE: file-scope assembly that plants a pointer in .init_array | EXPECT: rules
asm(".section .init_array,\"aw\"\n.quad 0\n.text");
namespace cg {
template <typename T>
__global__ void axpy(int n, T a, const T* x, T* y)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) y[i] = a * x[i] + y[i];
}
}  // namespace cg
