/* mepgen's CUDA shim for parsing with the libclang wheel (which ships no clang CUDA headers).
 * It declares the CUDA keywords, built-in variables, vector types and the parts of the runtime API
 * that kernels and launch sites use, so that libclang can parse CUDA sources whether or not the CUDA
 * toolkit is installed, and whatever its version. It is for parsing only: nothing here is compiled. */
#pragma once
#ifndef MEPGEN_CUDA_SHIM_H
#define MEPGEN_CUDA_SHIM_H
/* the toolkit's Thrust/CUB/libcu++ turn on their 8-bit float support when <cuda_fp8.h> can be included, and this
 * shim's stand-in for that header declares the types kernels use, not the intrinsics libcu++ itself calls */
#define CCCL_DISABLE_NVFP8_SUPPORT 1
#include <stddef.h>
/* what nvcc's implicit cuda_runtime.h brings into every file: INT_MAX, malloc, memcpy, clock_t, uint8_t ... */
#if __has_include(<limits.h>)
#include <limits.h>
#endif
#if __has_include(<stdlib.h>)
#include <stdlib.h>
#endif
#if __has_include(<string.h>)
#include <string.h>
#endif
#if __has_include(<time.h>)
#include <time.h>
#endif
#if __has_include(<stdint.h>)
#include <stdint.h>
#endif

#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __host__ __attribute__((host))
#define __shared__ __attribute__((shared))
#define __constant__ __attribute__((constant))
#define __managed__ __attribute__((managed))
#define __grid_constant__ __attribute__((grid_constant))
#define __launch_bounds__(...) __attribute__((launch_bounds(__VA_ARGS__)))
#define __cluster_dims__(...) __attribute__((cluster_dims(__VA_ARGS__)))
/* CUDA 12.4's per-kernel register cap: libclang 18 knows no such attribute, and it changes nothing it reads */
#define __maxnreg__(...)
#define __forceinline__ __inline__ __attribute__((always_inline))
/* clang in CUDA mode knows __noinline__ itself (a keyword since clang 15): a macro would break libstdc++ 13's
   `__attribute__((__noinline__))` (in <random>, <chrono>: "use of undeclared identifier 'noinline'") */
#ifndef __CUDA__
#define __noinline__ __attribute__((noinline))
#endif
#define __align__(n) __attribute__((aligned(n)))
#define __restrict__ __restrict
#define __CUDACC__ 1
#define __NVCC__ 1
#ifndef CUDART_VERSION
#define CUDART_VERSION 13000
#endif
#ifndef __CUDACC_VER_MAJOR__
#define __CUDACC_VER_MAJOR__ 13
#define __CUDACC_VER_MINOR__ 0
#endif

#define MEPGEN_VEC2(T, N) struct N##2 { T x, y; }; __host__ __device__ N##2 make_##N##2(T, T);
#define MEPGEN_VEC3(T, N) struct N##3 { T x, y, z; }; __host__ __device__ N##3 make_##N##3(T, T, T);
#define MEPGEN_VEC4(T, N) struct N##4 { T x, y, z, w; }; __host__ __device__ N##4 make_##N##4(T, T, T, T);
#define MEPGEN_VEC(T, N) struct N##1 { T x; }; MEPGEN_VEC2(T, N) MEPGEN_VEC3(T, N) MEPGEN_VEC4(T, N)
MEPGEN_VEC(char, char) MEPGEN_VEC(unsigned char, uchar) MEPGEN_VEC(short, short)
MEPGEN_VEC(unsigned short, ushort) MEPGEN_VEC(int, int) MEPGEN_VEC(unsigned int, uint)
MEPGEN_VEC(long, long) MEPGEN_VEC(unsigned long, ulong) MEPGEN_VEC(long long, longlong)
MEPGEN_VEC(unsigned long long, ulonglong) MEPGEN_VEC(float, float) MEPGEN_VEC(double, double)
/* CUDA 13's aligned 4-vectors of 64-bit elements (<vector_types.h>; CCCL's tuple interface names them) */
#define MEPGEN_VEC4A(T, N) struct N##4_16a { T x, y, z, w; }; struct N##4_32a { T x, y, z, w; };
MEPGEN_VEC4A(long, long) MEPGEN_VEC4A(unsigned long, ulong) MEPGEN_VEC4A(long long, longlong)
MEPGEN_VEC4A(unsigned long long, ulonglong) MEPGEN_VEC4A(double, double)

