// Idioms of naive dense kernels that the library must see through (written for mepgen's tests):
//  - weigh_rows: a 2D elementwise update whose x threads walk the rows (strided), y the columns (contiguous);
//  - tiled_names: a thread-per-output product whose global indices spell the block size as the launch's
//    macros (`blockIdx.y * TY + threadIdx.y`) instead of blockDim;
//  - fixed_product: a product whose extents are non-type template parameters, launched with literals.
// Builds alone: nvcc -O3 -arch=sm_90 app.cu
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#define TX 16
#define TY 16

__global__ void weigh_rows(int nrows, int ncols, const float *src, const float *weight, float *dst)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    int c = blockIdx.y * blockDim.y + threadIdx.y;
    if (r < nrows && c < ncols)
        dst[r * ncols + c] = weight[r] * src[r * ncols + c] + 1.0f;
}

__global__ void tiled_names(int ni, int nj, int nk, const float *lhs, const float *rhs, float *res)
{
    int i = blockIdx.y * TY + threadIdx.y;
    int j = blockIdx.x * TX + threadIdx.x;
    if (i < ni && j < nj) {
        float acc = 0.0f;
        for (int k = 0; k < nk; ++k)
            acc += lhs[i * nk + k] * rhs[k * nj + j];
        res[i * nj + j] = acc;
    }
}

template <int ROWS, int COLS, int DEPTH>
__global__ void fixed_product(const float *p, const float *q, float *out)
{
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < ROWS && col < COLS) {
        float s = 0.0f;
        for (int d = 0; d < DEPTH; d++)
            s += p[row * DEPTH + d] * q[d * COLS + col];
        out[row * COLS + col] = s;
    }
}

int main(int argc, char **argv)
{
    const int nr = 4096, nc = 4096;
    const int ni = 1024, nj = 1024, nk = 1024;
    float *src, *weight, *dst, *lhs, *rhs, *res, *out;
    cudaMalloc(&src, sizeof(float) * nr * nc);
    cudaMalloc(&weight, sizeof(float) * nr);
    cudaMalloc(&dst, sizeof(float) * nr * nc);
    cudaMalloc(&lhs, sizeof(float) * ni * nk);
    cudaMalloc(&rhs, sizeof(float) * nk * nj);
    cudaMalloc(&res, sizeof(float) * ni * nj);
    cudaMalloc(&out, sizeof(float) * 1024 * 1024);
    cudaMemset(src, 0, sizeof(float) * nr * nc);
    cudaMemset(weight, 0, sizeof(float) * nr);
    cudaMemset(lhs, 0, sizeof(float) * ni * nk);
    cudaMemset(rhs, 0, sizeof(float) * nk * nj);

    dim3 block2(16, 16);
    dim3 grid2((nr + 15) / 16, (nc + 15) / 16);
    weigh_rows<<<grid2, block2>>>(nr, nc, src, weight, dst);

    dim3 tile(TX, TY);
    dim3 tiles((nj + TX - 1) / TX, (ni + TY - 1) / TY);
    tiled_names<<<tiles, tile>>>(ni, nj, nk, lhs, rhs, res);

    dim3 fgrid(1024 / 16, 1024 / 16);
    fixed_product<1024, 1024, 512><<<fgrid, block2>>>(lhs, rhs, out);

    cudaError_t e = cudaDeviceSynchronize();
    printf("%s\n", e == cudaSuccess ? "ok" : cudaGetErrorString(e));
    cudaFree(src); cudaFree(weight); cudaFree(dst); cudaFree(lhs); cudaFree(rhs); cudaFree(res); cudaFree(out);
    return e == cudaSuccess ? 0 : 1;
}
