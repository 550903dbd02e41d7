"""Compiles with real nvcc (no GPU needed): native harness builds, compile failures, cubins for pycuda."""
from __future__ import annotations

import shutil

import pytest

from evaluate_fakes import FIXTURES
from mepgen.evaluate.cubin import Cubin, mangle_variable
from mepgen.evaluate.native import NativeBackend
from mepgen.evaluate.ptxas import parse
from mepgen.evaluate.pycuda_entry import build_cubin
from mepgen.evaluate.results import CompileFailed
from mepgen.spec import load_spec

pytestmark = pytest.mark.nvcc

#: just enough harness to build: includes the kernel file and instantiates the kernel
MINI_HARNESS = """#include MEP_KERNEL_FILE
int main() { void (*k)(int, float, const float*, float*) = cg::axpy<float>; return k == nullptr; }
"""


@pytest.fixture
def axpy(tmp_path):
    mep = tmp_path / "cg.axpy"
    shutil.copytree(FIXTURES / "axpy", mep)
    (mep / "harness.cu").write_text(MINI_HARNESS)
    spec = load_spec(mep / "mep.yaml")
    return spec, mep, NativeBackend(spec, mep, tmp_path / "build")


def test_native_build_reports_registers_and_is_cached(axpy):
    spec, mep, be = axpy
    built = be.compile(mep / "kernel.cu")
    assert not isinstance(built, CompileFailed), built
    assert built.artifact.is_file() and built.info.registers and built.info.spill_stores == 0
    assert not built.info.cached
    again = be.compile(mep / "kernel.cu")
    assert again.info.cached and again.artifact == built.artifact and again.info.registers == built.info.registers


def test_compile_error_carries_nvcc_message(axpy, tmp_path):
    spec, mep, be = axpy
    bad = tmp_path / "bad.cu"
    bad.write_text((mep / "kernel.cu").read_text().replace("y[i] = a * x[i] + y[i];", "y[i] = a * x[i] + z[i];"))
    res = be.compile(bad)
    assert isinstance(res, CompileFailed)
    assert 'identifier "z" is undefined' in res.message
    assert "src/cg.cu(43): error" in res.message     # #line markers point at the application's source
    assert len(res.log) >= len(res.message)
    assert not list((tmp_path / "build").glob("*/mep"))     # nothing half-built left behind


def test_pycuda_cubin_has_the_entry_and_argument_bytes(tmp_path):
    spec = load_spec(FIXTURES / "axpy" / "mep.yaml")
    built = build_cubin(spec, FIXTURES / "axpy", FIXTURES / "axpy" / "kernel.cu", tmp_path, 300)
    assert not isinstance(built, CompileFailed), built
    d = built.extra
    assert d["entry"] == "_ZN2cg4axpyIfEEviT_PKS1_PS1_"
    assert d["grid"] == [4096, 1, 1] and d["block"] == [256, 1, 1] and d["shared"] == 0
    n, a, x, y = d["params"]
    assert bytes.fromhex(n["bytes"]) == (1048576).to_bytes(4, "little")
    assert bytes.fromhex(a["bytes"]) == bytes.fromhex("0000003f")          # 0.5f
    assert (x["size"], x["align"], y["size"]) == (8, 8, 8)
    assert "_ZN2cg4axpyIfEEviT_PKS1_PS1_" in Cubin.load(built.artifact).entries()


def test_pycuda_cubin_reads_a_launch_spelled_as_dim3_objects_like_the_harness(tmp_path):
    """`kernel<<<dim3(N / 128), dim3(128)>>>`: mep.yaml keeps each side as one dim3 expression; the harness builds
    `dim3 grid((dim3(N / 128)))` from it, and the pycuda entry must read the same x, y and z (it cast the dim3 to an
    integer: "no suitable conversion function from dim3", and such an MEP's baseline did not build)."""
    spec = load_spec(FIXTURES / "axpy" / "mep.yaml")
    spec.launch.grid = ["dim3((N + 255) / 256)"]
    spec.launch.block = ["dim3(128, 2)"]
    built = build_cubin(spec, FIXTURES / "axpy", FIXTURES / "axpy" / "kernel.cu", tmp_path, 300)
    assert not isinstance(built, CompileFailed), built
    assert built.extra["grid"] == [4096, 1, 1] and built.extra["block"] == [128, 2, 1]
    spec.launch.grid, spec.launch.block = ["64", "(N + 255) / 256 / 64"], ["256"]
    built = build_cubin(spec, FIXTURES / "axpy", FIXTURES / "axpy" / "kernel.cu", tmp_path, 300)
    assert built.extra["grid"] == [64, 64, 1] and built.extra["block"] == [256, 1, 1]


