/* mepgen parse shim for <cuda_fp16.h>: the half types with their conversions and operators, and the
 * half-precision intrinsics kernels call (declarations only, for parsing). */
#pragma once
#include "mepgen_cuda_shim.h"
#define MEPGEN_HD __host__ __device__
struct __half {
  unsigned short __x;
  MEPGEN_HD __half() = default;
  MEPGEN_HD __half(float);
  MEPGEN_HD __half(double);
  MEPGEN_HD __half(int);
  MEPGEN_HD operator float() const;
  MEPGEN_HD __half &operator+=(const __half &);
  MEPGEN_HD __half &operator-=(const __half &);
  MEPGEN_HD __half &operator*=(const __half &);
  MEPGEN_HD __half &operator/=(const __half &);
};
struct __half2 {
  __half x, y;
  MEPGEN_HD __half2() = default;
  MEPGEN_HD __half2(const __half &, const __half &);
  MEPGEN_HD __half2 &operator+=(const __half2 &);
  MEPGEN_HD __half2 &operator*=(const __half2 &);
};
typedef __half half;
typedef __half2 half2;
typedef struct { unsigned short x; } __half_raw;
MEPGEN_HD __half operator+(const __half &, const __half &); MEPGEN_HD __half operator-(const __half &, const __half &);
MEPGEN_HD __half operator*(const __half &, const __half &); MEPGEN_HD __half operator/(const __half &, const __half &);
MEPGEN_HD __half operator-(const __half &);
MEPGEN_HD __half2 operator+(const __half2 &, const __half2 &); MEPGEN_HD __half2 operator-(const __half2 &, const __half2 &);
MEPGEN_HD __half2 operator*(const __half2 &, const __half2 &); MEPGEN_HD __half2 operator/(const __half2 &, const __half2 &);
MEPGEN_HD float __half2float(__half); MEPGEN_HD __half __float2half(float); MEPGEN_HD __half __float2half_rn(float);
MEPGEN_HD __half __float2half_rz(float); MEPGEN_HD __half __double2half(double);
MEPGEN_HD __half2 __float2half2_rn(float); MEPGEN_HD __half2 __floats2half2_rn(float, float);
MEPGEN_HD __half2 __float22half2_rn(float2); MEPGEN_HD float2 __half22float2(__half2);
MEPGEN_HD float __low2float(__half2); MEPGEN_HD float __high2float(__half2);
MEPGEN_HD __half __low2half(__half2); MEPGEN_HD __half __high2half(__half2);
MEPGEN_HD __half2 __halves2half2(__half, __half); MEPGEN_HD __half2 __half2half2(__half);
__device__ __half __int2half_rn(int); __device__ int __half2int_rn(__half); __device__ int __half2int_rz(__half);
__device__ __half __ushort_as_half(unsigned short); __device__ unsigned short __half_as_ushort(__half);
__device__ __half __hadd(__half, __half); __device__ __half __hsub(__half, __half); __device__ __half __hmul(__half, __half);
__device__ __half __hdiv(__half, __half); __device__ __half __hfma(__half, __half, __half); __device__ __half __hneg(__half);
__device__ __half __habs(__half); __device__ __half __hmax(__half, __half); __device__ __half __hmin(__half, __half);
__device__ bool __heq(__half, __half); __device__ bool __hne(__half, __half); __device__ bool __hlt(__half, __half);
__device__ bool __hle(__half, __half); __device__ bool __hgt(__half, __half); __device__ bool __hge(__half, __half);
__device__ bool __hisnan(__half); __device__ int __hisinf(__half);
__device__ __half2 __hadd2(__half2, __half2); __device__ __half2 __hsub2(__half2, __half2);
__device__ __half2 __hmul2(__half2, __half2); __device__ __half2 __h2div(__half2, __half2);
__device__ __half2 __hfma2(__half2, __half2, __half2); __device__ __half2 __hneg2(__half2);
__device__ __half2 __habs2(__half2); __device__ __half2 __hmax2(__half2, __half2); __device__ __half2 __hmin2(__half2, __half2);
__device__ __half hsqrt(__half); __device__ __half hrsqrt(__half); __device__ __half hexp(__half); __device__ __half hlog(__half);
__device__ __half hsin(__half); __device__ __half hcos(__half); __device__ __half hrcp(__half); __device__ __half hfloor(__half);
__device__ __half2 h2sqrt(__half2); __device__ __half2 h2exp(__half2); __device__ __half2 h2rcp(__half2);
__device__ __half __ldg(const __half *); __device__ __half2 __ldg(const __half2 *);
__device__ __half __shfl_xor_sync(unsigned, __half, int, int = 32); __device__ __half2 __shfl_xor_sync(unsigned, __half2, int, int = 32);
__device__ __half __shfl_down_sync(unsigned, __half, unsigned, int = 32);
__device__ __half2 __shfl_down_sync(unsigned, __half2, unsigned, int = 32);
__device__ __half2 atomicAdd(__half2 *, __half2); __device__ __half atomicAdd(__half *, __half);
__device__ __half hlog2(__half); __device__ __half hlog10(__half); __device__ __half hexp2(__half);
__device__ __half hexp10(__half); __device__ __half htrunc(__half); __device__ __half hceil(__half);
__device__ __half hrint(__half); __device__ __half2 h2log(__half2); __device__ __half2 h2log2(__half2);
__device__ __half2 h2exp2(__half2); __device__ __half2 h2sin(__half2); __device__ __half2 h2cos(__half2);
__device__ __half2 h2floor(__half2); __device__ __half2 h2ceil(__half2); __device__ __half2 h2rsqrt(__half2);
__device__ __half2 __heq2(__half2, __half2); __device__ __half2 __hne2(__half2, __half2);
__device__ __half2 __hlt2(__half2, __half2); __device__ __half2 __hle2(__half2, __half2);
__device__ __half2 __hgt2(__half2, __half2); __device__ __half2 __hge2(__half2, __half2);
__device__ bool __hbeq2(__half2, __half2); __device__ bool __hbgt2(__half2, __half2); __device__ bool __hblt2(__half2, __half2);
__device__ __half2 __lowhigh2highlow(__half2); __device__ __half2 __low2half2(__half2); __device__ __half2 __high2half2(__half2);
#undef MEPGEN_HD
