// One-element-per-thread kernels of the shapes vector_elements serves (written for mepgen's tests):
//  - relax_planes: three planes of one array at offsets of n each (structure of arrays), no guard: the grid is
//    exactly the work;
//  - scale_rows: a 2D launch over rows of doubles, a per-row factor read by every element of the row (a gather
//    that stays scalar), the column and the row both guarded;
//  - clamp_inplace: an update in place behind an early return.
// Builds alone: nvcc -O3 -arch=sm_90 app.cu
#include <cstdio>
#include <cuda_runtime.h>

#define N (1 << 20)
#define W 1000
#define H 512

__global__ void relax_planes(const float *prev, const float *rhs, float *next, float dt, int n)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    float r = rhs[i] * dt;
    next[i] = prev[i] + r;
    next[i + n] = prev[i + n] - r * prev[i + 2 * n];
    next[i + 2 * n] = 0.5f * (prev[i + 2 * n] + prev[i]);
}

__global__ void scale_rows(const double *in, const double *factor, double *out, int w, int h)
{
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (col < w && row < h) {
        out[row * w + col] = in[row * w + col] * factor[row] + 1.0;
    }
}

__global__ void clamp_inplace(float *x, float lo, float hi, int n)
{
    int i = threadIdx.x + blockIdx.x * blockDim.x;
    if (i >= n) return;
    float v = x[i];
    v = v < lo ? lo : v;
    v = v > hi ? hi : v;
    x[i] = v * 0.5f;
}

int main()
{
    float *prev, *rhs, *next, *x;
    double *in, *factor, *out;
    cudaMalloc(&prev, 3 * N * sizeof(float));
    cudaMalloc(&rhs, N * sizeof(float));
    cudaMalloc(&next, 3 * N * sizeof(float));
    cudaMalloc(&x, N * sizeof(float));
    cudaMalloc(&in, W * H * sizeof(double));
    cudaMalloc(&factor, H * sizeof(double));
    cudaMalloc(&out, W * H * sizeof(double));
    cudaMemset(prev, 0, 3 * N * sizeof(float));
    cudaMemset(rhs, 0, N * sizeof(float));
    cudaMemset(x, 0, N * sizeof(float));
    cudaMemset(in, 0, W * H * sizeof(double));
    cudaMemset(factor, 0, H * sizeof(double));
    relax_planes<<<N / 256, 256>>>(prev, rhs, next, 0.1f, N);
    dim3 block(32, 8);
    dim3 grid((W + 31) / 32, (H + 7) / 8);
    scale_rows<<<grid, block>>>(in, factor, out, W, H);
    clamp_inplace<<<(N + 255) / 256, 256>>>(x, -1.0f, 1.0f, N);
    float check = 0.0f;
    cudaMemcpy(&check, next, sizeof(float), cudaMemcpyDeviceToHost);
    printf("%f\n", check);
    cudaFree(prev); cudaFree(rhs); cudaFree(next); cudaFree(x);
    cudaFree(in); cudaFree(factor); cudaFree(out);
    return 0;
}
