/* mepgen parse shim for <cuda_fp8.h>: the 8-bit float types (E4M3, E5M2) with their conversions, and the conversion
 * intrinsics kernels call (declarations only, for parsing; the MEP is built with the toolkit's own header). */
#pragma once
#include "mepgen_cuda_shim.h"
#include "cuda_fp16.h"
#include "cuda_bf16.h"
#define MEPGEN_HD __host__ __device__
typedef unsigned char __nv_fp8_storage_t;
typedef unsigned short __nv_fp8x2_storage_t;
typedef unsigned int __nv_fp8x4_storage_t;
typedef enum __nv_fp8_interpretation_t { __NV_E4M3, __NV_E5M2 } __nv_fp8_interpretation_t;
typedef enum __nv_saturation_t { __NV_NOSAT, __NV_SATFINITE } __nv_saturation_t;
#define MEPGEN_FP8(NAME, STORAGE)                                                                    \
  struct NAME {                                                                                      \
    STORAGE __x;                                                                                     \
    MEPGEN_HD NAME() = default;                                                                      \
    MEPGEN_HD explicit NAME(float); MEPGEN_HD explicit NAME(double); MEPGEN_HD explicit NAME(__half); \
    MEPGEN_HD explicit NAME(__nv_bfloat16); MEPGEN_HD explicit NAME(int);                             \
    MEPGEN_HD explicit operator float() const; MEPGEN_HD explicit operator __half() const;           \
    MEPGEN_HD explicit operator __nv_bfloat16() const;                                               \
  };
MEPGEN_FP8(__nv_fp8_e4m3, __nv_fp8_storage_t)
MEPGEN_FP8(__nv_fp8_e5m2, __nv_fp8_storage_t)
MEPGEN_FP8(__nv_fp8_e8m0, __nv_fp8_storage_t)
#undef MEPGEN_FP8
#define MEPGEN_FP8X(NAME, STORAGE, VEC)                                                              \
  struct NAME {                                                                                      \
    STORAGE __x;                                                                                     \
    MEPGEN_HD NAME() = default;                                                                      \
    MEPGEN_HD explicit NAME(const VEC &);                                                            \
    MEPGEN_HD explicit operator VEC() const;                                                         \
  };
MEPGEN_FP8X(__nv_fp8x2_e4m3, __nv_fp8x2_storage_t, float2)
MEPGEN_FP8X(__nv_fp8x2_e5m2, __nv_fp8x2_storage_t, float2)
#define MEPGEN_FP8X4(NAME)                                                                           \
  struct NAME {                                                                                      \
    __nv_fp8x4_storage_t __x;                                                                        \
    MEPGEN_HD NAME() = default;                                                                      \
    MEPGEN_HD explicit NAME(const float4 &); MEPGEN_HD explicit NAME(const __half2, const __half2);  \
    MEPGEN_HD explicit NAME(const __nv_bfloat162, const __nv_bfloat162);                             \
    MEPGEN_HD explicit operator float4() const;                                                      \
  };
MEPGEN_FP8X4(__nv_fp8x4_e4m3)
MEPGEN_FP8X4(__nv_fp8x4_e5m2)
#undef MEPGEN_FP8X4
#undef MEPGEN_FP8X
MEPGEN_HD __nv_fp8_storage_t __nv_cvt_float_to_fp8(float, __nv_saturation_t, __nv_fp8_interpretation_t);
MEPGEN_HD __nv_fp8_storage_t __nv_cvt_double_to_fp8(double, __nv_saturation_t, __nv_fp8_interpretation_t);
MEPGEN_HD __nv_fp8_storage_t __nv_cvt_halfraw_to_fp8(__half, __nv_saturation_t, __nv_fp8_interpretation_t);
MEPGEN_HD __nv_fp8_storage_t __nv_cvt_bfloat16raw_to_fp8(__nv_bfloat16, __nv_saturation_t, __nv_fp8_interpretation_t);
MEPGEN_HD __nv_fp8x2_storage_t __nv_cvt_float2_to_fp8x2(float2, __nv_saturation_t, __nv_fp8_interpretation_t);
MEPGEN_HD __half __nv_cvt_fp8_to_halfraw(__nv_fp8_storage_t, __nv_fp8_interpretation_t);
#undef MEPGEN_HD
