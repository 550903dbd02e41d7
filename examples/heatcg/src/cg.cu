// cg.cu -- conjugate-gradient solver for the implicit (backward Euler)
// diffusion step
//
//   (I - dt * alpha * L) u^{n+1} = u^n
//
// on the NX x NY grid, L being the 5-point Laplacian with homogeneous
// Dirichlet boundaries. The matrix is assembled once on the host in CSR
// format and kept on the device. The solver is deliberately the textbook
// formulation: every dot product is reduced on the device and copied back so
// that the scalar recurrences run on the host.
#include <algorithm>
#include <cmath>
#include <vector>

#include "config.h"
#include "types.h"
#include "cg.h"

static_assert((BLOCK_SIZE & (BLOCK_SIZE - 1)) == 0, "BLOCK_SIZE must be a power of two");

namespace cg {

// y = A x, one thread per row.
__global__ void spmv_csr(int nrows, const int* row_ptr, const int* col_idx, const float* vals, const float* x, float* y)
{
    const int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < nrows) {
        float sum = 0.0f;
        for (int k = row_ptr[row]; k < row_ptr[row+1]; ++k) {
            sum += vals[k] * x[col_idx[k]];
        }
        y[row] = sum;
    }
}

// y = a * x + y
template <typename T>
__global__ void axpy(int n, T a, const T* x, T* y)
{
    const int stride = blockDim.x * gridDim.x;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        y[i] = a * x[i] + y[i];
    }
}

// p = x + beta * p
__global__ void xpay(int n, const float* x, float beta, float* p)
{
    const int stride = blockDim.x * gridDim.x;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        p[i] = x[i] + beta * p[i];
    }
}

// *result += sum(a[i] * b[i]). Each block reduces its partial sums in
// dynamic shared memory (blockDim.x floats, blockDim.x a power of two) and
// adds the block total atomically, so *result must be zeroed beforehand.
__global__ void dot(int n, const float* a, const float* b, float* result)
{
    extern __shared__ float sdata[];

    const int tid = threadIdx.x;
    const int stride = blockDim.x * gridDim.x;

    float sum = 0.0f;
    for (int i = blockIdx.x * blockDim.x + tid; i < n; i += stride) {
        sum += a[i] * b[i];
    }
    sdata[tid] = sum;
    __syncthreads();

    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) {
            sdata[tid] += sdata[tid + s];
        }
        __syncthreads();
    }

    if (tid == 0) {
        atomicAdd(result, sdata[0]);
    }
}

namespace {

// Blocks for the grid-stride vector kernels: enough to fill the GPU, but
// capped so that the number of atomics per dot product stays small.
int vector_blocks(int n)
{
    return std::max(1, std::min((n + BLOCK_SIZE - 1) / BLOCK_SIZE, 1024));
}

// r = b - A x in double precision, on the host.
void csr_residual(const CsrHost& A, const std::vector<double>& b, const std::vector<double>& x,
                  std::vector<double>& r)
{
    for (int row = 0; row < A.nrows; ++row) {
        double ax = 0.0;
        for (int k = A.row_ptr[row]; k < A.row_ptr[row + 1]; ++k) {
            ax += static_cast<double>(A.vals[k]) * x[A.col_idx[k]];
        }
        r[row] = b[row] - ax;
    }
}

double norm2(const std::vector<double>& v)
{
    double s = 0.0;
    for (double e : v) {
        s += e * e;
    }
    return std::sqrt(s);
}

}  // namespace

