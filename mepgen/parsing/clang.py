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

import ctypes
import functools
import os
import re
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
        import clang.cindex as ci      # libclang: heavy, and its error is reported here in one line
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


#: what nvcc accepts with a warning and clang rejects by default: narrowing in a brace initializer
#: (`int a[] = {1.5}`), `register` under C++17, an enum constant out of its range in a constant expression
NVCC_LENIENCY = ("-Wno-c++11-narrowing", "-Wno-register", "-Wno-error=register", "-Wno-enum-constexpr-conversion")


@functools.lru_cache(maxsize=1)
def cccl_include_dir() -> Path | None:
    """The CUDA toolkit's C++ core libraries (Thrust, CUB, libcu++: `<toolkit>/include/cccl` since CUDA 13),
    which nvcc puts on the include path by itself; None without a toolkit."""
    roots = [os.environ.get(v) for v in ("CUDA_HOME", "CUDA_PATH")]
    nvcc = shutil.which("nvcc")
    if nvcc:
        roots.append(str(Path(nvcc).resolve().parent.parent))
    roots.append("/usr/local/cuda")
    for r in roots:
        if r and (Path(r) / "include" / "cccl" / "thrust").is_dir():
            return Path(r) / "include" / "cccl"
    return None


#: what old C compilers accepted and clang 16+ rejects by default (K&R code: `main() {...}`, a call before any
#: declaration): kept as warnings for the plain C sources read for value tracing
C_LENIENCY = ("-Wno-implicit-int", "-Wno-implicit-function-declaration", "-Wno-int-conversion",
              "-Wno-incompatible-pointer-types", "-Wno-return-type", "-Wno-deprecated-non-prototype")


def parse_args(tu_args: list[str], language: str = "cuda", cccl: bool = True) -> list[str]:
    """Full libclang arguments for one translation unit (`cuda`, `c++`, or `c`: plain C, without the CUDA shim,
    which is C++). mepgen's shim stands in for the CUDA runtime headers; the toolkit's Thrust/CUB/libcu++ come
    after the application's own folders, as nvcc orders them."""
    if language == "c":
        return ["-x", "c", *tu_args, "-isystem", str(builtin_include_dir()), *C_LENIENCY, "-ferror-limit=0",
                "-D__MEPGEN_PARSE__=1"]
    lang = ["-x", "cuda", "--cuda-host-only", "-nocudainc", "-nocudalib", "--cuda-gpu-arch=sm_90"] \
        if language == "cuda" else ["-x", "c++"]
    lib = cccl_include_dir() if cccl else None
    return [*lang, "-isystem", str(SHIM_DIR), *tu_args, *(["-isystem", str(lib)] if lib else []),
            "-isystem", str(builtin_include_dir()),
            "-include", "mepgen_cuda_shim.h", "-Wno-unknown-cuda-version", "-Wno-unknown-attributes",
            *NVCC_LENIENCY, "-ferror-limit=0", "-D__MEPGEN_PARSE__=1"]


_KEEP_GOING = 0x200         # CXTranslationUnit_KeepGoing (clang-c/Index.h); cindex has no name for it


_SPACED_CHEVRONS = re.compile(rb"<<([ \t]+)<([^;{}]*?)>>([ \t]+)>")


