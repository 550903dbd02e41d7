"""datagen: deterministic, correctly typed inputs that respect the generators' constraints."""
from pathlib import Path

import numpy as np
import pytest

from mepgen import datagen, mepbuild
from mepgen.errors import MepgenError
from mepgen.spec import load_spec

SPEC = """\
version: 1
kernel: {name: cg::spmv, id: cg.spmv, source: src/cg.cu, source_sha256: abc, start_byte: 0, end_byte: 10}
sizes: {NROWS: 1000, NNZ: 4999, NBINS: 16}
params:
  - {name: nrows, role: scalar, ctype: int, dtype: int32, value: NROWS}
  - {name: row_ptr, role: in, ctype: const int *, dtype: int32, count: NROWS + 1,
     init: {kind: csr_row_ptr, rows: NROWS, nnz: NNZ}}
  - {name: col_idx, role: in, ctype: const int *, dtype: int32, count: NNZ, init: {kind: index, low: 0, high: NROWS}}
  - {name: x, role: in, ctype: const float *, dtype: float32, count: NROWS, init: {kind: uniform, low: -1, high: 1}}
  - {name: h, role: in, ctype: const __half *, dtype: float16, count: 8, init: {kind: normal, mean: 0, std: 1}}
  - {name: bins, role: inout, ctype: unsigned int *, dtype: uint32, count: NBINS, init: {kind: zeros}}
  - {name: k, role: in, ctype: const long long *, dtype: int64, count: 4, init: {kind: uniform, low: -3, high: 3}}
  - {name: y, role: out, ctype: float *, dtype: float32, count: NROWS}
constants:
  - {name: analysis::c_range, ctype: "float[2]", dtype: float32, count: 2, init: {kind: values, values: [0.0, 1.0]}}
  - {name: heat::c_grid, ctype: heat::Grid, value: "heat::Grid{NX, NY, 1.0f, 1.0f}"}
launch: {grid: ["(NROWS + 255) / 256"], block: [256]}
build: {arch: sm_90, std: c++17, defines: [NDEBUG], nvcc_flags: [-O3]}
"""


@pytest.fixture
def spec(tmp_path):
    path = tmp_path / "mep.yaml"
    path.write_text(SPEC)
    return load_spec(path)


def test_inputs_are_deterministic_per_seed_and_differ_across_seeds(spec, tmp_path):
    a = datagen.make_inputs(spec, tmp_path, 7, tmp_path / "a")
    b = datagen.make_inputs(spec, tmp_path, 7, tmp_path / "b")
    c = datagen.make_inputs(spec, tmp_path, 8, tmp_path / "c")
    for name in a:
        assert (tmp_path / "a" / f"{name}.npy").read_bytes() == (tmp_path / "b" / f"{name}.npy").read_bytes()
    assert not np.array_equal(a["x"], c["x"])


def test_files_cover_inputs_and_constants_only(spec, tmp_path):
    datagen.make_inputs(spec, tmp_path, 1, tmp_path / "in")
    names = sorted(p.name for p in (tmp_path / "in").iterdir())
    # outputs have no input file; a constant given by a C++ value is set by the harness, not by a file
    assert names == ["bins.npy", "col_idx.npy", "const.analysis.c_range.npy", "h.npy", "k.npy",
                     "row_ptr.npy", "x.npy"]


def test_generators_respect_their_constraints(spec, tmp_path):
    a = datagen.make_inputs(spec, tmp_path, 3, tmp_path / "in")
    rp = a["row_ptr"]
    assert rp.dtype == np.int32 and rp.shape == (1001,)
    assert rp[0] == 0 and rp[-1] == 4999 and np.all(np.diff(rp) >= 0)
    assert a["col_idx"].min() >= 0 and a["col_idx"].max() < 1000
    assert a["x"].dtype == np.float32 and -1 <= a["x"].min() and a["x"].max() < 1
    assert a["h"].dtype == np.float16
    assert a["bins"].dtype == np.uint32 and not a["bins"].any()
    assert a["k"].dtype == np.int64 and a["k"].min() >= -3 and a["k"].max() <= 3
    assert a["const.analysis.c_range"].tolist() == [0.0, 1.0]


def test_banded_indices_stay_near_their_diagonal(spec, tmp_path):
    """CSR column indices with a band: each nonzero's column within +-band of its row's diagonal (rows of
    near-equal length, so nonzero k sits in row about k * NROWS / NNZ), clipped to [0, NROWS)."""
    col = spec.param("col_idx")
    col.init.args["band"] = "NROWS / 100"
    c = datagen.make_inputs(spec, tmp_path, 5, tmp_path / "in")["col_idx"]
    centre = np.arange(4999) * 1000 // 4999
    assert c.dtype == np.int32 and c.min() >= 0 and c.max() < 1000
    assert np.abs(c.astype(np.int64) - centre).max() <= 10
    assert len(np.unique(c - centre)) > 15          # offsets spread over the band, not one diagonal
    col.init.args["band"] = -1
    with pytest.raises(MepgenError, match="band -1 is negative"):
        datagen.make_inputs(spec, tmp_path, 5, tmp_path / "in2")


def test_file_init_is_checked_against_the_spec(spec, tmp_path):
    np.save(tmp_path / "x.npy", np.arange(10, dtype=np.float64))
    x = spec.param("x")
    x.init.kind, x.init.args = "file", {"path": "x.npy"}
    with pytest.raises(MepgenError, match="holds float64, the spec says float32"):
        datagen.make_inputs(spec, tmp_path, 1, tmp_path / "in")
    np.save(tmp_path / "x.npy", np.ones(1000, dtype=np.float32))
    assert datagen.make_inputs(spec, tmp_path, 1, tmp_path / "in")["x"].sum() == 1000


def test_const_file_name_replaces_scope_separators():
    assert datagen.const_file_name("heat::c_grid") == "const.heat.c_grid.npy"


def test_nvcc_command_follows_the_protocol(spec, tmp_path):
    cmd = mepbuild.nvcc_command(spec, tmp_path, tmp_path / "v1.cu", tmp_path / "bin")
    assert cmd[1:4] == ["-std=c++17", "-arch=sm_90", "-O3"]
    assert "-DNDEBUG" in cmd and "-DMEPGEN_SIZE_NROWS=1000" in cmd and "-DMEPGEN_SIZE_NNZ=4999" in cmd
    assert f'-DMEP_KERNEL_FILE="{(tmp_path / "v1.cu").resolve()}"' in cmd
    assert cmd[-4:] == [f"-I{tmp_path.resolve()}", str(tmp_path.resolve() / "harness.cu"), "-o", str(tmp_path / "bin")]
