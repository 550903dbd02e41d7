/* mepgen parse shim: stands in for <sm_20_atomic_functions.h> when parsing with libclang (see mepgen_cuda_shim.h). */
#pragma once
#include "mepgen_cuda_shim.h"
