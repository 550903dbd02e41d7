// ADVERSARY: writes only part of the output (skips the last 32 rows) | EXPECT: wrong_result
namespace analysis {
__global__ void dense_matvec(const float* A, const float* x, float* y, int nrows, int ncols)
{
    const int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < nrows - 32) {
        float acc = 0.0f;
        for (int j = 0; j < ncols; ++j) acc += A[row * ncols + j] * x[j];
        y[row] = acc;
    }
}
}  // namespace analysis
