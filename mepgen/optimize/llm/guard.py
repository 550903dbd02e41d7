"""LLM-written code is untrusted: it may change kernel.cu only, and kernel.cu may hold device code only.

A proposal is refused (with the reason, handed back to the model) when it defines host functions (a
`main`, static initializers, anything that is neither `__global__` nor `__device__`), includes a header
the original kernel.cu does not, uses inline PTX that calls out (`trap` is fine, syscalls are not
possible from device code anyway), or changes the kernel's name or parameters, which the patch stage must
keep. The evaluator then builds and runs it with no more rights than it needs (its own process, its own
folder, no API keys in its environment).
"""
from __future__ import annotations

import re
from pathlib import Path

from ...parsing import clang

_INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)
_FORBIDDEN = re.compile(r"\b(system|popen|fork|execv\w*|fopen|dlopen|std::system)\s*\(")


def includes(text: str) -> set[str]:
    return {name for _, name in _INCLUDE.findall(text)}


def check(original: str, proposed: str, kernel_name: str, workdir: Path, include_dirs: list[str]) -> list[str]:
    """Problems that make the proposal unacceptable (empty when it may be built)."""
    problems = []
    extra = includes(proposed) - includes(original)
    if extra:
        problems.append(f"new #include of {', '.join(sorted(extra))}: kernel.cu may include only what it already does")
    m = _FORBIDDEN.search(proposed)
    if m:
        problems.append(f"calls {m.group(1)}(): host and system calls are not allowed in kernel.cu")
    args = [f"-I{d}" for d in include_dirs]
    before = _write(Path(workdir) / "original.cu", original)
    path = _write(Path(workdir) / "proposal.cu", proposed)
    tu = clang.parse(path, args)
    want = _signature(clang.parse(before, args), before, kernel_name)
    got = _signature(tu, path, kernel_name)
    for c in _top_level(tu.cursor, path):
        if c.kind.name in ("FUNCTION_DECL", "FUNCTION_TEMPLATE", "CXX_METHOD") and c.is_definition():
            kinds = {k.kind.name for k in c.get_children()}
            if not kinds & {"CUDAGLOBAL_ATTR", "CUDADEVICE_ATTR"}:
                problems.append(f"defines the host function {c.spelling}(): kernel.cu may hold device code only")
    if got is None:
        problems.append(f"the kernel {kernel_name} is missing")
    elif want is not None and got != want:
        problems.append(f"the kernel's signature changed ({', '.join(got)} instead of {', '.join(want)}): "
                        f"keep its name and parameters")
    return problems


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def _top_level(cursor, path: Path, seen: dict[str, bool] | None = None):
    """The declarations of `path` itself (not of its headers), namespaces opened; each file name is resolved
    once (a translation unit with the CUDA headers has tens of thousands of top-level declarations)."""
    target = path.resolve()
    seen = {} if seen is None else seen
    for c in cursor.get_children():
        name = c.location.file.name if c.location.file is not None else None
        if name is None:
            continue
        if name not in seen:
            seen[name] = Path(name).resolve() == target
        if not seen[name]:
            continue
        if c.kind.name in ("NAMESPACE", "LINKAGE_SPEC"):
            yield from _top_level(c, path, seen)
        else:
            yield c


def _signature(tu, path: Path, name: str) -> list[str] | None:
    short = name.split("::")[-1]
    for c in _top_level(tu.cursor, path):
        if c.spelling == short and any(k.kind.name == "CUDAGLOBAL_ATTR" for k in c.get_children()) \
                and c.is_definition():
            return [p.type.spelling for p in c.get_children() if p.kind.name == "PARM_DECL"]
    return None
