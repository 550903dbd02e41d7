"""libclang set-up for CUDA: the arguments that let the PyPI wheel parse CUDA without clang's headers.

The wheel ships libclang.so but none of clang's resource headers (no `__clang_cuda_runtime_wrapper.h`,
no `stddef.h`), so parsing CUDA as clang normally would fails. mepgen parses in CUDA host mode with
clang's CUDA includes turned off (`-nocudainc -nocudalib`), puts its own shim first on the include path
(`shim/`: CUDA keywords, built-ins, vector types, the runtime API a launch site uses, and stand-ins for
`cuda_runtime.h` & co.), and takes the C compiler's own builtin headers (`cc -print-file-name=include`)
or, when there is none, mepgen's fallback copies of the few it needs. The real CUDA toolkit headers are
never read, so any CUDA version, or none, parses the same way.
"""
from __future__ import annotations

import functools
import shutil
import subprocess
from pathlib import Path

from ..errors import MepgenError

SHIM_DIR = Path(__file__).parent / "shim"
BUILTIN_FALLBACK_DIR = SHIM_DIR / "builtin"


@functools.lru_cache(maxsize=1)
def cindex():
    """The clang.cindex module, with a clear error when the libclang wheel is missing or broken."""
    try:
        import clang.cindex as ci
        ci.Index.create()
    except Exception as e:  # ImportError, or LibclangError when the shared library is missing
        raise MepgenError(f"libclang is not usable ({e}); install it with `pip install libclang`") from None
    return ci


@functools.lru_cache(maxsize=1)
def builtin_include_dir() -> Path:
    """The directory with stddef.h & co.: the system C compiler's, else mepgen's fallback."""
    for cc in ("cc", "gcc", "clang"):
        exe = shutil.which(cc)
        if not exe:
            continue
        try:
            out = subprocess.run([exe, "-print-file-name=include"], capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            continue
        d = Path(out.stdout.strip())
        if out.returncode == 0 and (d / "stddef.h").is_file():
            return d
    return BUILTIN_FALLBACK_DIR


def parse_args(tu_args: list[str], language: str = "cuda") -> list[str]:
    """Full libclang arguments for one translation unit."""
    lang = ["-x", "cuda", "--cuda-host-only", "-nocudainc", "-nocudalib", "--cuda-gpu-arch=sm_90"] \
        if language == "cuda" else ["-x", "c++"]
    return [*lang, "-isystem", str(SHIM_DIR), *tu_args, "-isystem", str(builtin_include_dir()),
            "-include", "mepgen_cuda_shim.h", "-Wno-unknown-cuda-version", "-Wno-unknown-attributes",
            "-ferror-limit=0", "-D__MEPGEN_PARSE__=1"]


def parse(path: Path, tu_args: list[str], unsaved: list[tuple[str, str]] | None = None):
    """Parse one file; returns the TranslationUnit (libclang keeps going past errors)."""
    ci = cindex()
    index = ci.Index.create()
    options = ci.TranslationUnit.PARSE_DETAILED_PROCESSING_RECORD  # macro definitions and expansions
    try:
        return index.parse(str(path), args=parse_args(tu_args), unsaved_files=unsaved, options=options)
    except ci.TranslationUnitLoadError as e:
        raise MepgenError(f"libclang could not load {path}: {e}") from None


def specialized_template(cursor):
    """The template a specialisation or instantiation comes from (None for a plain declaration)."""
    ci = cindex()
    return ci.conf.lib.clang_getSpecializedCursorTemplate(cursor)
