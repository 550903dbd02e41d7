// blas3.cu -- the dense products of the application, written one thread per output element.
#include "dense.h"

// C = A * B: thread (col, row) walks row `row` of A and column `col` of B.
__global__ void matmul(const float* A, const float* B, float* C, int m, int n, int k)
{
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < m && col < n) {
        float acc = 0.0f;
        for (int p = 0; p < k; ++p) {
            acc += A[row * k + p] * B[p * n + col];
        }
        C[row * n + col] = acc;
    }
}

// C = At^T * B, where At (k x m) is stored as produced by the assembly loop (one row per sample).
__global__ void gemm_tn(const float* At, const float* B, float* C, int m, int n, int k)
{
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < m && col < n) {
        float acc = 0.0f;
        for (int p = 0; p < k; ++p) {
            acc += At[p * m + row] * B[p * n + col];
        }
        C[row * n + col] = acc;
    }
}

// C += alpha * A * A^T on the lower triangle only (C is symmetric; the upper triangle is never touched).
__global__ void syrk_lower(const float* A, float* C, int n, int k, float alpha)
{
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < n && col <= row) {
        float acc = 0.0f;
        for (int p = 0; p < k; ++p) {
            acc += A[row * k + p] * A[col * k + p];
        }
        C[row * n + col] += alpha * acc;
    }
}

void dense_matmul(const float* A, const float* B, float* C)
{
    dim3 block(MM_BX, MM_BY);
    dim3 grid((MAT_N + MM_BX - 1) / MM_BX, (MAT_M + MM_BY - 1) / MM_BY);
    matmul<<<grid, block>>>(A, B, C, MAT_M, MAT_N, MAT_K);
    CUDA_CHECK(cudaGetLastError());
}

void dense_gemm_tn(const float* At, const float* B, float* C)
{
    dim3 block(MM_BX, MM_BY);
    dim3 grid((MAT_N + MM_BX - 1) / MM_BX, (MAT_M + MM_BY - 1) / MM_BY);
    gemm_tn<<<grid, block>>>(At, B, C, MAT_M, MAT_N, MAT_K);
    CUDA_CHECK(cudaGetLastError());
}

void dense_syrk_lower(const float* A, float* C, float alpha)
{
    dim3 block(MM_BX, MM_BY);
    dim3 grid((SYRK_N + MM_BX - 1) / MM_BX, (SYRK_N + MM_BY - 1) / MM_BY);
    syrk_lower<<<grid, block>>>(A, C, SYRK_N, SYRK_K, alpha);
    CUDA_CHECK(cudaGetLastError());
}
