"""examples/dense: mepgen extracts every kernel, cuts every MEP without a todo, and each MEP builds with
nvcc (the app itself too, with its compile_commands.json target)."""
from __future__ import annotations

import json
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest
import yaml

from conftest import copy_example
from mepgen import mepbuild
from mepgen.spec import load_spec

KERNELS = {"matmul", "gemm_tn", "syrk_lower", "smooth9", "diffuse7", "conv1d_taps", "lower_solve"}


@pytest.fixture(scope="module")
def dense(tmp_path_factory):
    app = copy_example("dense", tmp_path_factory.mktemp("dense"))
    ext = subprocess.run(["mepgen", "extract", "--json", str(app)], capture_output=True, text=True)
    mep = subprocess.run(["mepgen", "mep", "--all", "-C", str(app)], capture_output=True, text=True)
    return app, ext, mep


def test_extract_and_mep_need_no_person(dense):
    app, ext, mep = dense
    assert ext.returncode == 0, ext.stderr
    inv = json.loads((app / ".mepgen" / "inventory.json").read_text())
    assert inv["skipped"] == [] and {k["name"] for k in inv["kernels"]} == KERNELS     # main.cu parses too
    assert mep.returncode == 0, mep.stderr
    dirs = {d.name for d in (app / ".mepgen" / "meps").iterdir()}
    assert dirs == KERNELS
    for d in dirs:
        spec = load_spec(app / ".mepgen" / "meps" / d / "mep.yaml")
        assert spec.todo == [], (d, spec.todo)


def test_sizes_come_from_the_macros(dense):
    app, _, _ = dense
    meps = app / ".mepgen" / "meps"
    mm = load_spec(meps / "matmul" / "mep.yaml")
    assert {p.name: p.value for p in mm.params if p.role == "scalar"} == {"m": "MAT_M", "n": "MAT_N", "k": "MAT_K"}
    assert mm.param("C").role == "out" and mm.param("C").count == "MAT_M * MAT_N"
    syrk = load_spec(meps / "syrk_lower" / "mep.yaml")
    assert syrk.param("C").role == "inout" and syrk.sizes["SYRK_N"] == 1024
    vol = load_spec(meps / "diffuse7" / "mep.yaml")
    assert vol.param("vol").value == "Volume{VOL_NX, VOL_NY, VOL_NZ, 0.1f}"
    assert vol.launch.block == ["VOL_BX", "VOL_BY", "VOL_BZ"]
    conv = load_spec(meps / "conv1d_taps" / "mep.yaml")
    assert [c.name for c in conv.constants] == ["c_taps"] and conv.param("y").count == "SIG_N - FILT_W + 1"
    raw = yaml.safe_load((meps / "lower_solve" / "mep.yaml").read_text())
    assert raw["params"][2]["role"] == "inout"            # X is read (earlier rows) and written


def _build(d):
    spec = load_spec(d / "mep.yaml")
    r = subprocess.run(mepbuild.nvcc_command(spec, d, d / "kernel.cu", d / "mep"), capture_output=True, text=True,
                       timeout=300)
    return d.name, r.returncode, r.stderr[-2000:]


@pytest.mark.nvcc
def test_every_dense_mep_compiles(dense):
    app, _, _ = dense
    dirs = sorted((app / ".mepgen" / "meps").iterdir())
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(_build, dirs))
    failed = {name: err for name, rc, err in results if rc != 0}
    assert not failed, failed
    assert all((d / "mep").is_file() for d in dirs)


@pytest.mark.nvcc
def test_app_builds_and_writes_its_compilation_database(tmp_path):
    app = copy_example("dense", tmp_path)
    r = subprocess.run(["make", "-j4", "ARCH=sm_90"], cwd=app, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    assert (app / "build" / "dense").is_file()
    subprocess.run(["make", "compile_commands.json"], cwd=app, check=True, capture_output=True)
    db = json.loads((app / "compile_commands.json").read_text())
    assert sorted(e["file"].split("/")[-1] for e in db) == ["blas3.cu", "main.cu", "signal.cu", "solve.cu",
                                                            "stencils.cu"]
    assert all("-Iinclude" in e["arguments"] for e in db)
