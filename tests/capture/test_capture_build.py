"""The capture injector: found toolkit, cached build, clear errors without one, and the C++ plan reader and name
matcher agreeing with the Python plan writer (through the library's self-test entry point; no GPU needed)."""
from __future__ import annotations

import ctypes
import json
import subprocess
from pathlib import Path

import pytest

from mepgen.capture import build as build_mod
from mepgen.capture.build import LIB_NAME, build_injector, compile_command
from mepgen.capture.names import choose_kernel
from mepgen.capture.plan import make_plan
from mepgen.capture.toolkit import Toolkit, find_toolkit
from mepgen.errors import MepgenError


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    return tmp_path / "xdg"


@pytest.fixture(scope="module")
def built(capture_injector):
    return capture_injector


@pytest.fixture(scope="module")
def injector(built):
    return built[0]


def _fake_toolkit(root: Path, cuda_h: str | None = "#define CUDA_VERSION 12040\n", cupti: bool = True,
                  lib: bool = True) -> Path:
    (root / "include").mkdir(parents=True)
    (root / "lib64").mkdir()
    if cuda_h is not None:
        (root / "include" / "cuda.h").write_text(cuda_h)
    if cupti:
        (root / "include" / "cupti.h").write_text("/* fake */\n")
    if lib:
        (root / "lib64" / "libcupti.so").write_bytes(b"")
    return root


@pytest.mark.nvcc
def test_injector_builds_and_exports_the_injection_entry_point(built):
    inj, cache = built
    assert inj.built and inj.path.name == LIB_NAME and inj.path.is_file()
    assert inj.path.is_relative_to(cache / "mepgen" / "capture" / f"cuda-{inj.toolkit.version}")
    syms = subprocess.run(["nm", "-D", "--defined-only", str(inj.path)], capture_output=True, text=True).stdout
    exported = {ln.split()[-1] for ln in syms.splitlines() if " T " in ln}
    assert {"InitializeInjection", "mepgen_capture_selftest"} <= exported
    # hidden visibility: nothing else leaks into the application's symbol space
    assert not any("read_plan" in s or "split_name" in s for s in exported)
    # it links CUPTI but not libcuda (a build machine may have no driver)
    needed = subprocess.run(["readelf", "-d", str(inj.path)], capture_output=True, text=True).stdout
    assert "libcupti" in needed and "libcuda.so" not in needed


@pytest.mark.nvcc
def test_second_build_reuses_the_cache_and_rebuild_forces(built, monkeypatch):
    first, cache = built
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    mtime = first.path.stat().st_mtime_ns
    again = build_injector()
    assert not again.built and again.path == first.path and again.path.stat().st_mtime_ns == mtime
    forced = build_injector(force=True)
    assert forced.built and forced.path == first.path
    assert not list(first.path.parent.glob(".build.*")), "no temporary build files are left behind"


def test_explicit_cuda_home_is_the_only_candidate(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "nowhere"))
    with pytest.raises(MepgenError, match=r"\$CUDA_HOME=.*nowhere is not a folder"):
        find_toolkit()


def test_missing_pieces_are_named(tmp_path, monkeypatch):
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.setenv("CUDA_HOME", str(_fake_toolkit(tmp_path / "a", cuda_h=None)))
    with pytest.raises(MepgenError, match="no cuda.h under"):
        find_toolkit()
    monkeypatch.setenv("CUDA_HOME", str(_fake_toolkit(tmp_path / "b", cupti=False)))
    with pytest.raises(MepgenError, match="no cupti.h .*CUPTI component"):
        find_toolkit()
    monkeypatch.setenv("CUDA_HOME", str(_fake_toolkit(tmp_path / "c", lib=False)))
    with pytest.raises(MepgenError, match="no libcupti.so"):
        find_toolkit()
    monkeypatch.setenv("CUDA_HOME", str(_fake_toolkit(tmp_path / "d")))
    tk = find_toolkit()
    assert tk.version == "12.4" and tk.cache_key == "cuda-12.4" and tk.cupti_lib.name == "lib64"


