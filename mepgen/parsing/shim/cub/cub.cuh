/* mepgen parse shim: the part of CUB's interface that kernels and their launch sites use (block and warp
 * collectives, the device-wide algorithms' host calls, iterators, traits), declared so a kernel written
 * with CUB parses without the toolkit's headers. For parsing only: an MEP is built by nvcc with the real
 * <cub/cub.cuh>, which its kernel.cu includes as the application does. */
#pragma once
#ifndef MEPGEN_CUB_SHIM
#define MEPGEN_CUB_SHIM
#include "mepgen_cuda_shim.h"

namespace cub {
struct Sum { template <class T> __host__ __device__ T operator()(const T &a, const T &b) const; };
struct Max { template <class T> __host__ __device__ T operator()(const T &a, const T &b) const; };
struct Min { template <class T> __host__ __device__ T operator()(const T &a, const T &b) const; };
template <class K, class V> struct KeyValuePair {
  K key; V value;
  __host__ __device__ KeyValuePair(); __host__ __device__ KeyValuePair(const K &k, const V &v);
};
struct ArgMax { template <class T> __host__ __device__ T operator()(const T &a, const T &b) const; };
struct ArgMin { template <class T> __host__ __device__ T operator()(const T &a, const T &b) const; };
struct NullType {};

enum BlockReduceAlgorithm { BLOCK_REDUCE_RAKING_COMMUTATIVE_ONLY, BLOCK_REDUCE_RAKING, BLOCK_REDUCE_WARP_REDUCTIONS };
enum BlockScanAlgorithm { BLOCK_SCAN_RAKING, BLOCK_SCAN_RAKING_MEMOIZE, BLOCK_SCAN_WARP_SCANS };
enum BlockLoadAlgorithm { BLOCK_LOAD_DIRECT, BLOCK_LOAD_STRIPED, BLOCK_LOAD_VECTORIZE, BLOCK_LOAD_TRANSPOSE,
                          BLOCK_LOAD_WARP_TRANSPOSE, BLOCK_LOAD_WARP_TRANSPOSE_TIMESLICED };
enum BlockStoreAlgorithm { BLOCK_STORE_DIRECT, BLOCK_STORE_STRIPED, BLOCK_STORE_VECTORIZE, BLOCK_STORE_TRANSPOSE,
                           BLOCK_STORE_WARP_TRANSPOSE, BLOCK_STORE_WARP_TRANSPOSE_TIMESLICED };
enum WarpLoadAlgorithm { WARP_LOAD_DIRECT, WARP_LOAD_STRIPED, WARP_LOAD_VECTORIZE, WARP_LOAD_TRANSPOSE };
enum WarpStoreAlgorithm { WARP_STORE_DIRECT, WARP_STORE_STRIPED, WARP_STORE_VECTORIZE, WARP_STORE_TRANSPOSE };
enum CacheLoadModifier { LOAD_DEFAULT, LOAD_CA, LOAD_CG, LOAD_CS, LOAD_CV, LOAD_LDG, LOAD_VOLATILE };

#define MEPGEN_CUB_TEMP struct TempStorage { unsigned char bytes[16]; };

template <class T, int BLOCK_DIM_X, BlockReduceAlgorithm A = BLOCK_REDUCE_WARP_REDUCTIONS, int BLOCK_DIM_Y = 1,
          int BLOCK_DIM_Z = 1, int ARCH = 0>
class BlockReduce {
 public:
  MEPGEN_CUB_TEMP
  __device__ BlockReduce(); __device__ BlockReduce(TempStorage &);
  template <class Op> __device__ T Reduce(T, Op); template <class Op> __device__ T Reduce(T, Op, int);
  template <int N, class Op> __device__ T Reduce(T (&)[N], Op);
  __device__ T Sum(T); __device__ T Sum(T, int); template <int N> __device__ T Sum(T (&)[N]);
};

template <class T, int LOGICAL_WARP_THREADS = 32, int ARCH = 0>
class WarpReduce {
 public:
  MEPGEN_CUB_TEMP
  __device__ WarpReduce(TempStorage &);
  __device__ T Sum(T); __device__ T Sum(T, int);
  template <class Op> __device__ T Reduce(T, Op); template <class Op> __device__ T Reduce(T, Op, int);
  template <class F> __device__ T HeadSegmentedSum(T, F); template <class F> __device__ T TailSegmentedSum(T, F);
};

#define MEPGEN_CUB_SCANS \
  __device__ void ExclusiveSum(T, T &); __device__ void ExclusiveSum(T, T &, T &); \
  __device__ void InclusiveSum(T, T &); __device__ void InclusiveSum(T, T &, T &); \
  template <class Op> __device__ void ExclusiveScan(T, T &, T, Op); \
  template <class Op> __device__ void ExclusiveScan(T, T &, T, Op, T &); \
  template <class Op> __device__ void InclusiveScan(T, T &, Op); \
  template <class Op> __device__ void InclusiveScan(T, T &, Op, T &); \
  template <int N> __device__ void ExclusiveSum(T (&)[N], T (&)[N]); \
  template <int N> __device__ void ExclusiveSum(T (&)[N], T (&)[N], T &); \
  template <int N> __device__ void InclusiveSum(T (&)[N], T (&)[N]); \
  template <int N> __device__ void InclusiveSum(T (&)[N], T (&)[N], T &); \
  template <int N, class Op> __device__ void ExclusiveScan(T (&)[N], T (&)[N], T, Op); \
  template <int N, class Op> __device__ void InclusiveScan(T (&)[N], T (&)[N], Op);

template <class T, int BLOCK_DIM_X, BlockScanAlgorithm A = BLOCK_SCAN_RAKING, int BLOCK_DIM_Y = 1,
          int BLOCK_DIM_Z = 1, int ARCH = 0>
class BlockScan {
 public:
  MEPGEN_CUB_TEMP
  __device__ BlockScan(); __device__ BlockScan(TempStorage &);
  MEPGEN_CUB_SCANS
};

template <class T, int LOGICAL_WARP_THREADS = 32, int ARCH = 0>
class WarpScan {
 public:
  MEPGEN_CUB_TEMP
  __device__ WarpScan(TempStorage &);
  MEPGEN_CUB_SCANS
  __device__ T Broadcast(T, unsigned);
};

template <class T, int BLOCK_DIM_X, int ITEMS, BlockLoadAlgorithm A = BLOCK_LOAD_DIRECT, int BLOCK_DIM_Y = 1,
          int BLOCK_DIM_Z = 1, int ARCH = 0>
class BlockLoad {
 public:
  MEPGEN_CUB_TEMP
  __device__ BlockLoad(); __device__ BlockLoad(TempStorage &);
  template <class It> __device__ void Load(It, T (&)[ITEMS]);
  template <class It> __device__ void Load(It, T (&)[ITEMS], int);
  template <class It, class D> __device__ void Load(It, T (&)[ITEMS], int, D);
};

template <class T, int BLOCK_DIM_X, int ITEMS, BlockStoreAlgorithm A = BLOCK_STORE_DIRECT, int BLOCK_DIM_Y = 1,
          int BLOCK_DIM_Z = 1, int ARCH = 0>
class BlockStore {
 public:
  MEPGEN_CUB_TEMP
  __device__ BlockStore(); __device__ BlockStore(TempStorage &);
  template <class It> __device__ void Store(It, T (&)[ITEMS]);
  template <class It> __device__ void Store(It, T (&)[ITEMS], int);
};

template <class T, int BLOCK_DIM_X, int ITEMS, bool WARP_TIME_SLICING = false, int BLOCK_DIM_Y = 1,
          int BLOCK_DIM_Z = 1, int ARCH = 0>
class BlockExchange {
 public:
  MEPGEN_CUB_TEMP
  __device__ BlockExchange(); __device__ BlockExchange(TempStorage &);
  template <class U> __device__ void StripedToBlocked(U (&)[ITEMS]);
  template <class U> __device__ void BlockedToStriped(U (&)[ITEMS]);
  template <class U> __device__ void WarpStripedToBlocked(U (&)[ITEMS]);
  template <class U> __device__ void BlockedToWarpStriped(U (&)[ITEMS]);
  template <class U, class V> __device__ void StripedToBlocked(U (&)[ITEMS], V (&)[ITEMS]);
  template <class U, class V> __device__ void BlockedToStriped(U (&)[ITEMS], V (&)[ITEMS]);
  template <class U, class V> __device__ void WarpStripedToBlocked(U (&)[ITEMS], V (&)[ITEMS]);
  template <class U, class V> __device__ void BlockedToWarpStriped(U (&)[ITEMS], V (&)[ITEMS]);
  template <class U, class R> __device__ void ScatterToBlocked(U (&)[ITEMS], R (&)[ITEMS]);
  template <class U, class R> __device__ void ScatterToStriped(U (&)[ITEMS], R (&)[ITEMS]);
};

template <class T, int ITEMS, int LOGICAL_WARP_THREADS = 32, int ARCH = 0>
class WarpExchange {
 public:
  MEPGEN_CUB_TEMP
  __device__ WarpExchange(TempStorage &);
  template <class U> __device__ void StripedToBlocked(const U (&)[ITEMS], U (&)[ITEMS]);
  template <class U> __device__ void BlockedToStriped(const U (&)[ITEMS], U (&)[ITEMS]);
  template <class U, class R> __device__ void ScatterToStriped(U (&)[ITEMS], R (&)[ITEMS]);
};

template <class T, int BLOCK_DIM_X, int BLOCK_DIM_Y = 1, int BLOCK_DIM_Z = 1, int ARCH = 0>
class BlockAdjacentDifference {
 public:
  MEPGEN_CUB_TEMP
  __device__ BlockAdjacentDifference(TempStorage &);
  template <int N, class O, class Op> __device__ void SubtractLeft(T (&)[N], O (&)[N], Op);
  template <int N, class O, class Op> __device__ void SubtractLeft(T (&)[N], O (&)[N], Op, T);
  template <int N, class O, class Op> __device__ void SubtractRight(T (&)[N], O (&)[N], Op);
};

template <int BLOCK_THREADS, class T, int N, class It> __device__ void LoadDirectStriped(int, It, T (&)[N]);
template <int BLOCK_THREADS, class T, int N, class It> __device__ void LoadDirectStriped(int, It, T (&)[N], int);
template <class T, int N, class It> __device__ void LoadDirectBlocked(int, It, T (&)[N]);
template <class T, int N, class It> __device__ void LoadDirectBlocked(int, It, T (&)[N], int);
template <int BLOCK_THREADS, class T, int N, class It> __device__ void StoreDirectStriped(int, It, T (&)[N]);
template <int BLOCK_THREADS, class T, int N, class It> __device__ void StoreDirectStriped(int, It, T (&)[N], int);
template <class T, int N, class It> __device__ void StoreDirectBlocked(int, It, T (&)[N]);
template <class T, int N, class It> __device__ void StoreDirectBlocked(int, It, T (&)[N], int);

template <class T> struct Traits {
  typedef unsigned long long UnsignedBits;
  static const UnsignedBits LOWEST_KEY = 0, MAX_KEY = ~0ull;
  static __host__ __device__ UnsignedBits TwiddleIn(UnsignedBits);
  static __host__ __device__ UnsignedBits TwiddleOut(UnsignedBits);
  static __host__ __device__ T Max(); static __host__ __device__ T Lowest();
};

template <class V, class Off = long> struct CountingInputIterator {
  __host__ __device__ CountingInputIterator(const V &);
  __host__ __device__ V operator[](Off) const; __host__ __device__ V operator*() const;
  __host__ __device__ CountingInputIterator operator+(Off) const;
};
template <class V, class Op, class It, class Off = long> struct TransformInputIterator {
  __host__ __device__ TransformInputIterator(It, Op);
  __host__ __device__ V operator[](Off) const; __host__ __device__ V operator*() const;
  __host__ __device__ TransformInputIterator operator+(Off) const;
};

/* device-wide algorithms: host calls with (temp storage, its size, ...); any further arguments */
#define MEPGEN_CUB_HOST(name) template <class... A> static cudaError_t name(void *, size_t &, A &&...);
struct DeviceReduce { MEPGEN_CUB_HOST(Sum) MEPGEN_CUB_HOST(Max) MEPGEN_CUB_HOST(Min) MEPGEN_CUB_HOST(ArgMax)
                      MEPGEN_CUB_HOST(ArgMin) MEPGEN_CUB_HOST(Reduce) MEPGEN_CUB_HOST(ReduceByKey) };
struct DeviceSegmentedReduce { MEPGEN_CUB_HOST(Sum) MEPGEN_CUB_HOST(Max) MEPGEN_CUB_HOST(Min)
                               MEPGEN_CUB_HOST(Reduce) };
struct DeviceScan { MEPGEN_CUB_HOST(ExclusiveSum) MEPGEN_CUB_HOST(InclusiveSum) MEPGEN_CUB_HOST(ExclusiveScan)
                    MEPGEN_CUB_HOST(InclusiveScan) MEPGEN_CUB_HOST(ExclusiveSumByKey)
                    MEPGEN_CUB_HOST(InclusiveSumByKey) };
struct DeviceSelect { MEPGEN_CUB_HOST(If) MEPGEN_CUB_HOST(Flagged) MEPGEN_CUB_HOST(Unique) };
struct DevicePartition { MEPGEN_CUB_HOST(If) MEPGEN_CUB_HOST(Flagged) };
struct DeviceRadixSort { MEPGEN_CUB_HOST(SortKeys) MEPGEN_CUB_HOST(SortPairs) MEPGEN_CUB_HOST(SortKeysDescending)
                         MEPGEN_CUB_HOST(SortPairsDescending) };
struct DeviceSegmentedRadixSort { MEPGEN_CUB_HOST(SortKeys) MEPGEN_CUB_HOST(SortPairs) };
struct DeviceHistogram { MEPGEN_CUB_HOST(HistogramEven) MEPGEN_CUB_HOST(HistogramRange) };
struct DeviceRunLengthEncode { MEPGEN_CUB_HOST(Encode) MEPGEN_CUB_HOST(NonTrivialRuns) };
#undef MEPGEN_CUB_HOST
#undef MEPGEN_CUB_SCANS
#undef MEPGEN_CUB_TEMP
}  // namespace cub
#endif
