"""The MEP's build section: the application's nvcc flags that matter for the kernel, and the target arch.

Flags come from the kernel file's compile command (compile_commands.json, else the nvcc options of the
Makefile's or CMake's CUDA compile, extract/appbuild.py, via the inventory). What would
break or not matter in a one-file standalone build is dropped: output and dependency options, include
folders inside the application (kernel.cu copies what it uses from there; folders outside it are kept), host-compiler pass-through, and the arch flags (the arch is chosen
once, below, and stored in build.arch).
"""
from __future__ import annotations

import functools
import re
import shutil
import subprocess
from pathlib import Path

from ..errors import MepgenError
from ..spec import Build
from ..mepbuild import nvcc_executable

DEFAULT_ARCH = "sm_90"
DEFAULT_FLAGS = ["-O3", "-lineinfo"]
_WITH_VALUE = {"-o", "-MF", "-MT", "-MQ", "-I", "-isystem", "-include", "-Xcompiler", "-Xlinker", "-x", "-arch",
               "-gencode", "-code", "--gpu-architecture", "--gpu-code", "-ccbin", "--compiler-bindir", "-L", "-l",
               "-D", "-U", "-std"}
_DROP_PREFIX = ("-o", "-M", "-I", "-isystem", "-D", "-U", "-std", "-arch", "--gpu-architecture", "-gencode",
                "--generate-code", "-code", "--gpu-code", "-Xcompiler", "--compiler-options", "-ccbin",
                "--compiler-bindir", "-include", "-x", "-L", "-l", "-W")
_DROP = {"-c", "--compile", "-dc", "-rdc=true", "--relocatable-device-code=true", "-shared", "-fPIC", "-dlink",
         "--device-link", "-lib", "--lib", "-link", "--link", "-Werror", "-fopenmp", "-pthread", "-m64"}
#: options whose value is the next word and that change the kernel's code: kept with their value
_KEEP_WITH_VALUE = {"-Xptxas", "--ptxas-options", "-maxrregcount", "--maxrregcount", "-default-stream",
                    "--default-stream", "-diag-suppress", "--diag-suppress", "-Xcudafe", "-fmad", "--fmad", "-ftz",
                    "--ftz", "-prec-div", "--prec-div", "-prec-sqrt", "--prec-sqrt"}
#: options whose value is the next word and that do not matter to one kernel's build: dropped with their value
_DROP_WITH_VALUE = {"-t", "--threads", "-Xnvlink", "--nvlink-options", "-Xarchive", "--keep-dir", "-odir", "-rdc",
                    "--relocatable-device-code", "-MF", "-MT", "-MQ", "--compiler-options", "--linker-options",
                    "--generate-code", "--output-file", "--include-path", "--define-macro", "--undefine-macro",
                    "--pre-include", "--library", "--library-path", "--dependency-output", "-isystem", "-iquote",
                    "-cudart", "--cudart", "-cudadevrt", "--cudadevrt", "-Xlinker", "-L", "-l"}


