"""The harness's own names, kept from the application's macros.

harness.cu includes kernel.cu, which copies the application's macros; everything after that include is read
with them. An application that defines `#define block 16`, `#define check(x) ...` or `#define p 3` turns the
harness's `const dim3 block(...)`, its `check(...)` helper or a loop's `p` into something else, and nvcc says
"expected an identifier". So right after the include the harness `#undef`s every name it uses itself, except:

- the names mep.yaml's expressions use (a launch `(N + BLOCK - 1) / BLOCK`, a value, a ctype `real *`): there
  the application's macro is meant;
- names a macro of the toolkit or the C library stands for and the harness relies on (`cudaStreamNonBlocking`,
  `errno`, `assert`, `stdout`), reserved names (`_x`, `__x`), keywords, and names with no lowercase letter
  (`MEP_CHECK`, `INFINITY`: macros by convention, the harness's own among them).

`#undef` of a name that is not a macro does nothing, so the list needs no knowledge of kernel.cu.
"""
from __future__ import annotations

import re

INCLUDE_LINE = "#include MEP_KERNEL_FILE"
_KEYWORDS = set("""alignas alignof and and_eq asm auto bitand bitor bool break case catch char char8_t char16_t char32_t
class compl concept const consteval constexpr constinit const_cast continue co_await co_return co_yield decltype
default delete do double dynamic_cast else enum explicit export extern false float for friend goto if inline int
long mutable namespace new noexcept not not_eq nullptr operator or or_eq private protected public register
reinterpret_cast requires return short signed sizeof static static_assert static_cast struct switch template this
thread_local throw true try typedef typeid typename union unsigned using virtual void volatile wchar_t while xor
xor_eq defined include line pragma ifdef ifndef endif elif undef define error""".split())
_LIBRARY_MACROS = {"errno", "assert", "stdout", "stderr", "stdin", "offsetof", "va_start", "va_end", "va_arg",
                   "va_copy", "setjmp", "longjmp", "std"}
_LIBRARY_PREFIXES = ("cuda", "cu", "CU", "mepgen", "mep_", "MEP")
_COMMENTS_STRINGS = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)
_IDENT = re.compile(r"\b[A-Za-z_]\w*\b")


def _spec_names(spec) -> set[str]:
    """Every identifier mep.yaml's text holds (expressions, types, names), the application's macros among them."""
    return set(_IDENT.findall(repr(spec)))


def guard_names(harness: str, spec) -> str:
    """`harness` with `#undef` lines after its include of kernel.cu for the names it uses itself."""
    at = harness.find(INCLUDE_LINE)
    if at < 0:
        return harness
    end = harness.index("\n", at) + 1
    code = _COMMENTS_STRINGS.sub(" ", harness[end:])
    code = "\n".join(ln for ln in code.splitlines() if not ln.lstrip().startswith("#"))   # directives' own words
    keep = _spec_names(spec) | _KEYWORDS | _LIBRARY_MACROS
    names = sorted({n for n in _IDENT.findall(code) if n not in keep and not n.startswith("_")
                    and any(c.islower() for c in n) and not n.startswith(_LIBRARY_PREFIXES)})
    if not names:
        return harness
    guard = ["// the harness's own names: a macro of the application (copied into kernel.cu) must not replace them",
             *(f"#undef {n}" for n in names)]
    return harness[:end] + "\n".join(guard) + "\n" + harness[end:]
