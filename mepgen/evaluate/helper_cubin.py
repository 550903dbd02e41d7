"""mepgen's own small kernels (the L2 flush, the output comparisons) compiled once per arch and source into a cubin
the pycuda worker loads: cached by name, written through a temporary file so concurrent builds never see a torn one."""
from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

from .. import mepbuild
from ..errors import MepgenError
from . import process


def cached_cubin(text: str, stem: str, what: str, arch: str, build_dir: Path, flags: tuple[str, ...] = (),
                 timeout: float = 300.0) -> Path:
    """BUILD_DIR/STEM-ARCH-HASH.cubin of CUDA source `text` (built when missing); MepgenError naming `what` when
    nvcc fails."""
    out = Path(build_dir) / f"{stem}-{arch}-{hashlib.sha256(text.encode()).hexdigest()[:12]}.cubin"
    if out.is_file():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    src = out.with_suffix(".cu")
    src.write_text(text)
    tmp = out.with_name(f"{out.stem}.{os.getpid()}.{time.monotonic_ns()}.tmp")
    cmd = [mepbuild.nvcc_executable(), mepbuild.arch_flag(arch), *flags, "-cubin", str(src), "-o", str(tmp)]
    try:
        done = process.run(cmd, timeout=timeout)
    except FileNotFoundError:
        raise MepgenError(f"{cmd[0]} not found: install the CUDA toolkit or set $NVCC") from None
    if done.returncode != 0 or not tmp.is_file():
        tmp.unlink(missing_ok=True)
        why = "timed out" if done.timed_out else (done.stderr or done.stdout).strip()[-300:]
        raise MepgenError(f"cannot build {what} for {arch}: {why}")
    os.replace(tmp, out)
    return out