@functools.lru_cache(maxsize=1)
def detected_arch() -> str | None:
    """sm_XY of the first GPU nvidia-smi reports (None without a GPU)."""
    exe = shutil.which("nvidia-smi")
    if not exe:
        return None
    try:
        out = subprocess.run([exe, "--query-gpu=compute_cap", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.match(r"\s*(\d+)\.(\d+)", out.stdout)
    return f"sm_{m.group(1)}{m.group(2)}" if out.returncode == 0 and m else None


@functools.lru_cache(maxsize=1)
def supported_archs() -> frozenset[int] | None:
    """The compute capabilities (75, 80, 90...) the nvcc here compiles for (`nvcc --list-gpu-arch`); None when
    it cannot say."""
    try:
        out = subprocess.run([nvcc_executable(), "--list-gpu-arch"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = {int(m) for m in re.findall(r"compute_(\d+)", out.stdout)}
    return frozenset(found) if out.returncode == 0 and found else None


def arch_from_flags(args: list[str]) -> str | None:
    """sm_XY named by -arch / --gpu-architecture / -gencode ...code=sm_XY, the newest the nvcc here supports
    (an application built for sm_20 by a toolkit of its time: nvcc 13 stops at sm_75; None then)."""
    text = " ".join(args)
    named = re.findall(r"code=\[?(?:sm|compute)_(\d+)(\w?)", text) + \
        re.findall(r"(?:-arch|--gpu-architecture)[= ](?:sm|compute)_(\d+)(\w?)", text)
    known = supported_archs()
    usable = [(int(n), s) for n, s in named if known is None or int(n) in known]
    if not usable:
        return None
    n, suffix = max(usable)
    return f"sm_{n}{suffix}"


def kept_flags(args: list[str]) -> list[str]:
    """The nvcc options of a compile command that belong in a standalone kernel build."""
    out, skip, keep_next = [], False, False
    for a in args:
        if keep_next:
            keep_next = False
            out.append(a)
            continue
        if skip:
            skip = False
            continue
        if a in _KEEP_WITH_VALUE:
            keep_next = True
            out.append(a)
            continue
        if a in _WITH_VALUE or a in _DROP_WITH_VALUE:
            skip = True
            continue
        if a in _DROP or a.startswith(_DROP_PREFIX) and a not in ("-lineinfo", "--lineinfo") or not a.startswith("-"):
            continue        # (-lineinfo is no -l library)
        if a not in out or a.startswith(("-Xptxas", "--ptxas-options")):
            out.append(a)
    return out


def outside_include_flags(inventory: dict, tu: dict) -> list[str]:
    """-I for the include folders outside the application (a sibling `../common` its build names): kernel.cu
    includes the headers it uses from there, and they may include each other through these folders."""
    root = Path(inventory.get("app_root", "/")).resolve()
    return [f"-I{d}" for d in tu.get("include_dirs", []) if not Path(d).resolve().is_relative_to(root)]


def build_config(inventory: dict, kernel: dict, size_names: set[str], detect_gpu: bool = True) -> Build:
    tu = next((t for t in inventory["translation_units"] if t["file"] == kernel["file"]), {})
    nvcc_args = tu.get("nvcc_args", [])
    flags = kept_flags(nvcc_args) or list(DEFAULT_FLAGS)
    flags += outside_include_flags(inventory, tu)
    defines = [d for d in tu.get("defines", []) if d.partition("=")[0] not in size_names]
    arch = (detected_arch() if detect_gpu else None) or arch_from_flags(nvcc_args) or DEFAULT_ARCH
    return Build(arch=arch, std=tu.get("std", "c++17"), defines=defines, nvcc_flags=flags)


def configured_arch(cfg: dict) -> str | None:
    """`mep.arch` of the configuration (e.g. sm_90a, for MEPs cut on a machine without the target GPU);
    it wins over the detected GPU and the compile command. A value nvcc would not take is an error here,
    not a compile failure later."""
    arch = cfg["mep"].get("arch")
    if arch is not None and not re.fullmatch(r"sm_\d+[a-z]?", arch):
        raise MepgenError(f"mep.arch '{arch}' is not an nvcc real architecture such as sm_90 or sm_90a")
    return arch


def arch_source(inventory: dict, kernel: dict, arch: str, detect_gpu: bool = True,
                configured: str | None = None) -> str:
    """Where build.arch came from, for the comment in mep.yaml."""
    if configured and configured == arch:
        return "configured (mep.arch)"
    tu = next((t for t in inventory["translation_units"] if t["file"] == kernel["file"]), {})
    if detect_gpu and detected_arch() == arch:
        return "detected with nvidia-smi"
    if arch_from_flags(tu.get("nvcc_args", [])) == arch:
        return "from the application's compile command"
    if re.search(r"(?:sm|compute)_\d+", " ".join(tu.get("nvcc_args", []))):
        return (f"default ({DEFAULT_ARCH}: no GPU found, and the architectures the application's compile command "
                "names are older than this nvcc supports)")
    return f"default ({DEFAULT_ARCH}: no GPU found and no arch in the compile command)"
