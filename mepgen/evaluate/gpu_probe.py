"""Whether the GPU can be used under a confinement level: on some virtual machines the driver refuses a CUDA
context inside a user namespace (`cuInit` fails with "operation not supported"). A level that runs `true` but
not CUDA would fail every candidate, the original included, so `sandbox.strongest` asks this before it takes
such a level. Needs only the driver's library (libcuda), not the toolkit; where there is no driver or no usable
GPU at all, there is nothing to compare and no level is refused for it."""
from __future__ import annotations

import ctypes
import subprocess
import sys
from functools import lru_cache

#: exits 0 when the driver makes a context (cuInit, then a context on device 0), else with the driver's error code
CUINIT = ("import ctypes, sys; c = ctypes.CDLL('libcuda.so.1'); d = ctypes.c_int(); x = ctypes.c_void_p(); "
          "sys.exit(c.cuInit(0) or c.cuDeviceGet(ctypes.byref(d), 0) or c.cuCtxCreate_v2(ctypes.byref(x), 0, d))")


def driver_present() -> bool:
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    return True


def cuda_works(prefix: list[str], pass_fds=()) -> bool:
    """True when `cuInit` succeeds in a Python started behind `prefix` (a confinement's command prefix)."""
    try:
        return subprocess.run([*prefix, sys.executable, "-c", CUINIT], stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60,
                              pass_fds=tuple(pass_fds)).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


@lru_cache(maxsize=None)
def usable_here() -> bool:
    """The driver is there and makes a context without any confinement (the reference for every level)."""
    return driver_present() and cuda_works([])


def refuses(prefix: list[str], pass_fds=()) -> bool:
    """True when the GPU works here but not behind `prefix`: that level must not be chosen."""
    return usable_here() and not cuda_works(prefix, pass_fds)
