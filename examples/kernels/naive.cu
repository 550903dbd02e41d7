// naive.cu -- naive kernels as scientific codes first write them: one thread per output element, the
// obvious loop, global memory for everything. mepgen's library must speed them up or refuse with reason.
#include <cstdio>
#include <cuda_runtime.h>

#ifndef N
#define N 4096
#endif
#ifndef KW
#define KW 9
#endif
#ifndef BLOCK
#define BLOCK 256
#endif

// y = A x, A row-major: one thread per row walks its row (neighbouring threads are N floats apart).
__global__ void matvec_rows(const float* A, const float* x, float* y, int n)
{
    const int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < n) {
        float s = 0.0f;
        for (int j = 0; j < n; ++j) s += A[row * n + j] * x[j];
        y[row] = s;
    }
}

// y = A^T x with A row-major (a column-major matrix-vector): thread per column, reads already coalesced.
__global__ void matvec_cols(const float* A, const float* x, float* y, int n)
{
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (col < n) {
        y[col] = 0.0f;
        for (int i = 0; i < n; ++i) y[col] += A[i * n + col] * x[i];
    }
}

// Sum of squares of every row (a row norm), accumulated in the output array.
__global__ void row_sumsq(const float* A, float* out, int n)
{
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < n) {
        out[r] = 0.0f;
        for (int j = 0; j < n; ++j) out[r] += A[r * n + j] * A[r * n + j];
    }
}

// Counts of integer labels (a histogram of cell types).
__global__ void label_counts(const int* labels, int n, unsigned int* counts)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        atomicAdd(&counts[labels[i] & 31], 1u);
    }
}

// 1D convolution with a KW-tap filter, the filter read from global memory.
__global__ void conv1d(const float* in, const float* w, float* out, int n)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n - KW + 1) {
        float s = 0.0f;
        for (int k = 0; k < KW; ++k) s += w[k] * in[i + k];
        out[i] = s;
    }
}

int main()
{
    const int n = N;
    float *A, *x, *y, *w, *in, *out;
    int* labels;
    unsigned int* counts;
    cudaMalloc(&A, sizeof(float) * n * n);
    cudaMalloc(&x, sizeof(float) * n);
    cudaMalloc(&y, sizeof(float) * n);
    cudaMalloc(&w, sizeof(float) * KW);
    cudaMalloc(&in, sizeof(float) * n * n);
    cudaMalloc(&out, sizeof(float) * n * n);
    cudaMalloc(&labels, sizeof(int) * n * n);
    cudaMalloc(&counts, sizeof(unsigned int) * 32);
    cudaMemset(counts, 0, sizeof(unsigned int) * 32);
    matvec_rows<<<(n + BLOCK - 1) / BLOCK, BLOCK>>>(A, x, y, n);
    matvec_cols<<<(n + BLOCK - 1) / BLOCK, BLOCK>>>(A, x, y, n);
    row_sumsq<<<(n + BLOCK - 1) / BLOCK, BLOCK>>>(A, y, n);
    label_counts<<<1024, BLOCK>>>(labels, n * n, counts);
    conv1d<<<(n * n + BLOCK - 1) / BLOCK, BLOCK>>>(in, w, out, n * n);
    cudaDeviceSynchronize();
    std::printf("done\n");
    return 0;
}