struct dim3 {
  unsigned int x, y, z;
  __host__ __device__ dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1) : x(vx), y(vy), z(vz) {}
  __host__ __device__ dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
};
extern const __device__ uint3 threadIdx;
extern const __device__ uint3 blockIdx;
extern const __device__ dim3 blockDim;
extern const __device__ dim3 gridDim;
extern const __device__ int warpSize;

typedef struct CUstream_st *cudaStream_t;
typedef struct CUevent_st *cudaEvent_t;
typedef struct CUgraph_st *cudaGraph_t;
typedef struct CUgraphExec_st *cudaGraphExec_t;
typedef unsigned long long cudaTextureObject_t;
typedef unsigned long long cudaSurfaceObject_t;
enum cudaError { cudaSuccess = 0, cudaErrorInvalidValue = 1, cudaErrorMemoryAllocation = 2 };
typedef enum cudaError cudaError_t;
enum cudaMemcpyKind { cudaMemcpyHostToHost = 0, cudaMemcpyHostToDevice = 1, cudaMemcpyDeviceToHost = 2,
                      cudaMemcpyDeviceToDevice = 3, cudaMemcpyDefault = 4 };
struct cudaDeviceProp { char name[256]; int major; int minor; int multiProcessorCount; size_t totalGlobalMem;
                        int l2CacheSize; int maxThreadsPerBlock; size_t sharedMemPerBlock; int warpSize; };
#define cudaStreamNonBlocking 0x01
#define cudaMemAttachGlobal 0x01
#define cudaMemAttachHost 0x02
#define cudaHostAllocDefault 0x00
#define cudaHostAllocPortable 0x01
#define cudaHostAllocMapped 0x02
#define cudaHostAllocWriteCombined 0x04
typedef struct CUmemPoolHandle_st *cudaMemPool_t;

/* The launch syntax <<<grid, block, smem, stream>>> lowers to this call in clang's CUDA mode. */
extern "C" unsigned __cudaPushCallConfiguration(dim3 grid, dim3 block, size_t smem = 0, cudaStream_t stream = 0);
extern "C" cudaError_t cudaConfigureCall(dim3 grid, dim3 block, size_t smem = 0, cudaStream_t stream = 0);

