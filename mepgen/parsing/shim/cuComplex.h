/* mepgen parse shim: cuComplex.h's types and functions, declared for parsing only. */
#pragma once
#ifndef MEPGEN_CUCOMPLEX_SHIM
#define MEPGEN_CUCOMPLEX_SHIM
#include "mepgen_cuda_shim.h"
typedef float2 cuFloatComplex;
typedef double2 cuDoubleComplex;
typedef cuFloatComplex cuComplex;
#define MEPGEN_CX(C, R, s) \
  __host__ __device__ R cuCreal##s(C); __host__ __device__ R cuCimag##s(C); \
  __host__ __device__ C cuConj##s(C); __host__ __device__ C cuCadd##s(C, C); __host__ __device__ C cuCsub##s(C, C); \
  __host__ __device__ C cuCmul##s(C, C); __host__ __device__ C cuCdiv##s(C, C); __host__ __device__ R cuCabs##s(C); \
  __host__ __device__ C cuCfma##s(C, C, C);
MEPGEN_CX(cuFloatComplex, float, f) MEPGEN_CX(cuDoubleComplex, double, )
#undef MEPGEN_CX
__host__ __device__ cuFloatComplex make_cuFloatComplex(float, float);
__host__ __device__ cuDoubleComplex make_cuDoubleComplex(double, double);
__host__ __device__ cuComplex make_cuComplex(float, float);
__host__ __device__ cuDoubleComplex cuComplexFloatToDouble(cuFloatComplex);
__host__ __device__ cuFloatComplex cuComplexDoubleToFloat(cuDoubleComplex);
#endif
