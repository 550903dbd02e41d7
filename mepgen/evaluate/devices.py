"""Which GPUs this machine has (`nvidia-smi -L`), and the backend for each: one worker per GPU."""
from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
from pathlib import Path

from ..errors import MepgenError
from ..spec import Spec
from ..cbytes import captured_bytes
from .native import NativeBackend
from .pycuda_backend import PycudaBackend
from .fold import folds

BACKENDS = ("auto", "native", "pycuda")


def list_gpus() -> tuple[list[int], str]:
    """GPU indices in PCI order (nvidia-smi's numbering) that this process may use - those CUDA_VISIBLE_DEVICES
    names when it is set (indices or GPU UUIDs) - and why there are none when the list is empty."""
    gpus, why, uuids = _smi_gpus()
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if not gpus or visible is None:
        return gpus, why
    chosen = []
    for token in (t.strip() for t in visible.split(",")):
        if token.isdigit() and int(token) in gpus:
            index = int(token)
        elif token in uuids:
            index = uuids[token]
        else:
            break              # CUDA stops at the first entry it cannot use; so does this list
        if index not in chosen:
            chosen.append(index)
    if not chosen:
        return [], f"CUDA_VISIBLE_DEVICES={visible!r} names none of the {len(gpus)} GPU(s) nvidia-smi lists"
    return chosen, ""


def _smi_gpus() -> tuple[list[int], str, dict[str, int]]:
    """nvidia-smi -L: indices, why none, and index by UUID."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return [], "nvidia-smi is not on PATH", {}
    try:
        # nvidia-smi lists every GPU whatever CUDA_VISIBLE_DEVICES says; the filter is list_gpus'
        done = subprocess.run([exe, "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as e:
        return [], f"nvidia-smi -L failed: {e}", {}
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("GPU ")]
    gpus = list(range(len(lines)))
    uuids = {m.group(1): i for i, ln in enumerate(lines) for m in [re.search(r"UUID: (GPU-[\w-]+)", ln)] if m}
    if done.returncode != 0 or not gpus:
        msg = (done.stderr or done.stdout).strip().splitlines()
        return [], f"nvidia-smi -L found none ({msg[-1] if msg else 'exit ' + str(done.returncode)})", {}
    return gpus, "", uuids


def have_pycuda() -> bool:
    return importlib.util.find_spec("pycuda") is not None


def pycuda_unsupported(spec: Spec) -> str | None:
    """Why the pycuda backend cannot run this MEP (the checks PycudaBackend makes), or None."""
    if spec.chain:
        return f"the MEP runs a chain ({', '.join(c.kernel for c in spec.chain)}) before its kernel"
    for p in spec.params:
        if p.role == "scalar" and p.value is None:
            return f"scalar parameter {p.name} has no value"
    for p in spec.params:
        if p.role == "scalar" and p.dtype is None and p.value is not None and captured_bytes(str(p.value)) is None \
                and not str(p.value).lstrip().startswith("{") and not _NULL_POINTER.match(str(p.value)):
            return (f"scalar parameter {p.name} ({p.ctype}) is built from `{p.value}` by a constructor, which a "
                    "`__device__` variable's constant initializer cannot run")
    calls = runtime_calls(spec)
    if calls:
        return (f"its launch or scalar values call {', '.join(calls)}(), which a `__device__` variable's constant "
                "initializer cannot (the pycuda entry folds ceil, floor, min, max and the like: fold.py)")
    return None


#: a null pointer (captured as null, or a pointer into another parameter's buffer that the worker writes in:
#: mep.yaml `relocate`): a constant initializer, no constructor
_NULL_POINTER = re.compile(r"^\s*(?:nullptr|NULL|0|static_cast<[^<>()]*>\(\s*nullptr\s*\))\s*$")

_NOT_CALLS = {"sizeof", "alignof", "decltype", "dim3", "static_cast", "reinterpret_cast", "const_cast", "int",
              "unsigned", "long", "short", "char", "float", "double", "size_t", "bool", "int64_t", "uint64_t",
              "int32_t", "uint32_t", "make_float2", "make_float4", "make_int2"}


def runtime_calls(spec: Spec) -> list[str]:
    """Functions (`sqrt`, `iDivUp`...) the launch geometry or a scalar's value calls that the pycuda entry's
    `__device__` initializers cannot: the native harness evaluates them on the host at run time. `ceil`, `floorf`,
    `max` and the like are not among them: the entry calls constexpr twins of them (fold.py)."""
    texts = [*spec.launch.grid, *spec.launch.block, spec.launch.shared_mem or "0",
             *(str(p.value) for p in spec.params if p.role == "scalar" and p.value is not None
               and captured_bytes(str(p.value)) is None)]
    found: list[str] = []
    for t in texts:
        if t.lstrip().startswith("{"):
            continue                                  # a brace initializer is data
        for m in re.finditer(r"(?<![\w.])([A-Za-z_][\w:]*)\s*\(", t):
            name = m.group(1)
            if name.split("::")[-1] not in _NOT_CALLS and not folds(name) and name not in found:
                found.append(name)
    return found


def choose_backend(name: str, spec: Spec) -> tuple[str, str]:
    """(backend, why): `auto` takes pycuda when it is installed and the MEP allows it, native otherwise."""
    if name not in BACKENDS:
        raise MepgenError(f"unknown backend '{name}' (known: {', '.join(BACKENDS)})")
    if name != "auto":
        return resolve_backend(name, chained=bool(spec.chain)), "asked for"
    if not have_pycuda():
        return "native", "auto: pycuda is not installed (pip install 'mepgen[gpu]' for the faster backend)"
    why = pycuda_unsupported(spec)
    if why:
        return "native", f"auto: {why}, which only the native harness runs"
    return "pycuda", "auto: pycuda is installed and the MEP allows it"


def resolve_backend(name: str, chained: bool = False) -> str:
    """`auto` -> pycuda when installed (the `mepgen[gpu]` extra), else native; pycuda without it is an error.
    `chained`: the MEP runs a chain before its kernel, which only the native harness does (auto -> native)."""
    if name not in BACKENDS:
        raise MepgenError(f"unknown backend '{name}' (known: {', '.join(BACKENDS)})")
    if name == "auto":
        return "pycuda" if have_pycuda() and not chained else "native"
    if name == "pycuda" and not have_pycuda():
        raise MepgenError("the pycuda backend needs pycuda: pip install 'mepgen[gpu]', or use --backend native")
    return name


def make_backend(name: str, spec: Spec, mep_dir: Path, build_dir: Path, device: int | None, run_timeout: float,
                 compile_timeout: float):
    if name == "pycuda":
        return PycudaBackend(spec, mep_dir, build_dir, device=device, run_timeout=run_timeout,
                             compile_timeout=compile_timeout)
    return NativeBackend(spec, mep_dir, build_dir, device=device, run_timeout=run_timeout,
                         compile_timeout=compile_timeout)
