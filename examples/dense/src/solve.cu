// solve.cu -- L X = B by forward substitution, L unit lower triangular (the diagonal is implied, as an
// LU factorization stores it), one thread per right-hand side column. B and X are TRI_N x TRI_NRHS,
// row-major, so neighbouring threads touch neighbouring columns.
#include "dense.h"

__global__ void lower_solve(const float* L, const float* B, float* X, int n, int nrhs)
{
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < nrhs) {
        for (int i = 0; i < n; ++i) {
            float s = B[i * nrhs + r];
            for (int j = 0; j < i; ++j) {
                s -= L[i * n + j] * X[j * nrhs + r];
            }
            X[i * nrhs + r] = s;
        }
    }
}

void unit_lower_solve(const float* L, const float* B, float* X)
{
    lower_solve<<<(TRI_NRHS + BLOCK - 1) / BLOCK, BLOCK>>>(L, B, X, TRI_N, TRI_NRHS);
    CUDA_CHECK(cudaGetLastError());
}