def test_no_toolkit_anywhere(tmp_path, monkeypatch):
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.delenv("NVCC", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr("mepgen.capture.toolkit.candidate_roots", lambda: [(tmp_path / "cuda", "the default")])
    with pytest.raises(MepgenError, match="capture needs the CUDA toolkit with CUPTI"):
        find_toolkit()


def test_nvcc_wrapper_script_is_followed(tmp_path, monkeypatch):
    real = _fake_toolkit(tmp_path / "cuda-12.4")
    (real / "bin").mkdir()
    (real / "bin" / "nvcc").write_text("#!/bin/sh\n")
    (real / "bin" / "nvcc").chmod(0o755)
    wrappers = tmp_path / "wrappers"
    wrappers.mkdir()
    (wrappers / "nvcc").write_text(f'#!/bin/sh\nexec {real}/bin/nvcc "$@"\n')
    (wrappers / "nvcc").chmod(0o755)
    for var in ("CUDA_HOME", "CUDA_PATH", "NVCC"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("PATH", str(wrappers))
    assert find_toolkit().root == real.resolve()


def test_no_compiler_is_named(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_HOME", str(_fake_toolkit(tmp_path / "tk")))
    monkeypatch.setenv("CXX", "no-such-compiler")
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(MepgenError, match=r"host C\+\+ compiler"):
        build_injector()


def test_compile_error_names_the_toolkit_and_the_error(tmp_path, monkeypatch, cache):
    if not build_mod.shutil.which("g++") and not build_mod.shutil.which("c++"):
        pytest.skip("needs a host C++ compiler")
    monkeypatch.setenv("CUDA_HOME", str(_fake_toolkit(tmp_path / "tk", cuda_h="#define CUDA_VERSION 12040\n#error broken toolkit\n")))
    with pytest.raises(MepgenError, match=r"does not compile against CUDA 12.4 .*error"):
        build_injector()
    assert not list((cache / "mepgen" / "capture").rglob(LIB_NAME)), "a failed build caches nothing"


def test_compile_command_links_cupti_with_rpath_and_no_libcuda(tmp_path):
    tk = Toolkit(tmp_path, "13.0", tmp_path / "include", tmp_path / "include", tmp_path / "lib64")
    cmd = compile_command(tk, "g++", tmp_path / "out.so")
    assert "-lcupti" in cmd and f"-Wl,-rpath,{tmp_path / 'lib64'}" in cmd and "-shared" in cmd
    assert "-lcuda" not in cmd and "-fvisibility=hidden" in cmd
    assert cmd.count(f"-I{tmp_path / 'include'}") == 1


def _selftest(lib, plan_path: Path, mangled: str) -> tuple[int, dict]:
    buf = ctypes.create_string_buffer(16384)
    rc = lib.mepgen_capture_selftest(str(plan_path).encode(), mangled.encode(), buf, len(buf))
    return rc, json.loads(buf.value.decode())


@pytest.mark.nvcc
def test_injector_reads_the_python_plan_and_matches_names(injector, heatcg_extracted, tmp_path):
    from mepgen.capture.plan import RunPlan
    app, inv = heatcg_extracted
    lib = ctypes.CDLL(str(injector.path))
    step = make_plan(choose_kernel(inv, "heat::diffuse_step"), tmp_path / "out", app_root=app, launch=3)
    spmv = make_plan(choose_kernel(inv, "cg::spmv_csr"), tmp_path / "out", app_root=app, longest=True)
    plan = RunPlan((tmp_path / "out").resolve(), [step, spmv], after_ms=12.5, max_bytes=1 << 20, exit_after=True)
    rc, got = _selftest(lib, plan.write(tmp_path / "plan.txt"), "_ZN4heat12diffuse_stepEPKfPfNS_4GridEff")
    assert rc == 0 and got["error"] == ""
    assert got["out"] == str(tmp_path / "out")
    assert (got["after_ms"], got["max_bytes"], got["exit_after"], got["scan_depth"]) == (12.5, 1 << 20, True, 2)
    t0, t1 = got["targets"]
    assert t0["kernel"] == "heat::diffuse_step" and t0["launch"] == 3 and not t0["longest"]
    assert t0["params"] == [["pointer", "u", False], ["pointer", "u_new", False], ["value", "g", True],
                            ["value", "alpha", False], ["value", "dt", False]]
    assert t0["constants"] == [["heat::c_stencil", "_ZN4heat9c_stencilE", "c_stencil", "heat::c_stencil"]]
    assert t1["kernel"] == "cg::spmv_csr" and t1["longest"]
    assert got["demangled"] == "heat::diffuse_step(float const*, float*, heat::Grid, float, float)"
    assert got["base"] == "heat::diffuse_step" and got["match"] == 0
    assert _selftest(lib, tmp_path / "plan.txt", "_ZN2cg8spmv_csrEiPKiS1_PKfS3_Pf")[1]["match"] == 1
    # a kernel no target names matches none
    assert _selftest(lib, tmp_path / "plan.txt", "_ZN4heat14apply_boundaryEPfiiNS_12BoundaryKindEf")[1]["match"] == -1


@pytest.mark.nvcc
def test_a_plan_without_kernels_reads_only_for_gpu_times(injector, tmp_path):
    from mepgen.capture.plan import RunPlan
    lib = ctypes.CDLL(str(injector.path))
    rc, got = _selftest(lib, RunPlan(tmp_path.resolve(), []).write(tmp_path / "p.txt"), "_Z1kv")
    assert rc == 1 and got["error"] == "the plan names no kernel"
    rc, got = _selftest(lib, RunPlan(tmp_path.resolve(), [], gpu_times_only=True).write(tmp_path / "q.txt"), "_Z1kv")
    assert rc == 0 and got["error"] == "" and got["targets"] == [] and got["match"] == -1


@pytest.mark.nvcc
def test_injector_matches_template_instantiations(injector, heatcg_extracted, tmp_path):
    _, inv = heatcg_extracted
    lib = ctypes.CDLL(str(injector.path))
    float_axpy, double_axpy = "_ZN2cg4axpyIfEEviT_PKS1_PS1_", "_ZN2cg4axpyIdEEviT_PKS1_PS1_"
    cases = {"cg::axpy": (True, True), "cg::axpy<float>": (True, False), "cg::axpy< double >": (False, True),
             float_axpy: (True, False)}
    for name, (want_f, want_d) in cases.items():
        path = make_plan(choose_kernel(inv, name), tmp_path, app_root=None).write(tmp_path / "p.txt")
        rc, got_f = _selftest(lib, path, float_axpy)
        assert rc == 0 and (got_f["match"] == 0) is want_f, name
        assert (_selftest(lib, path, double_axpy)[1]["match"] == 0) is want_d, name
    assert got_f["args"] == "float" and got_f["demangled"] == "void cg::axpy<float>(int, float, float const*, float*)"


@pytest.mark.nvcc
def test_injector_rejects_a_bad_plan(injector, tmp_path):
    lib = ctypes.CDLL(str(injector.path))
    (tmp_path / "bad.txt").write_text("mepgen-capture-plan 2\nout\t/x\nbogus\t1\n")
    rc, got = _selftest(lib, tmp_path / "bad.txt", "_Z1kv")
    assert rc == 1 and "unknown key 'bogus'" in got["error"]
    (tmp_path / "t.txt").write_text("mepgen-capture-plan 2\nout\t/x\nparam\t0\t0\tvalue\t0\tn\n")
    assert "no target 0" in _selftest(lib, tmp_path / "t.txt", "_Z1kv")[1]["error"]
    (tmp_path / "none.txt").write_text("mepgen-capture-plan 2\nout\t/x\n")
    assert "names no kernel" in _selftest(lib, tmp_path / "none.txt", "_Z1kv")[1]["error"]
    (tmp_path / "old.txt").write_text("mepgen-capture-plan 1\n")
    assert "not a version-2" in _selftest(lib, tmp_path / "old.txt", "_Z1kv")[1]["error"]
    assert "cannot open" in _selftest(lib, tmp_path / "missing.txt", "_Z1kv")[1]["error"]