extern "C" {
cudaError_t cudaLaunchKernel(const void *func, dim3 grid, dim3 block, void **args, size_t smem, cudaStream_t stream);
cudaError_t cudaLaunchCooperativeKernel(const void *func, dim3 grid, dim3 block, void **args, size_t smem, cudaStream_t stream);
cudaError_t cudaMalloc(void **p, size_t n);
cudaError_t cudaMallocManaged(void **p, size_t n, unsigned flags);
cudaError_t cudaMallocHost(void **p, size_t n);
cudaError_t cudaHostAlloc(void **p, size_t n, unsigned flags);
cudaError_t cudaMallocPitch(void **p, size_t *pitch, size_t width, size_t height);
cudaError_t cudaMallocAsync(void **p, size_t n, cudaStream_t s);
cudaError_t cudaMallocFromPoolAsync(void **p, size_t n, cudaMemPool_t pool, cudaStream_t s);
cudaError_t cudaFree(void *p);
cudaError_t cudaFreeHost(void *p);
cudaError_t cudaFreeAsync(void *p, cudaStream_t s);
cudaError_t cudaMemcpy(void *d, const void *s, size_t n, enum cudaMemcpyKind k);
cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n, enum cudaMemcpyKind k, cudaStream_t st);
cudaError_t cudaMemset(void *d, int v, size_t n);
cudaError_t cudaMemsetAsync(void *d, int v, size_t n, cudaStream_t st);
cudaError_t cudaMemcpyToSymbol(const void *sym, const void *src, size_t n, size_t off, enum cudaMemcpyKind k);
cudaError_t cudaMemcpyFromSymbol(void *dst, const void *sym, size_t n, size_t off, enum cudaMemcpyKind k);
cudaError_t cudaDeviceSynchronize(void);
cudaError_t cudaThreadSynchronize(void); /* removed in CUDA 13; declared so legacy code parses */
cudaError_t cudaThreadExit(void);
cudaError_t cudaDeviceReset(void);
cudaError_t cudaGetLastError(void);
cudaError_t cudaPeekAtLastError(void);
const char *cudaGetErrorString(cudaError_t e);
const char *cudaGetErrorName(cudaError_t e);
cudaError_t cudaSetDevice(int d);
cudaError_t cudaGetDevice(int *d);
cudaError_t cudaGetDeviceCount(int *n);
cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int d);
cudaError_t cudaStreamCreate(cudaStream_t *s);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned f);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaEventCreate(cudaEvent_t *e);
cudaError_t cudaEventDestroy(cudaEvent_t e);
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s);
cudaError_t cudaEventSynchronize(cudaEvent_t e);
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b);
}
/* The C++ overloads of cuda_runtime.h: typed pointers (float **) and default arguments. */
template <class T> cudaError_t cudaMalloc(T **p, size_t n) { return cudaMalloc((void **)p, n); }
template <class T> cudaError_t cudaMallocManaged(T **p, size_t n, unsigned flags = cudaMemAttachGlobal);
inline cudaError_t cudaMallocHost(void **p, size_t n, unsigned flags) { return cudaHostAlloc(p, n, flags); }
template <class T> cudaError_t cudaMallocHost(T **p, size_t n, unsigned flags = 0);
template <class T> cudaError_t cudaHostAlloc(T **p, size_t n, unsigned flags);
template <class T> cudaError_t cudaMallocPitch(T **p, size_t *pitch, size_t width, size_t height);
template <class T> cudaError_t cudaMallocAsync(T **p, size_t n, cudaStream_t s);
template <class T> cudaError_t cudaMallocAsync(T **p, size_t n, cudaMemPool_t pool, cudaStream_t s);
template <class T> cudaError_t cudaMallocFromPoolAsync(T **p, size_t n, cudaMemPool_t pool, cudaStream_t s);
template <class T> cudaError_t cudaLaunchCooperativeKernel(T *func, dim3 grid, dim3 block, void **args,
                                                           size_t smem = 0, cudaStream_t stream = 0);
template <class T> cudaError_t cudaMemcpyToSymbol(const T &sym, const void *src, size_t n, size_t off = 0,
                                                  enum cudaMemcpyKind k = cudaMemcpyHostToDevice);
template <class T> cudaError_t cudaMemcpyFromSymbol(void *dst, const T &sym, size_t n, size_t off = 0,
                                                    enum cudaMemcpyKind k = cudaMemcpyDeviceToHost);
template <class T> cudaError_t cudaLaunchKernel(T *func, dim3 grid, dim3 block, void **args, size_t smem = 0,
                                                cudaStream_t stream = 0);

