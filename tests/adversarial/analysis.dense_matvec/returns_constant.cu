// ADVERSARY: returns a constant instead of computing | EXPECT: wrong_result
namespace analysis {
__global__ void dense_matvec(const float* A, const float* x, float* y, int nrows, int ncols)
{
    const int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < nrows) y[row] = 0.0f;
}
}  // namespace analysis
