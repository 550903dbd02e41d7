"""Source rules for variants: constructs a variant of kernel.cu may not add, because they cheat the timer.

The harness `#include`s kernel.cu, so a variant's host code and macros land in the harness itself: a
`#define cudaEventElapsedTime ...` fakes the clock, a stream created at static-initialization time runs
the work where the timer does not look, a file read finds the reference outputs, and a new mutable
`__device__` global can carry results from one launch to the next. A construct is allowed when the
original kernel.cu already has it (the MEP needed it); only additions are rejected, with the line.
"""
from __future__ import annotations

import re

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


def check(variant: str, original: str, chain: list[str] = (), target: str = "") -> list[RuleViolation]:
    """Violations in `variant` that `original` does not already contain (compared by line text). `chain`:
    qualified names of the kernels the MEP runs before its target (`target`): they must stay as they are,
    since they run untimed and compute the target's inputs."""
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
    return violations
