/* mepgen parse shim: the warp matrix (WMMA) API of <mma.h>, declared for parsing only. */
#pragma once
#ifndef MEPGEN_MMA_SHIM
#define MEPGEN_MMA_SHIM
#include "mepgen_cuda_shim.h"
#include "cuda_fp16.h"
namespace nvcuda {
namespace wmma {
struct matrix_a {}; struct matrix_b {}; struct accumulator {}; struct row_major {}; struct col_major {};
namespace precision { struct tf32 {}; struct u4 {}; struct s4 {}; struct b1 {}; }
enum layout_t { mem_row_major, mem_col_major };
template <class Use, int m, int n, int k, class T, class Layout = void>
struct fragment { T x[16]; enum { num_elements = 16 }; };
template <class U, int m, int n, int k, class T, class L, class P>
__device__ void load_matrix_sync(fragment<U, m, n, k, T, L> &, const P *, unsigned);
template <class U, int m, int n, int k, class T, class L, class P>
__device__ void load_matrix_sync(fragment<U, m, n, k, T, L> &, const P *, unsigned, layout_t);
template <int m, int n, int k, class T, class P>
__device__ void store_matrix_sync(P *, const fragment<accumulator, m, n, k, T> &, unsigned, layout_t);
template <class U, int m, int n, int k, class T, class L, class V>
__device__ void fill_fragment(fragment<U, m, n, k, T, L> &, const V &);
template <class D, class A, class B, class C> __device__ void mma_sync(D &, const A &, const B &, const C &);
template <class D, class A, class B, class C> __device__ void mma_sync(D &, const A &, const B &, const C &, bool);
__device__ float __float_to_tf32(float);
}  // namespace wmma
}  // namespace nvcuda
#endif
