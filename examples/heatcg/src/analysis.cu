// analysis.cu -- post-processing of the temperature field and of the dense
// coupling matrix: histogram, dense matrix-vector product, column means.
//
// These kernels are the straightforward first versions written when the
// analysis phase was added; they have not been tuned yet.
#include <algorithm>

#include "config.h"
#include "device_math.cuh"
#include "analysis.h"

namespace analysis {

// Histogram range: lo, hi.
__constant__ float c_hist_range[2];

// bins[b] += number of data values falling into bin b. Bins must be zeroed.
__global__ void histogram(const float* data, int n, unsigned int* bins)
{
    const int stride = blockDim.x * gridDim.x;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        atomicAdd(&bins[bin_index(data[i], c_hist_range[0], c_hist_range[1], NBINS)], 1u);
    }
}

// y = A x, A row-major nrows x ncols, one thread per row.
__global__ void dense_matvec(const float* A, const float* x, float* y, int nrows, int ncols)
{
    const int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < nrows) {
        y[row] = 0;
        for (int j = 0; j < ncols; ++j) y[row] += A[row * ncols + j] * x[j];
    }
}

// mean[col] = (1/nrows) * sum_row A[row, col], one thread per column.
// Must be launched with BLOCK_SIZE threads per block.
__global__ void __launch_bounds__(BLOCK_SIZE) column_mean(const float* A, float* mean, int nrows, int ncols)
{
    __shared__ float scratch[BLOCK_SIZE];

    const int tid = threadIdx.x;
    const int col = blockIdx.x * blockDim.x + tid;

    float acc = 0.0f;
    for (int row = 0; row < nrows; ++row) {
        // Stage the block's slice of the current row in shared memory: the
        // whole block issues one contiguous load per row (tail columns of
        // the last block are padded with zeros).
        scratch[tid] = (col < ncols) ? A[row * ncols + col] : 0.0f;
        __syncthreads();
        acc += scratch[tid];
        __syncthreads();
    }

    if (col < ncols) {
        mean[col] = acc / static_cast<float>(nrows);
    }
}

void set_histogram_range(float lo, float hi)
{
    if (!(hi > lo)) {
        std::fprintf(stderr, "set_histogram_range: invalid range [%g, %g]\n", lo, hi);
        std::exit(EXIT_FAILURE);
    }
    const float range[2] = {lo, hi};
    CUDA_CHECK(cudaMemcpyToSymbol(c_hist_range, range, sizeof(range)));
}

void compute_histogram(const float* data, int n, unsigned int* bins, cudaStream_t stream)
{
    const int blocks = std::max(1, std::min((n + BLOCK_SIZE - 1) / BLOCK_SIZE, 4096));
    CUDA_CHECK(cudaMemsetAsync(bins, 0, NBINS * sizeof(unsigned int), stream));
    histogram<<<blocks, BLOCK_SIZE, 0, stream>>>(data, n, bins);
    CUDA_CHECK(cudaGetLastError());
}

void compute_dense_matvec(const float* A, const float* x, float* y, int nrows, int ncols, cudaStream_t stream)
{
    const int blocks = (nrows + BLOCK_SIZE - 1) / BLOCK_SIZE;
    dense_matvec<<<blocks, BLOCK_SIZE, 0, stream>>>(A, x, y, nrows, ncols);
    CUDA_CHECK(cudaGetLastError());
}

void compute_column_mean(const float* A, float* mean, int nrows, int ncols, cudaStream_t stream)
{
    const int blocks = (ncols + BLOCK_SIZE - 1) / BLOCK_SIZE;
    column_mean<<<blocks, BLOCK_SIZE, 0, stream>>>(A, mean, nrows, ncols);
    CUDA_CHECK(cudaGetLastError());
}

}  // namespace analysis
