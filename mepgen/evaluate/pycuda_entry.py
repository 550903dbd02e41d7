"""Build a kernel file into a cubin the pycuda backend can launch without the harness.

nvcc compiles a generated entry file that `#include`s the kernel file with the harness's flags and adds:
- a host function taking the kernel's address, so a template kernel is instantiated (`cg::axpy<float>`);
- `__device__` variables holding each scalar argument's value, each struct constant's initializer,
  each parameter's size and alignment, and the launch geometry - computed by nvcc from the same C++
  expressions the harness uses (`0.5f`, `heat::Grid{NX, NY, 1.0f, 1.0f}`, `(N + 255) / 256`); a captured value
  held as bytes (a struct argument, NaN) is not a constant expression, so its bytes are the variable's (device
  pointers inside it are rewritten by the worker for each input set: captured_pointers.py).
The cubin's symbol table then gives the entry's mangled name (the STO_CUDA_ENTRY function matching the
spec's callee) and the bytes of those variables, so Python never parses C++.
"""
from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

from .. import mepbuild
from ..errors import MepgenError
from ..cbytes import captured_bytes
from ..datagen import const_file_name
from ..spec import Spec
from . import confined, fold, process, sandbox
from .backend import Built
from .cubin import Cubin, mangle_variable
from .native import compile_message
from .ptxas import kernel_info
from .results import CompileFailed
from .symbols import callee, demangle, find_kernel

_PARAM_TYPES = """
template <int MEPGEN_I, typename... MEPGEN_A> struct mepgen_nth;
template <typename MEPGEN_H, typename... MEPGEN_A> struct mepgen_nth<0, MEPGEN_H, MEPGEN_A...> {
    typedef MEPGEN_H type; };
template <int MEPGEN_I, typename MEPGEN_H, typename... MEPGEN_A> struct mepgen_nth<MEPGEN_I, MEPGEN_H, MEPGEN_A...> {
    typedef typename mepgen_nth<MEPGEN_I - 1, MEPGEN_A...>::type type; };
template <int MEPGEN_I, typename MEPGEN_F> struct mepgen_param;
template <int MEPGEN_I, typename... MEPGEN_A> struct mepgen_param<MEPGEN_I, void (*)(MEPGEN_A...)> {
    typedef typename mepgen_nth<MEPGEN_I, MEPGEN_A...>::type type; };
#define MEPGEN_PARAM(I) mepgen_param<I, decltype(&MEPGEN_KERNEL)>::type
"""


def _callee_in_build(name: str, sizes) -> str:
    base, lt, rest = name.partition("<")
    return base + lt + mepbuild.in_build(rest, sizes) if lt else name


def entry_source(spec: Spec, kernel_file: Path) -> str:
    """The translation unit that makes `kernel_file` launchable from a cubin."""
    # sizes are -DMEPGEN_SIZE_<SYM> in the build; ceil() and the like go through fold.PRELUDE's constexpr twins
    b = lambda e: fold.rewrite(mepbuild.in_build(e, spec.sizes))
    lines = [*(f"#include <{h}>" for h in mepbuild.PRELUDE_HEADERS), fold.PRELUDE,
             f'#include "{Path(kernel_file).resolve()}"', _PARAM_TYPES,
             f"#define MEPGEN_KERNEL {_callee_in_build(callee(spec), spec.sizes)}", ""]
    n = len(spec.params)
    for i, p in enumerate(spec.params):
        if p.role == "scalar":
            lines.append(_variable(f"MEPGEN_PARAM({i})", f"mepgen_arg_{i}", p.value, b))
            for r in p.relocate or []:        # the worker writes a device pointer there (the harness's check)
                lines.append(f'static_assert(sizeof(MEPGEN_PARAM({i})) >= {int(r["at"])} + sizeof(void*), '
                             f'"relocation inside {p.name}");')
    layout = ", ".join(f"sizeof(MEPGEN_PARAM({i})), alignof(MEPGEN_PARAM({i}))" for i in range(n))
    # a kernel without parameters has no layout: one element still (a zero-sized array does not compile)
    lines.append(f"__device__ unsigned long long mepgen_layout[{max(2 * n, 1)}] = {{{layout}}};")
    for j, c in enumerate(spec.constants):
        if c.init is None and c.value is not None:
            lines.append(_variable(f"decltype({c.name})", f"mepgen_const_{j}", c.value, b))
    # grid and block built as the harness builds them (`const dim3 grid(e0, e1)`), so that a component that is
    # itself a dim3 (`dim3(NPTS / M1W)`, as some launches spell it) means the same here as there
    shape = lambda es: f"dim3({', '.join(b(e) for e in es) or '1'})"
    grid, block = shape(spec.launch.grid), shape(spec.launch.block)
    dims = [f"{grid}.{c}" for c in "xyz"] + [f"{block}.{c}" for c in "xyz"] + [b(spec.launch.shared_mem or "0")]
    lines.append("__device__ unsigned long long mepgen_launch[7] = {"
                 + ", ".join(f"(unsigned long long)({d})" for d in dims) + "};")
    lines.append("void mepgen_instantiate() { (void)&MEPGEN_KERNEL; }")
    return "\n".join(lines) + "\n"


