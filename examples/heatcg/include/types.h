// types.h -- plain data types shared between host and device code.
#pragma once

// Working precision of the solver fields.
typedef float real_t;

namespace heat {

// Uniform Cartesian grid. nx/ny count points including the boundary ring;
// dx/dy are the spacings in physical units.
struct Grid {
    int nx;
    int ny;
    float dx;
    float dy;
};

enum class BoundaryKind : int {
    Dirichlet = 0,  // u = value on the boundary
    Neumann = 1     // du/dn = value (outward normal derivative)
};

}  // namespace heat

namespace cg {

// Device-resident CSR matrix. This struct is host-side bookkeeping only: the
// kernels receive the raw device pointers, never the struct itself.
struct CsrMatrix {
    int nrows;
    int nnz;
    int* row_ptr;   // nrows + 1 entries
    int* col_idx;   // nnz entries
    float* vals;    // nnz entries
};

}  // namespace cg
