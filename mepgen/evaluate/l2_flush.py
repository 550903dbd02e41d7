"""The L2 flush kernel (templates/harness/l2_flush.h) as a cubin, for the pycuda backend's worker.

The native harness renders the same source into its own build; the worker cannot, so the backend compiles it
once per arch into the build folder and the worker launches it before each timed launch.
"""
from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

import jinja2

from .. import mepbuild
from ..errors import MepgenError
from ..templating import template_loader
from . import process

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
    text = source()
    out = Path(build_dir) / f"l2-flush-{arch}-{hashlib.sha256(text.encode()).hexdigest()[:12]}.cubin"
    if out.is_file():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    src = out.with_suffix(".cu")
    src.write_text(text)
    tmp = out.with_name(f"{out.stem}.{os.getpid()}.{time.monotonic_ns()}.tmp")
    cmd = [mepbuild.nvcc_executable(), mepbuild.arch_flag(arch), "-cubin", str(src), "-o", str(tmp)]
    try:
        done = process.run(cmd, timeout=timeout)
    except FileNotFoundError:
        raise MepgenError(f"{cmd[0]} not found: install the CUDA toolkit or set $NVCC") from None
    if done.returncode != 0 or not tmp.is_file():
        tmp.unlink(missing_ok=True)
        why = "timed out" if done.timed_out else (done.stderr or done.stdout).strip()[-300:]
        raise MepgenError(f"cannot build the L2 flush kernel for {arch}: {why}")
    os.replace(tmp, out)
    return out
