"""Source rules for variants: constructs a variant of kernel.cu may not add, because they cheat the timer.

The harness `#include`s kernel.cu, so a variant's host code and macros land in the harness itself: a
`#define cudaEventElapsedTime ...` fakes the clock, a stream created at static-initialization time runs
the work where the timer does not look, a file read finds the reference outputs, and a new mutable
`__device__` global can carry results from one launch to the next. A construct is allowed when the
original kernel.cu already has it (the MEP needed it); only additions are rejected, with the line.

Spellings are the first net; the second sees semantics (host_decls.py, through libclang): host code is an
addition to the original, so a host function, a host object built at load time, a prototype of an external
function, device-side state or a reference to the CUDA host API that the original does not have is refused
whatever it is called, and `#include` is limited to the original's plus the CUDA toolkit's and the C++
standard library's headers (no path: not a file of the MEP, not a file of the user).
"""
from __future__ import annotations

import functools
import re
from pathlib import Path

from .. import mepbuild
from . import host_decls
from .confined import toolkit_root
from .results import RuleViolation

_IDENT_PREFIXES = r"(?:cuda|CUDA|cu[A-Z]|MEP|mep|__cuda|main\b|std\b)"
RULES: list[tuple[str, re.Pattern]] = [
    ("redefines a CUDA, harness or library name with the preprocessor",
     re.compile(rf"^[ \t]*#[ \t]*(?:define|undef)[ \t]+{_IDENT_PREFIXES}\w*", re.M)),
    ("calls the CUDA host API (streams, events, copies, launches belong to the harness)",
     re.compile(r"\bcuda[A-Z]\w*\s*\(|\bcu(?:Launch|Stream|Event|Memcpy|Memset|Mem|Ctx|Module|Graph|Func|Init|Device)"
                r"\w*\s*\(")),
    ("launches a kernel from host code", re.compile(r"<<<")),
    ("reads or writes files, the environment or other processes",
     re.compile(r"\b(?:fopen|freopen|fread|fwrite|ifstream|ofstream|fstream|popen|system|getenv|mmap|"
                r"open|dlopen|opendir|execv\w*|fork)\s*[(<]|#\s*include\s*<(?:fstream|unistd\.h|fcntl\.h|"
                r"sys/\w+\.h|dlfcn\.h|dirent\.h|filesystem)>")),
    ("starts host threads or runs code at load time",
     re.compile(r"\bstd::(?:thread|async|jthread)\b|\bpthread_\w+\s*\(|__attribute__\s*\(\(\s*constructor|"
                r"#\s*include\s*<(?:thread|future|pthread\.h)>")),
    ("tests which compiler reads the file (code the rules' parser and nvcc would see differently)",
     re.compile(r"\b(?:__clang\w*|__MEPGEN\w*|__GNUC\w*|__GNUG__|__llvm__|__NVCC__|__CUDACC__|__INTEL_\w+|_MSC_VER|"
                r"__has_include\w*|__has_builtin|__has_feature|__has_attribute)\b")),
    ("adds mutable device-global state (it can carry results from one launch to the next)",
     re.compile(r"\b__managed__\b|\b__device__\b(?![^;{(=]*\bconst(?:expr)?\b)(?=[^;{(=]*[;={\[])[^;{(=]*[;={\[]")),
]


def strip_comments(text: str) -> str:
    """Blank out comments and string/char literals, keeping newlines (so line numbers still hold)."""
    pattern = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)

    def blank(m: re.Match) -> str:
        s = m.group(0)
        if s.startswith('"') or s.startswith("'"):
            return s[0] + " " * (len(s) - 2) + s[-1]
        return re.sub(r"[^\n]", " ", s)
    return pattern.sub(blank, text)


def _matches(text: str, rx: re.Pattern, shown: str) -> list[tuple[int, str]]:
    """(line, line text from `shown`) of each match of `rx` in `text` (`shown` with comments blanked)."""
    lines = shown.splitlines()
    out = []
    for m in rx.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        out.append((line, lines[line - 1].strip() if line <= len(lines) else m.group(0)))
    return out


def _definition(text: str, short: str) -> tuple[int, str] | None:
    """(line, text) of the first `__global__ ... short(...) {...}` definition in comment-free `text`."""
    m = re.search(rf"__global__[^;{{}}]*\b{re.escape(short)}\s*\(", text)
    if m is None:
        return None
    depth, i = 0, text.find("{", m.end())
    if i < 0:
        return None
    for j in range(i, len(text)):
        depth += {"{": 1, "}": -1}.get(text[j], 0)
        if depth == 0:
            return text.count("\n", 0, m.start()) + 1, " ".join(text[m.start():j + 1].split())
    return None


