/* mepgen parse shim: cuRAND's device API (generator states, init, draws), declared so a kernel that draws
 * random numbers parses without the toolkit's headers. For parsing only. */
#pragma once
#ifndef MEPGEN_CURAND_KERNEL_SHIM
#define MEPGEN_CURAND_KERNEL_SHIM
#include "mepgen_cuda_shim.h"
struct curandStateXORWOW { unsigned int d, v[5]; int boxmuller_flag, boxmuller_flag_double;
                           float boxmuller_extra; double boxmuller_extra_double; };
typedef struct curandStateXORWOW curandStateXORWOW_t;
typedef struct curandStateXORWOW curandState_t;
typedef struct curandStateXORWOW curandState;
struct curandStatePhilox4_32_10 { uint4 ctr; uint4 output; uint2 key; unsigned int STATE; int boxmuller_flag,
                                  boxmuller_flag_double; float boxmuller_extra; double boxmuller_extra_double; };
typedef struct curandStatePhilox4_32_10 curandStatePhilox4_32_10_t;
struct curandStateMRG32k3a { double s1[3], s2[3]; int boxmuller_flag, boxmuller_flag_double;
                             float boxmuller_extra; double boxmuller_extra_double; };
typedef struct curandStateMRG32k3a curandStateMRG32k3a_t;
typedef struct curandStateMRG32k3a curandStateMRG32k3a;
#define MEPGEN_CURAND(S) \
  __device__ void curand_init(unsigned long long, unsigned long long, unsigned long long, S *); \
  __device__ unsigned int curand(S *); __device__ float curand_uniform(S *); \
  __device__ double curand_uniform_double(S *); __device__ float curand_normal(S *); \
  __device__ double curand_normal_double(S *); __device__ float2 curand_normal2(S *); \
  __device__ double2 curand_normal2_double(S *); __device__ float curand_log_normal(S *, float, float); \
  __device__ unsigned int curand_poisson(S *, double); __device__ void skipahead(unsigned long long, S *); \
  __device__ void skipahead_sequence(unsigned long long, S *);
MEPGEN_CURAND(curandStateXORWOW) MEPGEN_CURAND(curandStatePhilox4_32_10) MEPGEN_CURAND(curandStateMRG32k3a)
#undef MEPGEN_CURAND
__device__ uint4 curand4(curandStatePhilox4_32_10 *);
__device__ float4 curand_uniform4(curandStatePhilox4_32_10 *);
__device__ float4 curand_normal4(curandStatePhilox4_32_10 *);
__device__ double2 curand_uniform2_double(curandStatePhilox4_32_10 *);
#endif
