"""Build the capture injector (a shared library) from its C++ source, once per toolkit and source version.

The library is cached under `$XDG_CACHE_HOME/mepgen/capture/cuda-<version>/` (default `~/.cache/...`), named by a
hash of the source, the toolkit folder and the compiler, so a new mepgen or another toolkit rebuilds and an
unchanged one reuses. It is built with the host C++ compiler (`$CXX`, else g++, else c++), not nvcc: it holds no
device code. It does not link libcuda (a build machine may have no driver); it finds the driver's functions at
run time in the process that loaded it. Failures name the missing piece: no compiler, no toolkit, no CUPTI, or the
compiler's own first error lines.
"""
from __future__ import annotations

import re
import hashlib
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .. import usercache
from ..errors import MepgenError
from ..exitcodes import NO_GPU
from .toolkit import Toolkit, find_toolkit

SOURCE = Path(__file__).resolve().parent / "injector" / "capture.cpp"
LIB_NAME = "libmepgen_capture.so"


@dataclass(frozen=True)
class Injector:
    path: Path            # the shared library to name in CUDA_INJECTION64_PATH
    toolkit: Toolkit
    built: bool           # False when the cache already had it


def cache_root() -> Path:
    return usercache.folder("capture")


def find_compiler() -> str:
    for cand in (os.environ.get("CXX"), "g++", "c++", "clang++"):
        if cand and shutil.which(cand):
            return shutil.which(cand)
    raise MepgenError("capture builds its injector with a host C++ compiler: set $CXX or install g++", exit_code=NO_GPU)


def compile_command(toolkit: Toolkit, compiler: str, output: Path) -> list[str]:
    includes = [f"-I{toolkit.include}"]
    if toolkit.cupti_include != toolkit.include:
        includes.append(f"-I{toolkit.cupti_include}")
    return [compiler, "-std=c++17", "-O2", "-fPIC", "-shared", "-fvisibility=hidden", *includes,
            *kernel_record_flag(toolkit), str(SOURCE),
            f"-L{toolkit.cupti_lib}", "-lcupti", "-ldl", "-lpthread", f"-Wl,-rpath,{toolkit.cupti_lib}",
            "-o", str(output)]


def kernel_record_flag(toolkit: Toolkit) -> list[str]:
    """The kernel activity record of this CUPTI (the newest `CUpti_ActivityKernelN` its header declares: the version
    its library returns), for the GPU time of each launch."""
    for folder in (toolkit.cupti_include, toolkit.include):
        header = Path(folder) / "cupti_activity.h"
        if header.is_file():
            found = [int(n) for n in re.findall(r"\}\s*CUpti_ActivityKernel(\d+)\s*;", header.read_text(errors="replace"))]
            if found:
                return [f"-DMG_KERNEL_RECORD=CUpti_ActivityKernel{max(found)}"]
    return []


def _key(toolkit: Toolkit, compiler: str) -> str:
    h = hashlib.sha256(SOURCE.read_bytes())
    h.update(f"\0{toolkit.root}\0{toolkit.version}\0{compiler}".encode())
    return h.hexdigest()[:16]


def build_injector(toolkit: Toolkit | None = None, *, force: bool = False, log=lambda msg: None) -> Injector:
    """The injector library for `toolkit` (default: the one found), built now or reused from the cache."""
    toolkit = toolkit or find_toolkit()
    compiler = find_compiler()
    folder = cache_root() / toolkit.cache_key / _key(toolkit, compiler)
    lib = folder / LIB_NAME
    if lib.is_file() and not force:
        return Injector(lib, toolkit, built=False)
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".build.", suffix=".so", dir=folder)
    os.close(fd)
    cmd = compile_command(toolkit, compiler, Path(tmp))
    log("building the capture injector: " + " ".join(cmd))
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        os.unlink(tmp)
        raise MepgenError(f"building the capture injector with {compiler} took over 300 s") from None
    if r.returncode != 0:
        os.unlink(tmp)
        first = next((ln for ln in r.stderr.splitlines() if "error" in ln), r.stderr.strip()[:300] or "no output")
        raise MepgenError(f"the capture injector does not compile against CUDA {toolkit.version} at "
                          f"{toolkit.root}: {first.strip()}")
    os.replace(tmp, lib)
    return Injector(lib, toolkit, built=True)
