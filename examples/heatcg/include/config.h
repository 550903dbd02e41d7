// config.h -- compile-time problem configuration for heatcg.
//
// Every size is an overridable macro so that the same sources can be built
// for small smoke tests (e.g. -DNX=256 -DNY=256 -DMAT_N=512) and for the
// production-sized runs used in performance studies.
#pragma once

#include <cstdio>
#include <cstdlib>

#include <cuda_runtime.h>

// Heat-equation grid (points in x and y, including the boundary ring).
#ifndef NX
#define NX 2048
#endif
#ifndef NY
#define NY 2048
#endif

// Number of bins of the temperature histogram.
#ifndef NBINS
#define NBINS 64
#endif

// Dimension of the dense (MAT_N x MAT_N) coupling matrix used in the analysis phase.
#ifndef MAT_N
#define MAT_N 4096
#endif

// Threads per block for 1D kernels. Must be a power of two (block reductions).
#ifndef BLOCK_SIZE
#define BLOCK_SIZE 256
#endif

// 2D thread-block tile for the stencil kernel.
#ifndef TILE_X
#define TILE_X 32
#endif
#ifndef TILE_Y
#define TILE_Y 8
#endif

// Iteration cap of one conjugate-gradient solve.
#ifndef CG_MAX_ITERS
#define CG_MAX_ITERS 50
#endif

// Default number of time steps (can be overridden with --steps N at run time).
#ifndef N_STEPS
#define N_STEPS 20
#endif

// Abort with a readable message if a CUDA runtime call fails.
#define CUDA_CHECK(call)                                                      \
    do {                                                                      \
        const cudaError_t cuda_check_err_ = (call);                           \
        if (cuda_check_err_ != cudaSuccess) {                                 \
            std::fprintf(stderr, "CUDA error at %s:%d: %s (%s)\n", __FILE__,  \
                         __LINE__, cudaGetErrorString(cuda_check_err_), #call); \
            std::exit(EXIT_FAILURE);                                          \
        }                                                                     \
    } while (0)
