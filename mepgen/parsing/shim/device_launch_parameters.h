/* mepgen parse shim: stands in for <device_launch_parameters.h> when parsing with libclang (see mepgen_cuda_shim.h). */
#pragma once
#include "mepgen_cuda_shim.h"