void build_heat_matrix(int nx, int ny, float alpha_dt, float dx, float dy, CsrHost& A)
{
    const int n = nx * ny;
    const float cx = alpha_dt / (dx * dx);
    const float cy = alpha_dt / (dy * dy);
    const float diag = 1.0f + 2.0f * cx + 2.0f * cy;

    A.nrows = n;
    A.row_ptr.assign(1, 0);
    A.row_ptr.reserve(n + 1);
    A.col_idx.clear();
    A.vals.clear();
    A.col_idx.reserve(5 * static_cast<size_t>(n));
    A.vals.reserve(5 * static_cast<size_t>(n));

    auto interior = [nx, ny](int i, int j) { return i > 0 && i < nx - 1 && j > 0 && j < ny - 1; };
    auto push = [&A](int col, float v) {
        A.col_idx.push_back(col);
        A.vals.push_back(v);
    };

    for (int j = 0; j < ny; ++j) {
        for (int i = 0; i < nx; ++i) {
            const int row = j * nx + i;
            if (!interior(i, j)) {
                // Dirichlet row: u^{n+1} = u^n on the boundary.
                push(row, 1.0f);
            } else {
                // Columns in increasing order; couplings to boundary points
                // are eliminated (their value is zero) to keep A symmetric.
                if (interior(i, j - 1)) push(row - nx, -cy);
                if (interior(i - 1, j)) push(row - 1, -cx);
                push(row, diag);
                if (interior(i + 1, j)) push(row + 1, -cx);
                if (interior(i, j + 1)) push(row + nx, -cy);
            }
            A.row_ptr.push_back(static_cast<int>(A.col_idx.size()));
        }
    }
}

