"""mepgen's own small kernels (the L2 flush, the output comparisons) compiled once per arch and source into a cubin
the pycuda worker loads: cached by name, written through a temporary file so concurrent builds never see a torn one.

The cache is the user's (`usercache.folder("cubins")`), keyed by the source, the flags, the arch and the nvcc that
built it (its path, size and time): they are the same for every MEP, so one build serves every MEP and every run of
`optimize` on the machine instead of two nvcc runs per MEP's build folder. Where that folder cannot be written
(a read-only home) the MEP's build folder serves, as before."""
from __future__ import annotations

import hashlib
import os
import shutil
import time
from pathlib import Path

from .. import mepbuild, usercache
from ..errors import MepgenError
from . import process


def _nvcc_identity(nvcc: str) -> str:
    """The nvcc binary as a key: its resolved path, size and modification time (another toolkit: another cubin)."""
    found = shutil.which(nvcc) or nvcc
    try:
        st = Path(found).resolve().stat()
        return f"{Path(found).resolve()}|{st.st_size}|{st.st_mtime_ns}"
    except OSError:
        return found


def _folder(build_dir: Path) -> Path:
    """The user's cubin cache, else (not writable) the MEP's build folder."""
    shared = usercache.folder("cubins")
    try:
        shared.mkdir(parents=True, exist_ok=True)
    except OSError:             # a read-only home: the MEP's folder, as before the shared cache
        return Path(build_dir)
    return shared if os.access(shared, os.W_OK) else Path(build_dir)


def cached_cubin(text: str, stem: str, what: str, arch: str, build_dir: Path, flags: tuple[str, ...] = (),
                 timeout: float = 300.0) -> Path:
    """CACHE/STEM-ARCH-KEY.cubin of CUDA source `text` (built when missing; CACHE: _folder); MepgenError naming
    `what` when nvcc fails. Source and output are this process's own files until the cubin is renamed into place
    (several `optimize` processes may build the same cubin at once)."""
    nvcc = mepbuild.nvcc_executable()
    key = hashlib.sha256("\0".join([text, *flags, _nvcc_identity(nvcc)]).encode()).hexdigest()[:16]
    out = _folder(build_dir) / f"{stem}-{arch}-{key}.cubin"
    if out.is_file():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    own = f"{out.stem}.{os.getpid()}.{time.monotonic_ns()}"
    src, tmp = out.with_name(own + ".cu"), out.with_name(own + ".tmp")
    src.write_text(text)
    cmd = [nvcc, mepbuild.arch_flag(arch), *flags, "-cubin", str(src), "-o", str(tmp)]
    try:
        done = process.run(cmd, timeout=timeout)
    except FileNotFoundError:
        raise MepgenError(f"{cmd[0]} not found: install the CUDA toolkit or set $NVCC") from None
    finally:
        src.unlink(missing_ok=True)
    if done.returncode != 0 or not tmp.is_file():
        tmp.unlink(missing_ok=True)
        why = "timed out" if done.timed_out else (done.stderr or done.stdout).strip()[-300:]
        raise MepgenError(f"cannot build {what} for {arch}: {why}")
    os.replace(tmp, out)
    return out
