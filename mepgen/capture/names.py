"""Kernel names as a user types them and as the CUDA driver reports them.

A user names a kernel the way mepgen's inventory does (`cg::spmv_csr`, `spmv_csr`, `cg.spmv_csr`), optionally with
template arguments (`cg::axpy<float>`), or by the mangled name a profiler printed (`_ZN2cg4axpyIfEEviT_PKS1_PS1_`).
The injector matches launches by the demangled base name and template arguments (spaces removed) exactly as
:func:`split_demangled` does here, so both sides agree on what a name means.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

# used by the capture modules
from ..demangled import normalize_args, split_demangled, split_template_args  # noqa: F401
from ..errors import MepgenError
from ..kernelname import find_kernel


@dataclass(frozen=True)
class KernelChoice:
    kernel: dict                 # the inventory's kernel record
    template_args: str = ""      # normalized ("float,4"), empty: every instantiation
    mangled: str = ""            # exact mangled name when the user gave one

    @property
    def display(self) -> str:
        if self.mangled:
            return self.mangled
        q = self.kernel["qualified_name"]
        return f"{q}<{self.template_args}>" if self.template_args else q


_QUALIFIERS = re.compile(r"\b(const|volatile|__restrict__|__restrict|restrict|struct|class)\b|\*|&")


def bare_type(spelling: str) -> str:
    """`const float *__restrict` -> `float`."""
    return " ".join(_QUALIFIERS.sub(" ", spelling or "").split())


def mangled_prefix(qualified: str) -> str:
    """The start of the Itanium-mangled name of a function or variable: `cg::spmv_csr` -> `_ZN2cg8spmv_csrE`
    (a function's template arguments follow as `I...E` instead of the closing `E`), `k` -> `_Z1k`."""
    parts = qualified.split("::")
    if len(parts) == 1:
        return f"_Z{len(parts[0])}{parts[0]}"
    return "_ZN" + "".join(f"{len(p)}{p}" for p in parts) + "E"


def variable_symbols(qualified: str) -> list[str]:
    """Names under which a namespace-scope `__constant__`/`__device__` variable may be found in a module:
    its mangled name (a variable in a namespace), then the plain and the qualified name."""
    parts = qualified.split("::")
    out = []
    if len(parts) > 1 and all(parts):
        out.append(mangled_prefix(qualified))
    out.append(parts[-1])
    if qualified not in out:
        out.append(qualified)
    return out


def _by_mangled(inv: dict, mangled: str) -> dict:
    for k in inv["kernels"]:
        prefix = mangled_prefix(k["qualified_name"])
        stem = prefix[:-1] if prefix.startswith("_ZN") else prefix
        if mangled == prefix or mangled.startswith(prefix) or mangled.startswith(stem + "I"):
            return k
    raise MepgenError(f"the mangled name '{mangled}' matches no kernel of the inventory")


def choose_kernel(inv: dict, name: str) -> KernelChoice:
    """The kernel a user named, with the instantiation when they named one."""
    name = name.strip()
    if name.startswith("_Z"):
        return KernelChoice(_by_mangled(inv, name), mangled=name)
    args = ""
    if name.endswith(">") and "<" in name:
        base, args = split_demangled(name)
        name = base
    kernel = find_kernel(inv, name)
    if args and not kernel.get("is_template"):
        raise MepgenError(f"{kernel['qualified_name']} is not a template: drop the <{args}>")
    return KernelChoice(kernel, template_args=args)
