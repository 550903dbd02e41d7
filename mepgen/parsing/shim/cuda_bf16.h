/* mepgen parse shim for <cuda_bf16.h>: the bfloat16 types with their conversions and operators, and the
 * intrinsics kernels call (declarations only, for parsing). */
#pragma once
#include "mepgen_cuda_shim.h"
#define MEPGEN_HD __host__ __device__
struct __nv_bfloat16 {
  unsigned short __x;
  MEPGEN_HD __nv_bfloat16() = default;
  MEPGEN_HD __nv_bfloat16(float);
  MEPGEN_HD __nv_bfloat16(double);
  MEPGEN_HD operator float() const;
  MEPGEN_HD __nv_bfloat16 &operator+=(const __nv_bfloat16 &);
  MEPGEN_HD __nv_bfloat16 &operator*=(const __nv_bfloat16 &);
};
struct __nv_bfloat162 {
  __nv_bfloat16 x, y;
  MEPGEN_HD __nv_bfloat162() = default;
  MEPGEN_HD __nv_bfloat162(const __nv_bfloat16 &, const __nv_bfloat16 &);
};
typedef __nv_bfloat16 nv_bfloat16;
typedef __nv_bfloat162 nv_bfloat162;
MEPGEN_HD __nv_bfloat16 operator+(const __nv_bfloat16 &, const __nv_bfloat16 &);
MEPGEN_HD __nv_bfloat16 operator-(const __nv_bfloat16 &, const __nv_bfloat16 &);
MEPGEN_HD __nv_bfloat16 operator*(const __nv_bfloat16 &, const __nv_bfloat16 &);
MEPGEN_HD __nv_bfloat16 operator/(const __nv_bfloat16 &, const __nv_bfloat16 &);
MEPGEN_HD float __bfloat162float(__nv_bfloat16); MEPGEN_HD __nv_bfloat16 __float2bfloat16(float);
MEPGEN_HD __nv_bfloat16 __float2bfloat16_rn(float); MEPGEN_HD __nv_bfloat162 __floats2bfloat162_rn(float, float);
MEPGEN_HD float2 __bfloat1622float2(__nv_bfloat162); MEPGEN_HD __nv_bfloat162 __float22bfloat162_rn(float2);
MEPGEN_HD float __low2float(__nv_bfloat162); MEPGEN_HD float __high2float(__nv_bfloat162);
__device__ __nv_bfloat16 __hadd(__nv_bfloat16, __nv_bfloat16); __device__ __nv_bfloat16 __hmul(__nv_bfloat16, __nv_bfloat16);
__device__ __nv_bfloat16 __hfma(__nv_bfloat16, __nv_bfloat16, __nv_bfloat16);
__device__ __nv_bfloat162 __hadd2(__nv_bfloat162, __nv_bfloat162); __device__ __nv_bfloat162 __hmul2(__nv_bfloat162, __nv_bfloat162);
__device__ __nv_bfloat162 __hfma2(__nv_bfloat162, __nv_bfloat162, __nv_bfloat162);
__device__ __nv_bfloat16 __ldg(const __nv_bfloat16 *); __device__ __nv_bfloat162 __ldg(const __nv_bfloat162 *);
__device__ __nv_bfloat16 atomicAdd(__nv_bfloat16 *, __nv_bfloat16);
__device__ __nv_bfloat162 atomicAdd(__nv_bfloat162 *, __nv_bfloat162);
MEPGEN_HD __nv_bfloat16 __ushort_as_bfloat16(unsigned short); MEPGEN_HD unsigned short __bfloat16_as_ushort(__nv_bfloat16);
MEPGEN_HD __nv_bfloat16 __short_as_bfloat16(short); MEPGEN_HD short __bfloat16_as_short(__nv_bfloat16);
MEPGEN_HD __nv_bfloat162 __halves2bfloat162(__nv_bfloat16, __nv_bfloat16);
MEPGEN_HD __nv_bfloat16 __low2bfloat16(__nv_bfloat162); MEPGEN_HD __nv_bfloat16 __high2bfloat16(__nv_bfloat162);
MEPGEN_HD __nv_bfloat162 __float2bfloat162_rn(float); MEPGEN_HD __nv_bfloat162 __bfloat162bfloat162(__nv_bfloat16);
#undef MEPGEN_HD
