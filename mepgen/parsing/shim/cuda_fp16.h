/* mepgen parse shim for <cuda_fp16.h> */
#pragma once
#include "mepgen_cuda_shim.h"
struct __half { unsigned short x; };
struct __half2 { __half x, y; };
typedef __half half;
typedef __half2 half2;
__host__ __device__ float __half2float(__half);
__host__ __device__ __half __float2half(float);