def test_pycuda_cubin_struct_scalar_and_constants(tmp_path):
    spec = load_spec(FIXTURES / "heat" / "mep.yaml")
    built = build_cubin(spec, FIXTURES / "heat", FIXTURES / "heat" / "kernel.cu", tmp_path, 300)
    assert not isinstance(built, CompileFailed), built
    d = built.extra
    g = d["params"][2]
    assert (g["size"], g["align"]) == (16, 4)
    import struct
    assert struct.unpack("<iiff", bytes.fromhex(g["bytes"])) == (512, 256, 1.0, 0.5)
    stencil, grid = d["constants"]
    assert stencil == {"name": "heat::c_stencil", "symbol": "_ZN4heat9c_stencilE", "size": 20,
                       "file": "const.heat.c_stencil"}
    assert grid["bytes"] == g["bytes"]
    assert d["grid"] == [16, 32, 1] and d["block"] == [32, 8, 1]


def test_pycuda_cubin_takes_captured_bytes_though_they_are_no_constant_expression(tmp_path):
    """A captured struct argument (or NaN) is a lambda copying bytes: no initializer for a `__device__` variable
    ("dynamic initialization is not supported"); the entry spells the bytes themselves, its size checked."""
    import struct
    from mepgen.cbytes import bytes_expression
    spec = load_spec(FIXTURES / "heat" / "mep.yaml")
    grid = struct.pack("<iiff", 300, 7, 2.0, 0.25)
    nan = bytes.fromhex("0100c07f")                     # a NaN with a payload: only its bytes keep it
    spec.params[2].value = bytes_expression("heat::Grid", grid.hex())
    spec.params[3].value = bytes_expression("float", nan.hex())
    spec.constants[1].value = bytes_expression("decltype(heat::c_grid)", grid.hex())
    built = build_cubin(spec, FIXTURES / "heat", FIXTURES / "heat" / "kernel.cu", tmp_path, 300)
    assert not isinstance(built, CompileFailed), built
    d = built.extra
    assert bytes.fromhex(d["params"][2]["bytes"]) == grid and d["params"][2]["align"] == 4
    assert bytes.fromhex(d["params"][3]["bytes"]) == nan
    assert bytes.fromhex(d["constants"][1]["bytes"]) == grid
    spec.params[2].value = bytes_expression("heat::Grid", grid[:12].hex())      # not the type's size: named
    res = build_cubin(spec, FIXTURES / "heat", FIXTURES / "heat" / "kernel.cu", tmp_path, 300)
    assert isinstance(res, CompileFailed) and "mepgen_arg_2: captured size" in res.message


def test_pycuda_unusable_value_is_a_compile_failure(tmp_path):
    spec = load_spec(FIXTURES / "axpy" / "mep.yaml")
    spec.params[1].value = "some_host_function()"
    res = build_cubin(spec, FIXTURES / "axpy", FIXTURES / "axpy" / "kernel.cu", tmp_path, 300)
    assert isinstance(res, CompileFailed) and "some_host_function" in res.message


def test_ptxas_report_parsing():
    log = """ptxas info    : Compiling entry function '_Z1kPf' for 'sm_90'
ptxas info    : Function properties for _Z1kPf
    8 bytes stack frame, 12 bytes spill stores, 16 bytes spill loads
ptxas info    : Used 255 registers, used 1 barriers, 4096 bytes smem
ptxas info    : Function properties for _Z6helperf
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads"""
    f = parse(log)
    assert f["_Z1kPf"] == {"entry": True, "stack_bytes": 8, "spill_stores": 12, "spill_loads": 16,
                           "registers": 255, "shared_bytes": 4096}
    assert "entry" not in f["_Z6helperf"]


