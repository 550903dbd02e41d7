// cg.h -- host interface of the conjugate-gradient solver (src/cg.cu).
#pragma once

#include <vector>

#include <cuda_runtime.h>

#include "types.h"

namespace cg {

// Host copy of a CSR matrix, as assembled by build_heat_matrix().
struct CsrHost {
    int nrows = 0;
    std::vector<int> row_ptr;
    std::vector<int> col_idx;
    std::vector<float> vals;
};

// Assemble A = I - alpha_dt * L for the 5-point Laplacian L on an nx x ny
// grid with homogeneous Dirichlet boundaries. Boundary rows are identity rows
// and boundary columns are eliminated from the interior rows, so A is SPD.
// Rows are numbered j * nx + i.
void build_heat_matrix(int nx, int ny, float alpha_dt, float dx, float dy, CsrHost& A);

// Copy a host CSR matrix to the device / release the device copy.
CsrMatrix csr_to_device(const CsrHost& h);
void csr_free(CsrMatrix& A);

// Solve A x = b with unpreconditioned CG, starting from the x passed in.
// Stops when ||r|| <= tol * ||b|| or after max_iters iterations.
// b and x are device pointers. Returns the number of iterations performed.
int cg_solve(const CsrMatrix& A, const float* b, float* x, float tol, int max_iters, cudaStream_t stream);

// Mixed-precision iterative refinement around cg_solve(): the residual is
// evaluated in double precision, corrections are solved for in single
// precision and accumulated into a double-precision solution on the device.
// Returns the total number of CG iterations; the final relative residual
// ||b - A x|| / ||b|| (double precision) is stored in *final_rel_residual if
// non-null.
int cg_solve_refined(const CsrMatrix& A, const CsrHost& A_host, const float* b, float* x, float tol,
                     int max_iters, int max_refine, cudaStream_t stream, double* final_rel_residual);

}  // namespace cg
