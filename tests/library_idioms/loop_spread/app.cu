// A thread per row, ring or plane walking it with a loop (written for mepgen's tests):
//  - quarter_turn: an n x n grid turned by 90 degrees in place, ring by ring, each step moving four cells
//    around (independent 4-cycles: spread_loop applies);
//  - flip_rows: out-of-place transpose, a thread per source row (every iteration writes its own cell);
//  - running_rows: an in-place running sum along each row (each step reads the cell the step before wrote:
//    must be refused);
//  - row_decay: a decaying running value kept in a local (carried from step to step: must be refused);
//  - shift_row: in place, cell c+1 takes cell c (neighbouring steps meet: must be refused);
//  - flip_rows_tb: flip_rows with the block size spelled as a macro in the index and the launch's sides assigned
//    as dim3 objects (`tiles = dim3(H / TB)`): the same rewrite.
// Builds alone: nvcc -O3 -arch=sm_90 app.cu
#include <cstdio>
#include <cuda_runtime.h>

#define W 1024
#define H 768
#define TB 128

__global__ void quarter_turn(float *grid, int n)
{
    int ring = threadIdx.x + blockIdx.x * blockDim.x;
    if (ring < n / 2) {
        int lo = ring, hi = n - 1 - ring;
        for (int k = lo; k < hi; k++) {
            int back = hi - (k - lo);
            float saved = grid[lo * n + k];
            grid[lo * n + k] = grid[back * n + lo];
            grid[back * n + lo] = grid[hi * n + back];
            grid[hi * n + back] = grid[k * n + hi];
            grid[k * n + hi] = saved;
        }
    }
}

__global__ void flip_rows(const float *src, float *dst, int rows, int cols)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < rows) {
        for (int c = 0; c < cols; ++c)
            dst[c * rows + r] = src[r * cols + c];
    }
}

__global__ void running_rows(float *a, int rows, int cols)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < rows) {
        for (int c = 1; c < cols; ++c)
            a[r * cols + c] += a[r * cols + c - 1];
    }
}

__global__ void row_decay(const float *a, float *out, int rows, int cols)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < rows) {
        float level = 0.0f;
        for (int c = 0; c < cols; ++c) {
            level = 0.5f * level + a[r * cols + c];
            out[r * cols + c] = level;
        }
    }
}

__global__ void shift_row(float *a, int rows, int cols)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < rows) {
        for (int c = 0; c < cols - 1; ++c)
            a[r * cols + c + 1] = a[r * cols + c];
    }
}

__global__ void flip_rows_tb(const float *src, float *dst, int rows, int cols)
{
    int r = threadIdx.x + TB * blockIdx.x;
    if (r < rows) {
        for (int c = 0; c < cols; ++c)
            dst[c * rows + r] = src[r * cols + c];
    }
}

int main()
{
    float *g, *s, *d;
    cudaMalloc(&g, W * W * sizeof(float));
    cudaMalloc(&s, H * W * sizeof(float));
    cudaMalloc(&d, H * W * sizeof(float));
    quarter_turn<<<(W / 2 + 127) / 128, 128>>>(g, W);
    flip_rows<<<(H + 255) / 256, 256>>>(s, d, H, W);
    running_rows<<<(H + 255) / 256, 256>>>(d, H, W);
    row_decay<<<(H + 255) / 256, 256>>>(s, d, H, W);
    shift_row<<<(H + 255) / 256, 256>>>(s, H, W);
    dim3 tiles, lanes;
    tiles = dim3(H / TB);
    lanes = dim3(TB);
    flip_rows_tb<<<tiles, lanes>>>(s, d, H, W);
    cudaDeviceSynchronize();
    printf("done\n");
    return 0;
}
