/* mepgen parse shim for <cooperative_groups/scan.h>: declared with <cooperative_groups.h> */
#pragma once
#include "../cooperative_groups.h"