def _variable(type_expr: str, name: str, value: str, spell=lambda e: e) -> str:
    """A `__device__` variable holding `value`'s bytes. A `__device__` variable needs a constant initializer; a
    captured struct (or NaN) is an expression that copies bytes at run time, so its bytes are spelled directly
    (with the type's size checked) instead."""
    raw = captured_bytes(value)
    if raw is None:
        return f"__device__ {type_expr} {name} = {spell(value)};"
    body = ", ".join(f"0x{b:02x}" for b in raw)
    return (f'static_assert(sizeof({type_expr}) == {len(raw)}, "{name}: captured size");\n'
            f"__device__ unsigned char {name}[{len(raw)}] = {{{body}}};")


def _u64s(data: bytes) -> list[int]:
    return [int.from_bytes(data[i:i + 8], "little") for i in range(0, len(data), 8)]


def describe(spec: Spec, cubin: Cubin) -> dict:
    """What the worker needs to launch: entry name, argument layout and bytes, constants, geometry."""
    entry = find_kernel(cubin.entries(), callee(spec), "the cubin")
    layout = _u64s(cubin.initial_bytes("mepgen_layout"))
    params = []
    for i, p in enumerate(spec.params):
        item = {"name": p.name, "role": p.role, "size": layout[2 * i], "align": layout[2 * i + 1]}
        if p.role == "scalar":
            item["bytes"] = cubin.initial_bytes(f"mepgen_arg_{i}").hex()
        params.append(item)
    names = {s.name for s in cubin.symbols}
    constants = []
    for j, c in enumerate(spec.constants):
        symbol = next((m for m in mangle_variable(c.name) if m in names), None)
        if symbol is None and "<" in c.name:      # an instantiation of a variable template: `taps<double>`
            symbol = _instantiation_symbol(c.name, [s.name for s in cubin.symbols if s.name.startswith("_Z")])
        if symbol is None:
            raise KeyError(f"constant {c.name} is not in the cubin")
        item = {"name": c.name, "symbol": symbol, "size": cubin.symbol(symbol).size,
                **({"output": True} if c.role == "inout" else {})}     # a written __device__ variable: read back
        if c.init is None and c.value is not None:
            item["bytes"] = cubin.initial_bytes(f"mepgen_const_{j}").hex()
        else:
            item["file"] = const_file_name(c.name)[:-len(".npy")]
        constants.append(item)
    geometry = _u64s(cubin.initial_bytes("mepgen_launch"))
    return {"entry": entry, "params": params, "constants": constants,
            "grid": geometry[0:3], "block": geometry[3:6], "shared": geometry[6]}


def _instantiation_symbol(name: str, mangled: list[str]) -> str | None:
    """The mangled symbol whose demangled name is `name` (spaces aside): `_Z4maskIdE` for `mask<double>`."""
    want = name.replace(" ", "")
    return next((m for m, d in demangle(mangled).items() if d.replace(" ", "") == want), None)


def build_cubin(spec: Spec, mep_dir: Path, kernel_file: Path, build_dir: Path, timeout: float,
                level: str | None = None) -> Built | CompileFailed:
    """Compile (cached by content) and describe; failures come back as CompileFailed with nvcc's words.
    `level`: the sandbox level nvcc runs under (sandbox.py; None: the strongest here)."""
    mep_dir = Path(mep_dir).resolve()
    kernel_file = Path(kernel_file).resolve()
    flags = mepbuild.build_flags(spec) + [f"-I{mep_dir}"]
    source = entry_source(spec, kernel_file)
    h = hashlib.sha256()
    for part in (kernel_file.read_bytes(), source.encode(), json.dumps(flags).encode()):
        h.update(hashlib.sha256(part).digest())
    key = "cubin-" + h.hexdigest()[:24]
    out_dir = Path(build_dir) / key
    cubin_file, log_file, desc_file = out_dir / "kernel.cubin", out_dir / "compile.log", out_dir / "launch.json"
    if cubin_file.is_file() and desc_file.is_file():
        log = log_file.read_text() if log_file.is_file() else ""
        info = kernel_info(log, callee(spec), 0.0)
        info.cached = True
        return Built(kernel_file, cubin_file, key, info, log, json.loads(desc_file.read_text()))
    out_dir.mkdir(parents=True, exist_ok=True)
    entry = out_dir / "entry.cu"
    entry.write_text(source)
    tmp = out_dir / f"kernel.{os.getpid()}.{time.monotonic_ns()}.tmp"
    cmd = [mepbuild.nvcc_executable(), *flags, "-cubin", str(entry), "-o", str(tmp), "-Xptxas", "-v"]
    try:
        confine = confined.for_build(level or sandbox.resolve("auto"), cmd, mep_dir, out_dir, [kernel_file, entry])
        done = process.run(cmd, timeout=timeout, cwd=mep_dir, confine=confine)
    except FileNotFoundError:
        return CompileFailed(f"{cmd[0]} not found: install the CUDA toolkit or set $NVCC", "")
    log = (done.stdout + done.stderr).strip()
    if done.timed_out:
        return CompileFailed(f"nvcc did not finish within {timeout:g} s", log)
    if done.returncode != 0 or not tmp.is_file():
        tmp.unlink(missing_ok=True)
        return CompileFailed(compile_message(log), log)
    try:
        desc = describe(spec, Cubin.load(tmp))
    except (KeyError, ValueError, MepgenError) as e:   # the cubin lacks what a launch needs
        tmp.unlink(missing_ok=True)
        return CompileFailed(f"unsupported by the pycuda backend: {e} (use --backend native)", log)
    log_file.write_text(log)
    desc_file.write_text(json.dumps(desc))
    os.replace(tmp, cubin_file)
    return Built(kernel_file, cubin_file, key, kernel_info(log, callee(spec), done.seconds), log, desc)
