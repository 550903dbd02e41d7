// Row-wise kernels in the spellings of naive public codes (written for mepgen's tests):
//  - row_softmax: a thread per row, an early return, three passes over the row (running maximum, sum of
//    exponentials, every element written);
//  - row_standardize: mean, spread, then every element rescaled: two sums and a map;
//  - col_passes: the same passes down columns (threads already read neighbouring elements: must be refused);
//  - row_report: a pass that prints (side effects: must be refused);
//  - col_rank: C89 locals declared at the top and set later, the previous value loaded before the column loop, a
//    block clamped to the problem size (`N < BS ? N : BS`).
// Builds alone: nvcc -O3 -arch=sm_90 app.cu
#include <cstdio>
#include <cuda_runtime.h>

#define ROWS 8192
#define COLS 512
#define BS 256
#define N 4096

__global__ void row_softmax(int rows, int cols, const float *in, float *out)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    float top = in[r * cols];
    for (int c = 1; c < cols; c++)
        top = fmaxf(top, in[r * cols + c]);
    float total = 0.0f;
    for (int c = 0; c < cols; c++)
        total += expf(in[r * cols + c] - top);
    for (int c = 0; c < cols; c++)
        out[r * cols + c] = expf(in[r * cols + c] - top) / total;
}

__global__ void row_standardize(int rows, int cols, float eps, const float *x, float *y)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < rows) {
        float mean = 0.0f;
        for (int c = 0; c < cols; ++c) {
            mean += x[r * cols + c];
        }
        mean = mean / cols;
        float spread = 0.0f;
        for (int c = 0; c < cols; ++c) {
            spread += (x[r * cols + c] - mean) * (x[r * cols + c] - mean);
        }
        float scale = rsqrtf(spread / cols + eps);
        for (int c = 0; c < cols; ++c) {
            y[r * cols + c] = (x[r * cols + c] - mean) * scale;
        }
    }
}

__global__ void col_passes(int rows, int cols, const float *in, float *out)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c < cols) {
        float total = 0.0f;
        for (int r = 0; r < rows; r++)
            total += in[r * cols + c];
        for (int r = 0; r < rows; r++)
            out[r * cols + c] = in[r * cols + c] / total;
    }
}

__global__ void row_report(int rows, int cols, const float *in, float *out)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < rows) {
        float total = 0.0f;
        for (int c = 0; c < cols; c++)
            total += in[r * cols + c];
        for (int c = 0; c < cols; c++)
            printf("%f\n", in[r * cols + c] / total);
    }
}

__global__ void col_rank(const float *m, float *rank, float *change, int n)
{
    int j = threadIdx.x + blockIdx.x * blockDim.x;
    int i;
    float before;
    float total;
    if (j < n) {
        before = rank[j];
        total = 0.0f;
        for (i = 0; i < n; i++) {
            total += m[(size_t)i * n + j];
        }
        total = 0.15f / n + 0.85f * total;
        change[j] = fabsf(total - before);
        rank[j] = total;
    }
}

int main()
{
    float *a, *b, *v, *w;
    cudaMalloc(&a, sizeof(float) * ROWS * COLS);
    cudaMalloc(&b, sizeof(float) * ROWS * COLS);
    cudaMalloc(&v, sizeof(float) * N);
    cudaMalloc(&w, sizeof(float) * N);
    cudaMemset(a, 0, sizeof(float) * ROWS * COLS);
    cudaMemset(v, 0, sizeof(float) * N);
    row_softmax<<<(ROWS + 127) / 128, 128>>>(ROWS, COLS, a, b);
    row_standardize<<<(ROWS + 127) / 128, 128>>>(ROWS, COLS, 1e-5f, a, b);
    col_passes<<<(COLS + 127) / 128, 128>>>(ROWS, COLS, a, b);
    row_report<<<(ROWS + 127) / 128, 128>>>(ROWS, COLS, a, b);
    int threads = N < BS ? N : BS;
    col_rank<<<(N + threads - 1) / threads, threads>>>(a, v, w, N);
    cudaDeviceSynchronize();
    return 0;
}
