/* mepgen parse shim: see cub/cub.cuh */
#include <cub/cub.cuh>