CsrMatrix csr_to_device(const CsrHost& h)
{
    CsrMatrix A{};
    A.nrows = h.nrows;
    A.nnz = static_cast<int>(h.col_idx.size());
    CUDA_CHECK(cudaMalloc(&A.row_ptr, (A.nrows + 1) * sizeof(int)));
    CUDA_CHECK(cudaMalloc(&A.col_idx, A.nnz * sizeof(int)));
    CUDA_CHECK(cudaMalloc(&A.vals, A.nnz * sizeof(float)));
    CUDA_CHECK(cudaMemcpy(A.row_ptr, h.row_ptr.data(), (A.nrows + 1) * sizeof(int), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(A.col_idx, h.col_idx.data(), A.nnz * sizeof(int), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(A.vals, h.vals.data(), A.nnz * sizeof(float), cudaMemcpyHostToDevice));
    return A;
}

void csr_free(CsrMatrix& A)
{
    CUDA_CHECK(cudaFree(A.row_ptr));
    CUDA_CHECK(cudaFree(A.col_idx));
    CUDA_CHECK(cudaFree(A.vals));
    A = CsrMatrix{};
}

int cg_solve(const CsrMatrix& A, const float* b, float* x, float tol, int max_iters, cudaStream_t stream)
{
    const int n = A.nrows;
    const int rows_blocks = (n + BLOCK_SIZE - 1) / BLOCK_SIZE;
    const int blocks = vector_blocks(n);
    const size_t bytes = static_cast<size_t>(n) * sizeof(float);

    float *r = nullptr, *p = nullptr, *Ap = nullptr, *d_dot = nullptr;
    CUDA_CHECK(cudaMalloc(&r, bytes));
    CUDA_CHECK(cudaMalloc(&p, bytes));
    CUDA_CHECK(cudaMalloc(&Ap, bytes));
    CUDA_CHECK(cudaMalloc(&d_dot, sizeof(float)));

    // r = b - A x, p = r
    spmv_csr<<<rows_blocks, BLOCK_SIZE, 0, stream>>>(n, A.row_ptr, A.col_idx, A.vals, x, Ap);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaMemcpyAsync(r, b, bytes, cudaMemcpyDeviceToDevice, stream));
    axpy<float><<<blocks, BLOCK_SIZE, 0, stream>>>(n, -1.0f, Ap, r);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaMemcpyAsync(p, r, bytes, cudaMemcpyDeviceToDevice, stream));

    // ||b||^2 for the relative stopping criterion
    float bb = 0.0f;
    CUDA_CHECK(cudaMemsetAsync(d_dot, 0, sizeof(float), stream));
    dot<<<blocks, BLOCK_SIZE, BLOCK_SIZE * sizeof(float), stream>>>(n, b, b, d_dot);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaMemcpyAsync(&bb, d_dot, sizeof(float), cudaMemcpyDeviceToHost, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));

    // rr = (r, r)
    float rr = 0.0f;
    CUDA_CHECK(cudaMemsetAsync(d_dot, 0, sizeof(float), stream));
    dot<<<blocks, BLOCK_SIZE, BLOCK_SIZE * sizeof(float), stream>>>(n, r, r, d_dot);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaMemcpyAsync(&rr, d_dot, sizeof(float), cudaMemcpyDeviceToHost, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));

    const float threshold = tol * tol * bb;
    int iter = 0;
    for (; iter < max_iters; ++iter) {
        if (rr <= threshold) {
            break;
        }

        // Ap = A p
        spmv_csr<<<rows_blocks, BLOCK_SIZE, 0, stream>>>(n, A.row_ptr, A.col_idx, A.vals, p, Ap);
        CUDA_CHECK(cudaGetLastError());

        // pAp = (p, Ap)
        float pAp = 0.0f;
        CUDA_CHECK(cudaMemsetAsync(d_dot, 0, sizeof(float), stream));
        dot<<<blocks, BLOCK_SIZE, BLOCK_SIZE * sizeof(float), stream>>>(n, p, Ap, d_dot);
        CUDA_CHECK(cudaGetLastError());
        CUDA_CHECK(cudaMemcpyAsync(&pAp, d_dot, sizeof(float), cudaMemcpyDeviceToHost, stream));
        CUDA_CHECK(cudaStreamSynchronize(stream));
        if (!(pAp > 0.0f)) {
            std::fprintf(stderr, "cg_solve: breakdown at iteration %d (pAp = %g)\n", iter, pAp);
            break;
        }

        // x += alpha p, r -= alpha Ap
        const float alpha = rr / pAp;
        axpy<float><<<blocks, BLOCK_SIZE, 0, stream>>>(n, alpha, p, x);
        CUDA_CHECK(cudaGetLastError());
        axpy<float><<<blocks, BLOCK_SIZE, 0, stream>>>(n, -alpha, Ap, r);
        CUDA_CHECK(cudaGetLastError());

        // rr_new = (r, r)
        float rr_new = 0.0f;
        CUDA_CHECK(cudaMemsetAsync(d_dot, 0, sizeof(float), stream));
        dot<<<blocks, BLOCK_SIZE, BLOCK_SIZE * sizeof(float), stream>>>(n, r, r, d_dot);
        CUDA_CHECK(cudaGetLastError());
        CUDA_CHECK(cudaMemcpyAsync(&rr_new, d_dot, sizeof(float), cudaMemcpyDeviceToHost, stream));
        CUDA_CHECK(cudaStreamSynchronize(stream));

        // p = r + beta p
        const float beta = rr_new / rr;
        xpay<<<blocks, BLOCK_SIZE, 0, stream>>>(n, r, beta, p);
        CUDA_CHECK(cudaGetLastError());
        rr = rr_new;
    }

    CUDA_CHECK(cudaFree(r));
    CUDA_CHECK(cudaFree(p));
    CUDA_CHECK(cudaFree(Ap));
    CUDA_CHECK(cudaFree(d_dot));
    return iter;
}

