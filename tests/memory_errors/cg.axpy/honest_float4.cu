// CONTROL: honest float4 loads and stores (16-byte aligned buffers: the guards keep the alignment) | EXPECT: ok
namespace cg {
template <typename T>
__global__ void axpy(int n, T a, const T* x, T* y)
{
    const int stride = blockDim.x * gridDim.x;
    const int first = blockIdx.x * blockDim.x + threadIdx.x;
    const int n4 = n / 4;
    const float4* x4 = reinterpret_cast<const float4*>(x);
    float4* y4 = reinterpret_cast<float4*>(y);
    for (int i = first; i < n4; i += stride) {
        const float4 xv = x4[i];
        float4 yv = y4[i];
        yv.x = a * xv.x + yv.x;
        yv.y = a * xv.y + yv.y;
        yv.z = a * xv.z + yv.z;
        yv.w = a * xv.w + yv.w;
        y4[i] = yv;
    }
    for (int i = n4 * 4 + first; i < n; i += stride) y[i] = a * x[i] + y[i];
}
}  // namespace cg
