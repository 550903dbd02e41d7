"""Capture from the real example application on a GPU: a data-dependent CSR SpMV, a stencil with __constant__
data, and the refusals a user meets (byte limit, a launch that never comes)."""
from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from mepgen.capture.convert import load_manifest

pytestmark = [pytest.mark.gpu, pytest.mark.nvcc]


@pytest.fixture(scope="module")
def built_app(tmp_path_factory):
    from conftest import copy_example
    from mepgen.extract import ExtractOptions, extract

    app = copy_example("heatcg", tmp_path_factory.mktemp("capture_gpu"))
    r = subprocess.run(["make", "-s", "-j8", "NVCCFLAGS=-O3 -std=c++17 -arch=sm_90 -lineinfo -Iinclude -DNDEBUG "
                        "-DNX=512 -DNY=512 -DMAT_N=1024"], cwd=app, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    extract(app, ExtractOptions(jobs=2))
    return app


def _capture(app, *args):
    from mepgen.cli import main
    return CliRunner().invoke(main, ["capture", *args, "-C", str(app), "--", str(app / "build" / "heatcg"),
                                     "--steps", "4"], catch_exceptions=False)


def test_spmv_capture_holds_the_launch_inputs_and_outputs(built_app):
    r = _capture(built_app, "cg::spmv_csr", "--launch", "3")
    assert r.exit_code == 0, r.output
    cap = built_app / ".mepgen" / "meps" / "cg.spmv_csr" / "data" / "captured"
    m = load_manifest(cap)
    p = {q["name"]: q for q in m["params"]}
    n = p["nrows"]["value"]
    assert n == 512 * 512 and m["block"] == [256, 1, 1] and m["grid"][0] == (n + 255) // 256
    b = {k: np.load(cap / "before" / f"{k}.npy") for k in ("row_ptr", "col_idx", "vals", "x")}
    assert b["row_ptr"][0] == 0 and b["row_ptr"][n] == b["col_idx"].size == b["vals"].size
    assert p["y"]["written"] and not p["vals"]["written"] and not p["x"]["written"]
    rows = np.repeat(np.arange(n), np.diff(b["row_ptr"][:n + 1]))
    want = np.zeros(n)
    np.add.at(want, rows, b["vals"].astype(np.float64) * b["x"][b["col_idx"]].astype(np.float64))
    got = np.load(cap / "after" / "y.npy")[:n]
    assert np.allclose(got, want, rtol=1e-4, atol=1e-5)
    # the launch's own GPU time (activity record) is there, shorter than its event pair, and every launch of the
    # kernel in the run is counted
    assert 0 < m["app_gpu_ms"] <= m["kernel_ms"]
    assert m["app_gpu"]["launches"] >= 4 and m["app_gpu"]["min_ms"] <= m["app_gpu_ms"] <= m["app_gpu"]["max_ms"]


def test_stencil_capture_records_constants_and_struct_arguments(built_app):
    r = _capture(built_app, "heat::diffuse_step", "--launch", "1", "--exit-after")
    assert r.exit_code == 0, r.output
    m = load_manifest(built_app / ".mepgen" / "meps" / "heat.diffuse_step" / "data" / "captured")
    (c,) = m["constants"]
    assert c["name"] == "heat::c_stencil" and c["dtype"] == "float32" and c["count"] == 5
    g = next(q for q in m["params"] if q["name"] == "g")
    assert bytes.fromhex(g["bytes_hex"])[:8] == np.array([512, 512], np.int32).tobytes()
    assert m["block"] == [32, 8, 1] and m["app"]["exited_after_capture"] is True


def test_refusals_on_a_real_run(built_app):
    r = _capture(built_app, "cg::spmv_csr", "--max-bytes", "1K")
    assert r.exit_code == 3 and "more than the limit of 1024 (raise it with --max-bytes)" in r.output
    r = _capture(built_app, "analysis::dense_matvec", "--launch", "5")
    assert r.exit_code == 3 and "launched 1 time(s), so there is no launch 5" in r.output


def test_one_run_records_several_kernels_and_their_meps_reproduce_the_launches(built_app):
    import json
    from mepgen.capture.convert import load_array
    from conftest import run_mepgen
    r = run_mepgen("capture", "--kernels", "cg::spmv_csr,heat::diffuse_step,cg::dot", "--launch", "1", "--use",
                   "--json", "-C", built_app, "--", built_app / "build" / "heatcg", "--steps", "4")
    assert r.returncode == 0, r.stdout + r.stderr
    got = {o["kernel"]: o for o in json.loads(r.stdout)}       # the application's output is on stderr
    for name in ("cg::spmv_csr", "heat::diffuse_step", "cg::dot"):
        o = got[name]
        assert o["outcome"] == "captured" and o["complete"], o
        mep = Path(o["mep"])
        assert subprocess.run(["make", "-s"], cwd=mep, capture_output=True, timeout=600).returncode == 0
        assert subprocess.run(["./mep", "--out", "data/repro"], cwd=mep, capture_output=True, timeout=120).returncode == 0
        m = load_manifest(mep / "data" / "captured")
        for p in m["params"]:
            if p.get("kind") == "buffer" and p.get("after"):
                want = load_array(mep / "data" / "captured", p["after"])
                have = np.load(mep / "data" / "repro" / f"{p['name']}.npy")
                # within the float tolerance of a reordered sum (cg::dot accumulates with atomics)
                assert np.allclose(have, want, rtol=1e-4, atol=1e-5), (name, p["name"])