int cg_solve_refined(const CsrMatrix& A, const CsrHost& A_host, const float* b, float* x, float tol,
                     int max_iters, int max_refine, cudaStream_t stream, double* final_rel_residual)
{
    const int n = A.nrows;
    const int blocks = vector_blocks(n);
    const size_t fbytes = static_cast<size_t>(n) * sizeof(float);
    const size_t dbytes = static_cast<size_t>(n) * sizeof(double);

    // Promote right-hand side and initial guess to double on the host.
    std::vector<float> tmp(n);
    std::vector<double> b_hi(n), x_hi(n), r_hi(n);
    CUDA_CHECK(cudaMemcpyAsync(tmp.data(), b, fbytes, cudaMemcpyDeviceToHost, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    std::copy(tmp.begin(), tmp.end(), b_hi.begin());
    CUDA_CHECK(cudaMemcpyAsync(tmp.data(), x, fbytes, cudaMemcpyDeviceToHost, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    std::copy(tmp.begin(), tmp.end(), x_hi.begin());

    const double bnorm = norm2(b_hi);
    if (bnorm == 0.0) {
        CUDA_CHECK(cudaMemsetAsync(x, 0, fbytes, stream));
        if (final_rel_residual) *final_rel_residual = 0.0;
        return 0;
    }

    // Device work space: double-precision solution and correction, and the
    // single-precision residual / correction for the inner solves.
    double *d_x_hi = nullptr, *d_corr_hi = nullptr;
    float *d_r = nullptr, *d_corr = nullptr;
    CUDA_CHECK(cudaMalloc(&d_x_hi, dbytes));
    CUDA_CHECK(cudaMalloc(&d_corr_hi, dbytes));
    CUDA_CHECK(cudaMalloc(&d_r, fbytes));
    CUDA_CHECK(cudaMalloc(&d_corr, fbytes));
    CUDA_CHECK(cudaMemcpyAsync(d_x_hi, x_hi.data(), dbytes, cudaMemcpyHostToDevice, stream));

    int total_iters = 0;
    double rel = 0.0;
    std::vector<double> corr_hi(n);
    for (int refine = 0;; ++refine) {
        csr_residual(A_host, b_hi, x_hi, r_hi);
        rel = norm2(r_hi) / bnorm;
        if (rel <= tol || refine == max_refine) {
            break;
        }

        // Solve A d = r in single precision, starting from d = 0.
        std::transform(r_hi.begin(), r_hi.end(), tmp.begin(), [](double v) { return static_cast<float>(v); });
        CUDA_CHECK(cudaMemcpyAsync(d_r, tmp.data(), fbytes, cudaMemcpyHostToDevice, stream));
        CUDA_CHECK(cudaMemsetAsync(d_corr, 0, fbytes, stream));
        total_iters += cg_solve(A, d_r, d_corr, tol, max_iters, stream);

        // x_hi += d, accumulated in double on the device.
        CUDA_CHECK(cudaMemcpyAsync(tmp.data(), d_corr, fbytes, cudaMemcpyDeviceToHost, stream));
        CUDA_CHECK(cudaStreamSynchronize(stream));
        std::copy(tmp.begin(), tmp.end(), corr_hi.begin());
        CUDA_CHECK(cudaMemcpyAsync(d_corr_hi, corr_hi.data(), dbytes, cudaMemcpyHostToDevice, stream));
        axpy<double><<<blocks, BLOCK_SIZE, 0, stream>>>(n, 1.0, d_corr_hi, d_x_hi);
        CUDA_CHECK(cudaGetLastError());
        CUDA_CHECK(cudaMemcpyAsync(x_hi.data(), d_x_hi, dbytes, cudaMemcpyDeviceToHost, stream));
        CUDA_CHECK(cudaStreamSynchronize(stream));
    }

    // Round the refined solution back to working precision.
    std::transform(x_hi.begin(), x_hi.end(), tmp.begin(), [](double v) { return static_cast<float>(v); });
    CUDA_CHECK(cudaMemcpyAsync(x, tmp.data(), fbytes, cudaMemcpyHostToDevice, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));

    CUDA_CHECK(cudaFree(d_x_hi));
    CUDA_CHECK(cudaFree(d_corr_hi));
    CUDA_CHECK(cudaFree(d_r));
    CUDA_CHECK(cudaFree(d_corr));

    if (final_rel_residual) *final_rel_residual = rel;
    return total_iters;
}

}  // namespace cg
