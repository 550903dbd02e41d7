// ADVERSARY: loosens precision beyond the tolerance (accumulates in half precision) | EXPECT: wrong_result
#include <cuda_fp16.h>
namespace analysis {
__global__ void dense_matvec(const float* A, const float* x, float* y, int nrows, int ncols)
{
    const int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < nrows) {
        __half acc = __float2half(0.0f);
        for (int j = 0; j < ncols; ++j) acc = __hadd(acc, __float2half(A[row * ncols + j] * x[j]));
        y[row] = __half2float(acc);
    }
}
}  // namespace analysis