def joined_chevrons(path: Path) -> str | None:
    """The file's text with launches spelled `k << < g, b >> > (...)` joined into `<<<`/`>>>` (the spaces moved
    after them, so every byte offset stays), or None when it has none. nvcc's front end reads the spaced form
    as a launch; clang lexes `<<` `<` and loses the launch."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    if b"<< " not in data and b"<<\t" not in data:
        return None
    joined = _SPACED_CHEVRONS.sub(lambda m: b"<<<" + m.group(1) + m.group(2) + b">>>" + m.group(3), data)
    if joined == data:
        return None
    try:
        return joined.decode("utf-8")
    except UnicodeDecodeError:
        return None


def parse(path: Path, tu_args: list[str], unsaved: list[tuple[str, str]] | None = None, language: str = "cuda"):
    """Parse one file as `language` (parse_args); returns the TranslationUnit (libclang keeps going past
    errors)."""
    ci = cindex()
    index = ci.Index.create()
    # macro definitions and expansions; and keep going after a fatal error (a header the parse cannot find,
    # `<thrust/scan.h>`): clang otherwise stops instantiating templates for the rest of the file, so every
    # `cudaMalloc(&p, n)` (a template overload) and templated call after the include became an invalid expression
    options = ci.TranslationUnit.PARSE_DETAILED_PROCESSING_RECORD | _KEEP_GOING
    if unsaved is None:
        joined = joined_chevrons(Path(path))
        unsaved = [(str(path), joined)] if joined is not None else None
    try:
        tu = index.parse(str(path), args=parse_args(tu_args, language), unsaved_files=unsaved, options=options)
        lib = cccl_include_dir() if language != "c" else None
        if lib is not None and any(d.severity >= 3 and d.location.file is not None and
                                   d.location.file.name.startswith(str(lib)) for d in tu.diagnostics):
            # mepgen's stand-in for the CUDA runtime lacks what these Thrust/CUB headers use (half-precision
            # intrinsics, say): parse as without a toolkit, where headers on no path are stubbed empty
            tu = index.parse(str(path), args=parse_args(tu_args, language, cccl=False), unsaved_files=unsaved,
                             options=options)
        return tu
    except ci.TranslationUnitLoadError as e:
        raise MepgenError(f"libclang could not load {path}: {e}") from None


def evaluate_int(cursor) -> int | None:
    """The integer value clang gives a constant expression cursor (`sizeof(fr_t)` of the application's own
    type), or None (not constant, dependent on a template parameter, not an integer)."""
    lib = cindex().conf.lib
    if not getattr(lib, "_mepgen_eval_typed", False):
        lib.clang_Cursor_Evaluate.restype = ctypes.c_void_p
        lib.clang_Cursor_Evaluate.argtypes = [cindex().Cursor]
        lib.clang_EvalResult_getKind.argtypes = [ctypes.c_void_p]
        lib.clang_EvalResult_getKind.restype = ctypes.c_int
        lib.clang_EvalResult_getAsLongLong.argtypes = [ctypes.c_void_p]
        lib.clang_EvalResult_getAsLongLong.restype = ctypes.c_longlong
        lib.clang_EvalResult_dispose.argtypes = [ctypes.c_void_p]
        lib._mepgen_eval_typed = True
    result = lib.clang_Cursor_Evaluate(cursor)
    if not result:
        return None
    try:
        return lib.clang_EvalResult_getAsLongLong(result) if lib.clang_EvalResult_getKind(result) == 1 else None
    finally:
        lib.clang_EvalResult_dispose(result)


def specialized_template(cursor):
    """The template a specialisation or instantiation comes from (None for a plain declaration)."""
    ci = cindex()
    return ci.conf.lib.clang_getSpecializedCursorTemplate(cursor)


@functools.lru_cache(maxsize=1)
def _operator_api():
    """libclang's (17+) operator-kind entry points, or None on an older library."""
    ci = cindex()
    try:
        lib = ci.conf.lib
        fns = []
        for kind, spell in (("clang_getCursorBinaryOperatorKind", "clang_getBinaryOperatorKindSpelling"),
                            ("clang_getCursorUnaryOperatorKind", "clang_getUnaryOperatorKindSpelling")):
            f, g = getattr(lib, kind), getattr(lib, spell)
            f.argtypes, f.restype = [ci.Cursor], ctypes.c_int
            g.argtypes, g.restype = [ctypes.c_int], ci._CXString
            fns.append((f, g))
        return fns
    except AttributeError:
        return None


_UNARY_SPELLING = {"PostInc": "++", "PostDec": "--", "PreInc": "++", "PreDec": "--", "AddrOf": "&", "Deref": "*",
                   "Plus": "+", "Minus": "-", "Not": "~", "LNot": "!"}


def operator_spelling(cursor) -> str | None:
    """The operator of a BINARY_OPERATOR / COMPOUND_ASSIGNMENT_OPERATOR / UNARY_OPERATOR cursor ('+', '+=',
    '++', '&'), asked of libclang directly: reading it from the cursor's tokens tokenizes the whole
    expression, once per operator, which is quadratic in a long expression's length. None when this
    libclang cannot say (then a caller reads tokens)."""
    api = _operator_api()
    if api is None:
        return None
    ci = cindex()
    if cursor.kind.name in ("BINARY_OPERATOR", "COMPOUND_ASSIGNMENT_OPERATOR"):
        f, g = api[0]
        k = f(cursor)
        return ci._CXString.from_result(g(k)) or None if k > 0 else None
    if cursor.kind.name == "UNARY_OPERATOR":
        f, g = api[1]
        k = f(cursor)
        name = ci._CXString.from_result(g(k)) if k > 0 else ""
        return _UNARY_SPELLING.get(name, name) or None
    return None


def tokens(cursor) -> list:
    """The cursor's tokens. libclang gives none for an extent that starts at a macro's use (`__global__ void k(...)`
    where the parse's shim defines `__global__`): those are read from the file over the same offsets."""
    found = list(cursor.get_tokens())
    s, e = cursor.extent.start, cursor.extent.end
    if found or s.file is None or e.file is None or s.file.name != e.file.name or e.offset <= s.offset:
        return found
    ci, tu = cindex(), cursor.translation_unit
    span = ci.SourceRange.from_locations(ci.SourceLocation.from_offset(tu, s.file, s.offset),
                                         ci.SourceLocation.from_offset(tu, e.file, e.offset))
    return list(tu.get_tokens(extent=span))


def walk(cursor):
    """The cursor and all its descendants, in source (pre-)order, without recursion: an expression of a few
    thousand terms nests as deep, past Python's recursion limit."""
    stack = [cursor]
    while stack:
        c = stack.pop()
        yield c
        stack.extend(reversed(list(c.get_children())))
