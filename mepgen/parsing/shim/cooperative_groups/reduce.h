/* mepgen parse shim for <cooperative_groups/reduce.h>: declared with <cooperative_groups.h> */
#pragma once
#include "../cooperative_groups.h"
