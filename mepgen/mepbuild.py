"""The one nvcc command that builds an MEP's harness with a kernel file (docs/mep-format.md, "Build").

Shared by `mepgen mep` (the rendered Makefile spells the same flags) and the evaluator (one build per
variant), so a kernel compiles the same way by hand, in the baseline and in every candidate.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

from .spec import Spec

HARNESS_FILE = "harness.cu"
#: the headers a kernel.cu finds included before it, on both backends (the native harness, the pycuda entry): a
#: kernel file that leans on its includer's headers (`uint32_t` without <cstdint>) builds the same on both
PRELUDE_HEADERS = ("algorithm", "chrono", "cstdint", "cstdio", "cstdlib", "cstring", "string", "type_traits", "vector",
                   "sys/stat.h", "cuda_runtime.h")


def nvcc_executable() -> str:
    """`$NVCC` when set (a person picks a toolkit the way the Makefile's `NVCC ?= nvcc` lets them), else nvcc."""
    return os.environ.get("NVCC") or "nvcc"


def arch_flag(arch: str) -> str:
    """`sm_90` -> `-arch=sm_90`; `native`, `all` and `compute_90` pass through the same way."""
    return f"-arch={arch}"


#: size symbols reach the build under this reserved prefix (`sizes: {N: 2048}` is -DMEPGEN_SIZE_N=2048), so a
#: size can never collide with a name of the application, CUDA's headers or the harness (`N`, `T`, `I`):
#: the harness's expressions spell sizes with it (:func:`in_build`), and kernel.cu maps an application macro of
#: the same name onto it (`#define N MEPGEN_SIZE_N`, mep/kernelsrc.py)
SIZE_PREFIX = "MEPGEN_SIZE_"


def size_macro(name: str) -> str:
    return SIZE_PREFIX + name


def in_build(expr, sizes) -> str:
    """`expr` with each size symbol spelled as the build defines it: `(N + 255) / 256` ->
    `(MEPGEN_SIZE_N + 255) / 256`; members (`g.N`), qualified names (`ns::N`) and literals stay."""
    text = str(expr)
    if not sizes:
        return text
    names = "|".join(map(re.escape, sorted(sizes, key=len, reverse=True)))
    return re.sub(r"(?<![\w.$])(?<!->)(?<!::)\b(" + names + r")\b(?!\s*::)",
                  lambda m: size_macro(m.group(1)), text)


def build_flags(spec: Spec) -> list[str]:
    """Everything but the kernel file, the include folder, the input and the output, in protocol order:
    -std, -arch, the spec's nvcc flags, its defines, then every size symbol as -DMEPGEN_SIZE_<SYM>=<value>.
    A define named like a size takes the size's value (`-DN=MEPGEN_SIZE_N`)."""
    flags = [f"-std={spec.build.std}", arch_flag(spec.build.arch), *spec.build.nvcc_flags]
    for d in spec.build.defines:
        name = (d[2:] if d.startswith("-D") else d).partition("=")[0]
        flags.append(f"-D{name}={size_macro(name)}" if name in spec.sizes else d if d.startswith("-D") else f"-D{d}")
    flags += [f"-D{size_macro(name)}={value}" for name, value in spec.sizes.items()]
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
