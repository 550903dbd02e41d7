// CONTROL: an honest variant (unrolled grid-stride loop) that must be accepted | EXPECT: ok
namespace cg {
template <typename T>
__global__ void axpy(int n, T a, const T* x, T* y)
{
    const int stride = blockDim.x * gridDim.x;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
#pragma unroll 4
    for (; i < n; i += stride) {
        y[i] = a * __ldg(&x[i]) + y[i];
    }
}
}  // namespace cg
