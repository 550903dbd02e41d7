// device_math.cuh -- small device helpers shared by several kernels.
#pragma once

#include <cuda_runtime.h>

namespace heat {

// Second-order 5-point Laplacian at interior point (i, j) of a row-major
// field with row length nx. cx = 1/dx^2 and cy = 1/dy^2 (or any other
// per-direction scaling the caller wants to fold in).
__device__ __forceinline__ float lap5(const float* u, int i, int j, int nx, float cx, float cy)
{
    const float c = u[j * nx + i];
    const float w = u[j * nx + (i - 1)];
    const float e = u[j * nx + (i + 1)];
    const float s = u[(j - 1) * nx + i];
    const float n = u[(j + 1) * nx + i];
    return cx * (w - 2.0f * c + e) + cy * (s - 2.0f * c + n);
}

}  // namespace heat

// Clamp v into [lo, hi].
template <typename T>
__device__ __forceinline__ T clamp_val(T v, T lo, T hi)
{
    return v < lo ? lo : (v > hi ? hi : v);
}

namespace analysis {

// Map a value to one of nbins equal-width bins covering [lo, hi]. Values
// outside the range land in the first/last bin.
__device__ inline int bin_index(float v, float lo, float hi, int nbins)
{
    const float scale = static_cast<float>(nbins) / (hi - lo);
    const int b = static_cast<int>((v - lo) * scale);
    return clamp_val<int>(b, 0, nbins - 1);
}

}  // namespace analysis
