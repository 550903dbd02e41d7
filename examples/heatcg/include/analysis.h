// analysis.h -- host interface of the post-processing kernels (src/analysis.cu).
#pragma once

#include <cuda_runtime.h>

namespace analysis {

// Set the value range [lo, hi] covered by the NBINS histogram bins.
void set_histogram_range(float lo, float hi);

// bins[NBINS] <- histogram of data[0..n). bins is zeroed first.
void compute_histogram(const float* data, int n, unsigned int* bins, cudaStream_t stream);

// y = A x for a dense row-major nrows x ncols matrix.
void compute_dense_matvec(const float* A, const float* x, float* y, int nrows, int ncols,
                          cudaStream_t stream);

// mean[c] = average of column c of a dense row-major nrows x ncols matrix.
void compute_column_mean(const float* A, float* mean, int nrows, int ncols, cudaStream_t stream);

}  // namespace analysis
