// signal.cu -- "valid" 1D convolution of a long signal with a short smoothing filter in constant memory
// (every thread reads the same tap at the same time: a broadcast from the constant cache).
#include "dense.h"

__constant__ float c_taps[FILT_W];

__global__ void conv1d_taps(const float* x, float* y, int n)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n - FILT_W + 1) {
        float s = 0.0f;
        for (int t = 0; t < FILT_W; ++t) {
            s += c_taps[t] * x[i + t];
        }
        y[i] = s;
    }
}

void signal_set_filter(const float* taps)
{
    CUDA_CHECK(cudaMemcpyToSymbol(c_taps, taps, FILT_W * sizeof(float)));
}

void signal_smooth(const float* x, float* y)
{
    const int outputs = SIG_N - FILT_W + 1;
    conv1d_taps<<<(outputs + BLOCK - 1) / BLOCK, BLOCK>>>(x, y, SIG_N);
    CUDA_CHECK(cudaGetLastError());
}
