// dense.h -- compile-time problem sizes and shared types of the dense proxy application.
//
// Every size is an overridable macro (build with e.g. -DMAT_N=256 -DVOL_N=64 for a smoke test); the
// launch sites pass these macros straight to the kernels, so one build describes one problem.
#pragma once

#include <cstdio>
#include <cstdlib>

#include <cuda_runtime.h>

// Dense products: C (MAT_M x MAT_N) = A (MAT_M x MAT_K) * B (MAT_K x MAT_N), row-major.
#ifndef MAT_M
#define MAT_M 1024
#endif
#ifndef MAT_N
#define MAT_N 1024
#endif
#ifndef MAT_K
#define MAT_K 1024
#endif
// Rank-k update of the SYRK_N x SYRK_N lower triangle with a SYRK_N x SYRK_K panel.
#ifndef SYRK_N
#define SYRK_N 1024
#endif
#ifndef SYRK_K
#define SYRK_K 512
#endif
// 2D image (IMG_NX x IMG_NY) and 3D volume (VOL_NX x VOL_NY x VOL_NZ) for the stencils.
#ifndef IMG_NX
#define IMG_NX 4096
#endif
#ifndef IMG_NY
#define IMG_NY 4096
#endif
#ifndef VOL_NX
#define VOL_NX 256
#endif
#ifndef VOL_NY
#define VOL_NY 256
#endif
#ifndef VOL_NZ
#define VOL_NZ 256
#endif
// 1D signal and its smoothing filter (taps live in constant memory).
#ifndef SIG_N
#define SIG_N (1 << 24)
#endif
#ifndef FILT_W
#define FILT_W 15
#endif
// Forward substitution: unit lower-triangular TRI_N x TRI_N factor, TRI_NRHS right-hand sides.
// (Kept small: with random factors the solution grows like (4/3)^i.)
#ifndef TRI_N
#define TRI_N 256
#endif
#ifndef TRI_NRHS
#define TRI_NRHS 8192
#endif

// Thread-block shapes of the launch sites.
#ifndef MM_BX
#define MM_BX 16
#endif
#ifndef MM_BY
#define MM_BY 16
#endif
#ifndef ST_BX
#define ST_BX 32
#endif
#ifndef ST_BY
#define ST_BY 8
#endif
#ifndef VOL_BX
#define VOL_BX 32
#endif
#ifndef VOL_BY
#define VOL_BY 4
#endif
#ifndef VOL_BZ
#define VOL_BZ 2
#endif
#ifndef BLOCK
#define BLOCK 256
#endif

#define CUDA_CHECK(call)                                                                          \
    do {                                                                                          \
        cudaError_t err_ = (call);                                                                \
        if (err_ != cudaSuccess) {                                                                \
            std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(err_));    \
            std::exit(1);                                                                         \
        }                                                                                         \
    } while (0)

// A 3D volume's extents (points per direction, boundary included) and its diffusion number.
struct Volume {
    int nx;
    int ny;
    int nz;
    float nu;
};

// Host entry points, one per kernel (src/blas3.cu, src/stencils.cu, src/signal.cu, src/solve.cu).
void dense_matmul(const float* A, const float* B, float* C);
void dense_gemm_tn(const float* At, const float* B, float* C);
void dense_syrk_lower(const float* A, float* C, float alpha);
void image_smooth(const float* in, float* out, float weight);
void volume_diffuse(const float* u, float* u_new, const Volume& vol);
void signal_set_filter(const float* taps);
void signal_smooth(const float* x, float* y);
void unit_lower_solve(const float* L, const float* B, float* X);
