/* mepgen parse shim for <cooperative_groups.h>: the groups, partitions and collectives kernels use
 * (declarations only, for parsing). */
#pragma once
#include "mepgen_cuda_shim.h"
namespace cooperative_groups {
#define MEPGEN_GROUP_BASICS \
  __device__ void sync() const; __device__ unsigned long long size() const; \
  __device__ unsigned long long num_threads() const; __device__ unsigned long long thread_rank() const;
struct thread_group { MEPGEN_GROUP_BASICS };
struct thread_block : thread_group {
  MEPGEN_GROUP_BASICS
  __device__ dim3 group_index() const; __device__ dim3 thread_index() const; __device__ dim3 group_dim() const;
  __device__ dim3 dim_threads() const;
};
struct grid_group : thread_group {
  MEPGEN_GROUP_BASICS
  __device__ bool is_valid() const; __device__ dim3 group_dim() const; __device__ dim3 block_index() const;
  __device__ unsigned long long block_rank() const; __device__ unsigned long long num_blocks() const;
};
struct coalesced_group : thread_group {
  MEPGEN_GROUP_BASICS
  __device__ unsigned meta_group_rank() const; __device__ unsigned meta_group_size() const;
  template <class T> __device__ T shfl(T, int) const; template <class T> __device__ T shfl_down(T, unsigned) const;
  template <class T> __device__ T shfl_up(T, unsigned) const;
  __device__ int any(int) const; __device__ int all(int) const; __device__ unsigned ballot(int) const;
};
template <unsigned Size, class Parent = void> struct thread_block_tile : thread_group {
  MEPGEN_GROUP_BASICS
  __device__ thread_block_tile() = default;
  template <class P> __device__ thread_block_tile(const thread_block_tile<Size, P> &);   /* typed -> generic */
  __device__ unsigned meta_group_rank() const; __device__ unsigned meta_group_size() const;
  template <class T> __device__ T shfl(T, int) const; template <class T> __device__ T shfl_down(T, unsigned) const;
  template <class T> __device__ T shfl_up(T, unsigned) const; template <class T> __device__ T shfl_xor(T, unsigned) const;
  __device__ int any(int) const; __device__ int all(int) const; __device__ unsigned ballot(int) const;
  template <class T> __device__ unsigned match_any(T) const;
};
struct cluster_group : thread_group {
  MEPGEN_GROUP_BASICS
  __device__ dim3 block_index() const; __device__ unsigned block_rank() const; __device__ unsigned num_blocks() const;
  __device__ dim3 dim_blocks() const; __device__ bool is_valid() const;
  template <class T> __device__ T *map_shared_rank(T *, int) const;
  __device__ unsigned query_shared_rank(const void *) const;
};
/* the scratch a block-wide tile (more than 32 threads) needs: `__shared__ block_tile_memory<256> scratch;` */
template <unsigned MaxBlockSize = 1024> struct block_tile_memory { unsigned char scratch[16]; };
__device__ thread_block this_thread_block();
template <unsigned MaxBlockSize> __device__ thread_block this_thread_block(block_tile_memory<MaxBlockSize> &);
__device__ cluster_group this_cluster();
__device__ grid_group this_grid();
__device__ coalesced_group coalesced_threads();
template <unsigned Size, class Parent> __device__ thread_block_tile<Size, Parent> tiled_partition(const Parent &);
__device__ thread_group tiled_partition(const thread_group &, unsigned);
template <class Group> __device__ void sync(const Group &);
template <class T> struct plus { __device__ T operator()(const T &, const T &) const; };
template <class T> struct less { __device__ T operator()(const T &, const T &) const; };
template <class T> struct greater { __device__ T operator()(const T &, const T &) const; };
template <class T> struct bit_and { __device__ T operator()(const T &, const T &) const; };
template <class T> struct bit_or { __device__ T operator()(const T &, const T &) const; };
template <class T> struct bit_xor { __device__ T operator()(const T &, const T &) const; };
template <class Group, class T, class Op> __device__ T reduce(const Group &, T, Op);
template <class Group, class T, class Op> __device__ T inclusive_scan(const Group &, T, Op);
template <class Group, class T, class Op> __device__ T exclusive_scan(const Group &, T, Op);
template <class Group, class T> __device__ T inclusive_scan(const Group &, T);
template <class Group, class T> __device__ T exclusive_scan(const Group &, T);
template <class Group, class T> __device__ void memcpy_async(const Group &, T *, const T *, size_t);
template <class Group> __device__ void wait(const Group &);
template <unsigned N, class Group> __device__ void wait_prior(const Group &);
template <class Group> __device__ thread_group labeled_partition(const Group &, int);
template <class Group> __device__ thread_group binary_partition(const Group &, bool);
namespace details {}
namespace experimental {       /* the CUDA 11 spellings of block-wide tiles */
template <unsigned TileCommunicationSize = 8, unsigned MaxBlockSize = 1024> struct block_tile_memory {
  unsigned char scratch[16];
};
template <unsigned C, unsigned M> __device__ thread_block this_thread_block(block_tile_memory<C, M> &);
using cooperative_groups::tiled_partition;
}  // namespace experimental
#undef MEPGEN_GROUP_BASICS
}  // namespace cooperative_groups
