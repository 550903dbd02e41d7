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


def check(variant: str, original: str) -> list[RuleViolation]:
    """Violations in `variant` that `original` does not already contain (compared by line text)."""
    var, orig = strip_comments(variant), strip_comments(original)
    violations = []
    for rule, rx in RULES:
        allowed = {" ".join(t.split()) for _, t in _matches(orig, rx, original)}
        seen = set()
        for line, text in _matches(var, rx, variant):
            if " ".join(text.split()) not in allowed and line not in seen:
                seen.add(line)
                violations.append(RuleViolation(rule, line, text[:200]))
    return violations