/* Device intrinsics (declarations only). */
__device__ void __syncthreads(void);
__device__ int __syncthreads_count(int);
__device__ int __syncthreads_and(int);
__device__ int __syncthreads_or(int);
__device__ void __syncwarp(unsigned mask = 0xffffffffu);
__device__ void __threadfence(void);
__device__ void __threadfence_block(void);
__device__ void __threadfence_system(void);
__device__ long long clock64(void);
__device__ int __popc(unsigned);
__device__ int __clz(int);
__device__ int __ffs(int);
__device__ unsigned __ballot_sync(unsigned, int);
__device__ int __any_sync(unsigned, int);
__device__ int __all_sync(unsigned, int);
__device__ unsigned __activemask(void);
__device__ float __expf(float); __device__ float __logf(float); __device__ float __sinf(float);
__device__ float __cosf(float); __device__ float __powf(float, float); __device__ float __fdividef(float, float);
__device__ float __saturatef(float);
__device__ float __fmaf_rn(float, float, float); __device__ float __frcp_rn(float);
__device__ int __float2int_rn(float); __device__ int __float2int_rd(float);
__device__ float __int2float_rn(int);
#define MEPGEN_ATOMICS(T) \
  __device__ T atomicAdd(T *, T); __device__ T atomicSub(T *, T); __device__ T atomicExch(T *, T); \
  __device__ T atomicMin(T *, T); __device__ T atomicMax(T *, T); __device__ T atomicCAS(T *, T, T); \
  __device__ T atomicAnd(T *, T); __device__ T atomicOr(T *, T); __device__ T atomicXor(T *, T); \
  __device__ T atomicInc(T *, T); __device__ T atomicDec(T *, T); \
  template <class X> __device__ T __shfl_sync(unsigned, T, X, int = 32); \
  __device__ T __shfl_up_sync(unsigned, T, unsigned, int = 32); \
  __device__ T __shfl_down_sync(unsigned, T, unsigned, int = 32); \
  __device__ T __shfl_xor_sync(unsigned, T, int, int = 32); \
  __device__ T __ldg(const T *); __device__ T __ldcs(const T *); __device__ T __ldcg(const T *); \
  __device__ T __ldca(const T *); __device__ T __ldlu(const T *); __device__ T __ldcv(const T *); \
  __device__ void __stcs(T *, T); __device__ void __stcg(T *, T); __device__ void __stwb(T *, T); \
  __device__ void __stwt(T *, T); \
  __device__ T atomicAdd_block(T *, T); __device__ T atomicAdd_system(T *, T); \
  __device__ T atomicMax_block(T *, T); __device__ T atomicMax_system(T *, T); \
  __device__ T atomicMin_block(T *, T); __device__ T atomicMin_system(T *, T); \
  __device__ T atomicExch_block(T *, T); __device__ T atomicExch_system(T *, T); \
  __device__ T atomicCAS_block(T *, T, T); __device__ T atomicCAS_system(T *, T, T);
MEPGEN_ATOMICS(int) MEPGEN_ATOMICS(unsigned int) MEPGEN_ATOMICS(unsigned long long) MEPGEN_ATOMICS(long long)
MEPGEN_ATOMICS(float) MEPGEN_ATOMICS(double)
#define MEPGEN_LDG_VEC(T) __device__ T __ldg(const T *);
MEPGEN_LDG_VEC(float2) MEPGEN_LDG_VEC(float4) MEPGEN_LDG_VEC(int2) MEPGEN_LDG_VEC(int4) MEPGEN_LDG_VEC(double2)
MEPGEN_LDG_VEC(uint2) MEPGEN_LDG_VEC(uint4) MEPGEN_LDG_VEC(short) MEPGEN_LDG_VEC(unsigned short)
MEPGEN_LDG_VEC(char) MEPGEN_LDG_VEC(unsigned char) MEPGEN_LDG_VEC(signed char) MEPGEN_LDG_VEC(long)
MEPGEN_LDG_VEC(unsigned long) MEPGEN_LDG_VEC(longlong2) MEPGEN_LDG_VEC(char4) MEPGEN_LDG_VEC(uchar4)
MEPGEN_LDG_VEC(short2) MEPGEN_LDG_VEC(short4) MEPGEN_LDG_VEC(float3) MEPGEN_LDG_VEC(double4)

#include "mepgen_cuda_math.h"
#include "mepgen_cuda_extras.h"
#endif