def check(variant: str, original: str, chain: list[str] = (), target: str = "", args=()) -> list[RuleViolation]:
    """Violations in `variant` that `original` does not already contain (compared by line text, then by
    declaration). `chain`: qualified names of the kernels the MEP runs before its target (`target`): they
    must stay as they are, since they run untimed and compute the target's inputs. `args`: the -I/-D/-std
    flags the kernel file is compiled with (libclang reads it with them)."""
    if "\0" in variant:
        return [RuleViolation("is not a text file (it holds NUL bytes: a binary named .cu?)", 1, "")]
    var, orig = strip_comments(variant), strip_comments(original)
    violations = []
    target_short = target.split("::")[-1]
    for name in chain:
        short = name.split("::")[-1]
        before = _definition(orig, short) if short != target_short else None
        if before is None:
            continue
        after = _definition(var, short)
        if after is None or after[1] != before[1]:
            violations.append(RuleViolation(
                f"changes {name}, a kernel of the MEP's chain (it runs untimed before the target and computes its "
                "inputs; only the target may change)", after[0] if after else before[0],
                (after or before)[1][:200]))
    for rule, rx in RULES:
        allowed = {" ".join(t.split()) for _, t in _matches(orig, rx, original)}
        seen = set()
        for line, text in _matches(var, rx, variant):
            if " ".join(text.split()) not in allowed and line not in seen:
                seen.add(line)
                violations.append(RuleViolation(rule, line, text[:200]))
    violations += include_violations(var, orig, variant)
    flagged = {v.line for v in violations}
    violations += [v for v in semantic_violations(variant, original, args) if v.line not in flagged]
    return violations


def parse_args(spec, mep_dir: Path) -> tuple[str, ...]:
    """The flags of the MEP's nvcc command that change how libclang reads kernel.cu: -I, -isystem, -D, -U, -std."""
    flags = mepbuild.build_flags(spec) + [f"-I{Path(mep_dir).resolve()}"]
    out, take = [], False
    for f in flags:
        if take:
            out.append(f)
            take = False
        elif f in ("-I", "-isystem", "-D", "-U"):
            out.append(f)
            take = True
        elif f.startswith(("-I", "-isystem", "-D", "-U", "-std=")):
            out.append(f)
    return tuple(out)


_INCLUDE = re.compile(r"^[ \t]*#[ \t]*include[ \t]*(.*?)[ \t]*$", re.M)
_STD_HEADER = re.compile(r"^<[a-z_]+>$")          # <cstdint>, <type_traits>: the C++ standard library's names


@functools.lru_cache(maxsize=None)
def toolkit_include_dirs() -> tuple[Path, ...]:
    root = toolkit_root(mepbuild.nvcc_executable())
    if root is None:
        return ()
    return tuple(d for d in [root / "include", *sorted(root.glob("targets/*/include"))] if d.is_dir())


def _toolkit_header(name: str) -> bool:
    inner = name[1:-1]
    if ".." in inner.split("/") or inner.startswith("/"):
        return False
    return any((d / inner).is_file() for d in toolkit_include_dirs())


def include_violations(var: str, orig: str, shown: str) -> list[RuleViolation]:
    """`#include` lines the original does not have, unless they name a CUDA toolkit or C++ standard header
    with angle brackets (a quoted or computed include can reach any file: the MEP's data, the user's)."""
    have = {" ".join(m.group(1).split()) for m in _INCLUDE.finditer(orig)}
    out = []
    lines = shown.splitlines()
    for m in _INCLUDE.finditer(var):
        name = " ".join(m.group(1).split())
        if name in have:
            continue
        if name.startswith("<") and name.endswith(">") and (_STD_HEADER.match(name) or _toolkit_header(name)):
            continue
        line = var.count("\n", 0, m.start()) + 1
        out.append(RuleViolation("includes a file the original does not (allowed: the original's includes, the CUDA "
                                 "toolkit's and the C++ standard library's headers, in angle brackets)", line,
                                 lines[line - 1].strip()[:200] if line <= len(lines) else name))
    return out


_WHY = {
    "host function": "adds or changes host code (it runs in the harness: host code is the original's only)",
    "host-device function": "adds or changes a __host__ __device__ function (its host half is host code the "
                            "original does not have)",
    "function declaration": "declares an external function (a hand-written prototype makes any library or system "
                            "call reachable)",
    "host variable": "adds a host object built at load time (its initializer or constructor runs in the harness "
                     "before main)",
    "device variable": "adds device-side state (__device__, __constant__, __managed__, __shared__ at namespace "
                       "scope: it outlives a launch and can carry results from one launch to the next)",
    "other": "adds a declaration the rules cannot classify (file-scope asm or the like)",
}


def semantic_violations(variant: str, original: str, args=()) -> list[RuleViolation]:
    """Host-side declarations and CUDA host API references of `variant` that `original` does not have."""
    v, o = host_decls.facts(variant, tuple(args)), host_decls.facts(original, tuple(args))
    if not v.parsed:
        return [RuleViolation("could not be analysed (libclang could not parse it): refused", 1, "")]
    have = {(d.what, d.name, d.body) for d in o.decls}
    out = []
    for d in v.decls:
        if (d.what, d.name, d.body) not in have:
            out.append(RuleViolation(_WHY[d.what], d.line, d.text))
    for name, line in sorted(v.cuda_refs.items(), key=lambda kv: kv[1]):
        if name not in o.cuda_refs:
            out.append(RuleViolation(f"uses the CUDA host API ({name}; by a call or through its address): streams, "
                                     "events, copies and launches belong to the harness", line,
                                     variant.splitlines()[line - 1].strip()[:200]))
    return out
