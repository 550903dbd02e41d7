"""Where the CUDA toolkit is, and whether it has what the capture injector is built from.

The injector compiles against the toolkit's `cuda.h` and `cupti.h` and links its `libcupti`; it must match the
toolkit whose driver the application runs on, so the toolkit is found the way a user's build finds it: `$CUDA_HOME`
or `$CUDA_PATH` when set, else the folder above the `nvcc` on PATH (following wrapper scripts that `exec` the real
nvcc), else `/usr/local/cuda`.
"""
from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from ..errors import MepgenError
from ..exitcodes import NO_GPU


@dataclass(frozen=True)
class Toolkit:
    root: Path
    version: str          # "13.0", from cuda.h's CUDA_VERSION
    include: Path         # holds cuda.h
    cupti_include: Path   # holds cupti.h (the same folder in current toolkits, extras/CUPTI in old ones)
    cupti_lib: Path       # the folder with libcupti.so

    @property
    def cache_key(self) -> str:
        return f"cuda-{self.version}"


def _nvcc_root(nvcc: str) -> Path | None:
    """The toolkit folder of an nvcc; a small shell wrapper (`exec /usr/local/cuda-13.0/bin/nvcc "$@"`) is followed."""
    path = Path(nvcc).resolve()
    try:
        if path.stat().st_size < 4096:
            text = path.read_text(errors="replace")
            m = re.search(r"exec\s+(\S+/bin/nvcc)\b", text)
            if m:
                path = Path(m.group(1)).resolve()
    except OSError:
        return None
    return path.parent.parent if path.parent.name == "bin" else None


def candidate_roots() -> list[tuple[Path, str]]:
    """Toolkit folders to try, each with where it came from (for error messages). An explicit `$CUDA_HOME` or
    `$CUDA_PATH` is the only candidate: a user who names a toolkit must get that one or an error, never another."""
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            return [(Path(os.environ[var]), f"${var}")]
    out: list[tuple[Path, str]] = []
    nvcc = shutil.which(os.environ.get("NVCC") or "nvcc")
    if nvcc:
        root = _nvcc_root(nvcc)
        if root is not None:
            out.append((root, f"nvcc at {nvcc}"))
    out.append((Path("/usr/local/cuda"), "the default /usr/local/cuda"))
    return out


def _version(include: Path) -> str:
    m = re.search(r"#define\s+CUDA_VERSION\s+(\d+)", (include / "cuda.h").read_text(errors="replace"))
    if not m:
        raise MepgenError(f"{include / 'cuda.h'} defines no CUDA_VERSION: not a CUDA toolkit header")
    v = int(m.group(1))
    return f"{v // 1000}.{(v % 1000) // 10}"


def _cupti_dirs(root: Path) -> list[Path]:
    return [root / "lib64", root / "lib", root / "targets" / "x86_64-linux" / "lib",
            root / "targets" / "sbsa-linux" / "lib", root / "extras" / "CUPTI" / "lib64"]


def _cupti_includes(root: Path) -> list[Path]:
    return [root / "include", root / "targets" / "x86_64-linux" / "include",
            root / "targets" / "sbsa-linux" / "include", root / "extras" / "CUPTI" / "include"]


def find_toolkit() -> Toolkit:
    """The CUDA toolkit to build the injector with, or a MepgenError naming what is missing and where it looked."""
    roots = candidate_roots()
    problems = []
    for root, origin in roots:
        if not root.is_dir():
            if origin.startswith("$"):
                problems.append(f"{origin}={root} is not a folder")
            continue
        inc = next((d for d in _cupti_includes(root) if (d / "cuda.h").is_file()), None)
        if inc is None:
            problems.append(f"no cuda.h under {root} ({origin})")
            continue
        cupti_inc = next((d for d in _cupti_includes(root) if (d / "cupti.h").is_file()), None)
        if cupti_inc is None:
            problems.append(f"no cupti.h under {root} ({origin}): install the toolkit's CUPTI component")
            continue
        lib = next((d for d in _cupti_dirs(root) if (d / "libcupti.so").exists()), None)
        if lib is None:
            problems.append(f"no libcupti.so under {root} ({origin}): install the toolkit's CUPTI component")
            continue
        return Toolkit(root=root.resolve(), version=_version(inc), include=inc.resolve(),
                       cupti_include=cupti_inc.resolve(), cupti_lib=lib.resolve())
    where = "; ".join(problems) if problems else "no nvcc on PATH, no $CUDA_HOME or $CUDA_PATH, no /usr/local/cuda"
    raise MepgenError(f"capture needs the CUDA toolkit with CUPTI to build its injector: {where}", exit_code=NO_GPU)
