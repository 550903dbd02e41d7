"""The L2 flush kernel (templates/harness/l2_flush.h) as a cubin, for the pycuda backend's worker.

The native harness renders the same source into its own build; the worker cannot, so the backend compiles it
once per arch into the build folder and the worker launches it before each timed launch.
"""
from __future__ import annotations

from pathlib import Path

import jinja2

from ..templating import template_loader
from .helper_cubin import cached_cubin

KERNEL = "mepgen_l2_flush"
SOURCE = "l2_flush.h"
#: the launch geometry of mepgen_l2_flush_launch in l2_flush.h (a test keeps the two equal)
BLOCK, BLOCKS_PER_SM = 512, 8


def flush_bytes(l2_bytes: int) -> int:
    """mepgen_l2_flush_bytes of l2_flush.h: twice the L2 (at least 2 MiB), in whole int4s."""
    return 2 * max(l2_bytes, 1 << 20) // 16 * 16


def source() -> str:
    text, _, _ = template_loader("harness").get_source(jinja2.Environment(), SOURCE)
    return text


def build_cubin(arch: str, build_dir: Path, timeout: float = 300.0) -> Path:
    """The flush kernel compiled for `arch` (cached by arch and source); MepgenError when nvcc fails."""
    return cached_cubin(source(), "l2-flush", "the L2 flush kernel", arch, build_dir, (), timeout)
