/* mepgen parse shim: stands in for <cuda.h> when parsing with libclang (see mepgen_cuda_shim.h). */
#pragma once
#include "mepgen_cuda_shim.h"