def test_variable_mangling():
    assert mangle_variable("heat::c_grid") == ["_ZN4heat6c_gridE"]
    assert mangle_variable("a::b::v") == ["_ZN1a1b1vE"]
    assert mangle_variable("c_range") == ["c_range"]


def test_pycuda_entry_gives_a_kernel_the_headers_the_native_harness_gives(tmp_path):
    """A kernel file that leans on its includer's headers (`uint32_t` without <cstdint>, as an application header
    included after the standard ones is written) builds on the pycuda backend as on the native one."""
    import shutil
    mep = tmp_path / "axpy"
    shutil.copytree(FIXTURES / "axpy", mep)
    text = (mep / "kernel.cu").read_text()
    (mep / "kernel.cu").write_text("__device__ uint32_t mepgen_test_word(uint32_t v) { return v ^ 1u; }\n" + text)
    built = build_cubin(load_spec(mep / "mep.yaml"), mep, mep / "kernel.cu", tmp_path / "b", 300)
    assert not isinstance(built, CompileFailed), built


#: launch dimensions spelled with host math, as applications write them (PolyBench: `(size_t)ceil((float)N / 32)`)
HOST_MATH = ["(size_t)(ceil((float)N / ((float)1000)))", "max(3, N / 300000) + (int)floorf(2.5f) + (N > 4 ? 1 : 0)",
             "(unsigned)std::min<long>(7, N) * (unsigned)fabs(-2.0) + (unsigned)roundf(2.5f) + (unsigned)(ceil(N / 3) / 2)"]


def test_pycuda_entry_folds_host_math_in_the_launch_to_the_host_s_values(tmp_path):
    """`ceil`, `floorf`, `max`, `fabs`, `roundf` in a launch: the entry's `__device__` initializer calls constexpr
    twins of them (fold.py), and the geometry equals what the host computes from the same text (g++ with <cmath>,
    the native harness's way), an integral argument of ceil giving a double as <cmath>'s does."""
    import subprocess
    spec = load_spec(FIXTURES / "axpy" / "mep.yaml")
    spec.launch.grid = list(HOST_MATH)
    built = build_cubin(spec, FIXTURES / "axpy", FIXTURES / "axpy" / "kernel.cu", tmp_path, 300)
    assert not isinstance(built, CompileFailed), built
    host = tmp_path / "host.cpp"
    host.write_text("#include <cmath>\n#include <cstdio>\n#include <algorithm>\nusing std::max; using std::min;\n"
                    "#define N 1048576\nint main() {\n" + "".join(
                        f'  printf("%llu\\n", (unsigned long long)({e}));\n' for e in HOST_MATH) + "}\n")
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.skip("no host C++ compiler")
    subprocess.run([cxx, "-std=c++17", str(host), "-o", str(tmp_path / "host")], check=True)
    want = [int(v) for v in subprocess.run([str(tmp_path / "host")], capture_output=True, text=True).stdout.split()]
    assert built.extra["grid"] == want == [1049, 3 + 2 + 1, 7 * 2 + 3 + 174762]


def test_folded_calls_do_not_meet_a_macro_of_the_same_name_in_the_kernel_s_headers(tmp_path):
    """`#define min(a, b) ...` in the kernel file (as C-style code has it): the entry's `(mepgen_fold::min)(...)`
    and its prelude (before the kernel file) are out of the macro's reach."""
    kernel = tmp_path / "kernel.cu"
    kernel.write_text("#define min(a, b) ((a) < (b) ? (a) : (b))\n#define ceil(x) oops\n"
                      + (FIXTURES / "axpy" / "kernel.cu").read_text())
    spec = load_spec(FIXTURES / "axpy" / "mep.yaml")
    spec.launch.grid = ["min(N / 256, 100)"]
    spec.launch.block = ["(unsigned)std::max(32, 64)"]
    built = build_cubin(spec, FIXTURES / "axpy", kernel, tmp_path / "b", 300)
    assert not isinstance(built, CompileFailed), built
    assert built.extra["grid"] == [100, 1, 1] and built.extra["block"] == [64, 1, 1]
