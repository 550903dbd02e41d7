// kernel.cu of the MEP cg.axpy (hand-written test fixture in the format `mepgen mep` writes)
#line 37 "src/cg.cu"
namespace cg {
template <typename T>
__global__ void axpy(int n, T a, const T* x, T* y)
{
    const int stride = blockDim.x * gridDim.x;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        y[i] = a * x[i] + y[i];
    }
}
}  // namespace cg
