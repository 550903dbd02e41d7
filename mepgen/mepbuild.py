"""The one nvcc command that builds an MEP's harness with a kernel file (docs/mep-format.md, "Build").

Shared by `mepgen mep` (the rendered Makefile spells the same flags) and the evaluator (one build per
variant), so a kernel compiles the same way by hand, in the baseline and in every candidate.
"""
from __future__ import annotations

import os
from pathlib import Path

from .spec import Spec

HARNESS_FILE = "harness.cu"


def nvcc_executable() -> str:
    """`$NVCC` when set (a person picks a toolkit the way the Makefile's `NVCC ?= nvcc` lets them), else nvcc."""
    return os.environ.get("NVCC") or "nvcc"


def arch_flag(arch: str) -> str:
    """`sm_90` -> `-arch=sm_90`; `native`, `all` and `compute_90` pass through the same way."""
    return f"-arch={arch}"


def build_flags(spec: Spec) -> list[str]:
    """Everything but the kernel file, the include folder, the input and the output, in protocol order:
    -std, -arch, the spec's nvcc flags, its defines, then every size symbol as -D<SYM>=<value>."""
    flags = [f"-std={spec.build.std}", arch_flag(spec.build.arch), *spec.build.nvcc_flags]
    flags += [d if d.startswith("-D") else f"-D{d}" for d in spec.build.defines]
    flags += [f"-D{name}={value}" for name, value in spec.sizes.items()]
    return flags


def nvcc_command(spec: Spec, mep_dir: Path, kernel_file: Path, output: Path,
                 harness: Path | None = None) -> list[str]:
    """The argument vector (no shell) that compiles `mep_dir/harness.cu` (or `harness`, a harness rendered
    for a candidate's own launch configuration) with `kernel_file` into `output`."""
    mep_dir = Path(mep_dir).resolve()
    kernel = Path(kernel_file)
    kernel = (kernel if kernel.is_absolute() else Path.cwd() / kernel).resolve()
    return [nvcc_executable(), *build_flags(spec), f'-DMEP_KERNEL_FILE="{kernel}"', f"-I{mep_dir}",
            str(Path(harness).resolve() if harness else mep_dir / HARNESS_FILE), "-o", str(Path(output))]
