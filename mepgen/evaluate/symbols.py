"""Find the kernel among the mangled entry names a compile produced (ptxas's report, a cubin's symbols).

The spec names the kernel as the harness calls it (`cg::axpy<float>`); the compiler reports
`_ZN2cg4axpyIfEEviT_PKS1_PS1_`. Names are demangled with `c++filt` (binutils; `cu++filt` when the CUDA
toolkit ships it) and matched: exactly, then by name without template arguments, then - when only
one kernel is in the file - that one. An ambiguous or missing match is an error naming the candidates.
"""
from __future__ import annotations

import shutil
import subprocess

from ..errors import MepgenError
from ..spec import Spec


def callee(spec: Spec) -> str:
    """What the harness launches: `launch.callee`, else the kernel's name with its template arguments."""
    if spec.launch.callee:
        return spec.launch.callee
    args = spec.kernel.template_args
    return spec.kernel.name + (f"<{', '.join(str(a) for a in args)}>" if args else "")


def demangle(names: list[str]) -> dict[str, str]:
    """Mangled -> demangled; names that no demangler understands map to themselves."""
    tool = shutil.which("cu++filt") or shutil.which("c++filt")
    if not names or tool is None:
        return {n: n for n in names}
    try:
        out = subprocess.run([tool], input="\n".join(names) + "\n", capture_output=True, text=True,
                             timeout=30, check=True).stdout.splitlines()
    except (subprocess.SubprocessError, OSError):
        return {n: n for n in names}
    if len(out) != len(names):
        return {n: n for n in names}
    return dict(zip(names, (o.strip() for o in out)))


def qualified_name(demangled: str) -> str:
    """`void cg::axpy<float>(int, float, ...)` -> `cg::axpy<float>` (spaces removed)."""
    text = demangled.strip()
    if text.endswith(")"):
        depth = 0
        for i in range(len(text) - 1, -1, -1):
            depth += {")": 1, "(": -1}.get(text[i], 0)
            if depth == 0:
                text = text[:i]
                break
    # a function template's mangling carries its return type: drop a leading word outside <>
    depth, cut = 0, 0
    for i, ch in enumerate(text):
        depth += {"<": 1, ">": -1}.get(ch, 0)
        if ch == " " and depth == 0:
            cut = i + 1
    return text[cut:].replace(" ", "")


def _base(name: str) -> str:
    depth, out = 0, []
    for ch in name:
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif depth == 0:
            out.append(ch)
    return "".join(out)


def find_kernel(entries: list[str], wanted: str, what: str = "the compiled code") -> str:
    """The mangled name among `entries` that is the kernel `wanted` (as in `callee(spec)`)."""
    if not entries:
        raise MepgenError(f"no kernel entry point in {what}")
    names = demangle(entries)
    want = wanted.replace(" ", "").lstrip(":")
    exact = [m for m, d in names.items() if qualified_name(d).lstrip(":") == want]
    if len(exact) == 1:
        return exact[0]
    by_base = [m for m, d in names.items() if _base(qualified_name(d)).lstrip(":") == _base(want)]
    if len(by_base) == 1:
        return by_base[0]
    ours = [m for m in entries if "mepgen" not in m]
    if len(ours) == 1 and not exact and not by_base:
        return ours[0]
    shown = ", ".join(sorted(names.values()))
    raise MepgenError(f"cannot tell which entry point of {what} is the kernel {wanted}: found {shown}")
