"""`make optimize KERNEL=...` through integrations/make/mepgen.mk and integrations/cmake/Mepgen.cmake."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MEPGEN = f"{sys.executable} -m mepgen.cli"
needs_make = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")


def user_makefile(app: Path) -> None:
    """The application's own Makefile, with the one include line a user adds."""
    mk = app / "Makefile"
    mk.write_text(mk.read_text() + f"\ninclude {ROOT}/integrations/make/mepgen.mk\n")


def make(app: Path, *args: str):
    return subprocess.run(["make", "--no-print-directory", f"MEPGEN={MEPGEN}", *args], cwd=app,
                          capture_output=True, text=True)


@needs_make
def test_make_chain_stops_with_a_clear_line_without_a_kernel(heatcg_copy):
    user_makefile(heatcg_copy)
    r = make(heatcg_copy, "optimize")
    assert r.returncode != 0
    assert "name the kernel: make optimize KERNEL=<name>" in r.stderr


@needs_make
def test_make_mep_then_patch_the_newest_optimize_winner(heatcg_copy):
    user_makefile(heatcg_copy)
    r = make(heatcg_copy, "mepgen-mep", "KERNEL=analysis::dense_matvec")
    assert r.returncode == 0, r.stderr
    mep = heatcg_copy / ".mepgen/meps/analysis.dense_matvec"
    assert (mep / "harness.cu").is_file()
    # what `mepgen optimize` leaves behind: the best variant of a run
    best = heatcg_copy / ".mepgen/runs/analysis.dense_matvec/run-1/best/kernel.cu"
    best.parent.mkdir(parents=True)
    best.write_text((mep / "kernel.cu").read_text().replace(
        "        y[row] = 0;\n        for (int j = 0; j < ncols; ++j) y[row] += A[row * ncols + j] * x[j];",
        "        float acc = 0.0f;\n        for (int j = 0; j < ncols; ++j) acc += A[row * ncols + j] * x[j];\n"
        "        y[row] = acc;"))
    r = make(heatcg_copy, "mepgen-patch", "KERNEL=analysis::dense_matvec")
    assert r.returncode == 0, r.stderr
    assert "+        y[row] = acc;" in r.stdout and "review it" in r.stdout
    original = (heatcg_copy / "src/analysis.cu").read_text()
    r = make(heatcg_copy, "mepgen-patch", "KERNEL=analysis::dense_matvec", "APPLY=1",
             "MEPGEN_PATCH_FLAGS=--no-validate")
    assert r.returncode == 0, r.stderr
    assert "y[row] = acc;" in (heatcg_copy / "src/analysis.cu").read_text()
    r = make(heatcg_copy, "mepgen-revert", "KERNEL=analysis::dense_matvec")
    assert r.returncode == 0, r.stderr
    assert (heatcg_copy / "src/analysis.cu").read_text() == original


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("cmake") is None, reason="needs cmake")
def test_cmake_targets(heatcg_copy, tmp_path):
    cml = heatcg_copy / "CMakeLists.txt"
    cml.write_text(cml.read_text() + f"\ninclude({ROOT}/integrations/cmake/Mepgen.cmake)\nmepgen_add_targets()\n")
    build = tmp_path / "build"
    r = subprocess.run(["cmake", "-S", str(heatcg_copy), "-B", str(build), "-DCMAKE_CUDA_ARCHITECTURES=90",
                        f"-DMEPGEN_EXECUTABLE={MEPGEN}"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    assert (build / "compile_commands.json").is_file()
    env = {**os.environ, "KERNEL": "heat::diffuse_step"}
    r = subprocess.run(["cmake", "--build", str(build), "--target", "mepgen-mep"], capture_output=True, text=True,
                       env=env)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert (heatcg_copy / ".mepgen/meps/heat.diffuse_step/mep.yaml").is_file()
    inv = (heatcg_copy / ".mepgen/inventory.json").read_text()
    assert '"flags_source": "' + str(build / "compile_commands.json") in inv
    r = subprocess.run(["cmake", "--build", str(build), "--target", "optimize"], capture_output=True, text=True,
                       env={k: v for k, v in os.environ.items() if k != "KERNEL"})
    assert r.returncode != 0 and "set KERNEL=<name>" in (r.stdout + r.stderr)


@needs_make
def test_make_optimize_without_a_kernel_runs_the_whole_path_when_the_run_command_is_set(heatcg_copy):
    user_makefile(heatcg_copy)
    r = subprocess.run(["make", "--no-print-directory", "MEPGEN=echo mepgen", "optimize", "MEPGEN_RUN=./heatcg -n 64",
                        "MEPGEN_TUNE_FLAGS=--runs 5"], cwd=heatcg_copy, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert f"mepgen tune -C {heatcg_copy} --runs 5 -- ./heatcg -n 64" in r.stdout
    r = make(heatcg_copy, "mepgen-tune")
    assert r.returncode != 0 and "set the application's run command" in r.stderr
