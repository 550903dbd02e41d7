// compat.h -- shims for CUDA runtime APIs that newer toolkits removed.
//
// Parts of the driver code predate CUDA 4.0 and still use the old
// thread-centric names. Rather than touching every call site we map them to
// their replacements when building against a toolkit that no longer ships them.
#pragma once

#include <cuda_runtime.h>

#if defined(CUDART_VERSION) && CUDART_VERSION >= 13000
// cudaThreadSynchronize() was deprecated in CUDA 4.0 and removed in CUDA 13.0.
#define cudaThreadSynchronize cudaDeviceSynchronize
#endif
