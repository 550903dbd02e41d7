"""`mepgen mep` on examples/heatcg: the inferred roles, counts, generators, values and launch of every kernel."""
from __future__ import annotations

import pytest

from mepgen.spec import load_spec


def spec(app, kid):
    return load_spec(app / ".mepgen" / "meps" / kid / "mep.yaml")


def table(s):
    """name -> (role, dtype, count or value, init kind)"""
    return {p.name: (p.role, p.dtype, p.value if p.role == "scalar" else p.count, p.init.kind if p.init else None)
            for p in s.params}


def test_all_kernels_get_an_mep_and_the_todos_are_named(heatcg_meps):
    app, result = heatcg_meps
    assert result.exit_code == 3, result.output
    meps = sorted(p.name for p in (app / ".mepgen" / "meps").iterdir() if not p.name.startswith("."))
    assert meps == ["analysis.column_mean", "analysis.dense_matvec", "analysis.histogram", "cg.axpy", "cg.dot",
                    "cg.spmv_csr", "cg.xpay", "heat.apply_boundary", "heat.diffuse_step"]
    # exactly the sizes no launch argument traces to a value are reported, nothing else
    assert "mep.yaml needs a person for: cg::axpy: sizes.N; cg::dot: sizes.N; cg::spmv_csr: sizes.NROWS; " \
           "cg::spmv_csr: sizes.NNZ; cg::xpay: sizes.N" in result.output
    for kid in meps:
        d = app / ".mepgen" / "meps" / kid
        assert {"mep.yaml", "kernel.cu", "harness.cu", "Makefile"} <= {p.name for p in d.iterdir()}


def test_diffuse_step(heatcg_meps):
    app, _ = heatcg_meps
    s = spec(app, "heat.diffuse_step")
    assert table(s) == {
        "u": ("in", "float32", "NX * NY", "uniform"),
        # written only inside the interior: the boundary keeps its input, so the MEP resets it (inout)
        "u_new": ("inout", "float32", "NX * NY", "uniform"),
        "g": ("scalar", None, "heat::Grid{NX, NY, 1.0f, 1.0f}", None),
        "alpha": ("scalar", "float32", "1.0f", None),
        "dt": ("scalar", "float32", "0.2f", None),
    }
    assert s.sizes == {"NX": 2048, "TILE_X": 32, "NY": 2048, "TILE_Y": 8}
    assert s.launch.grid == ["(NX + TILE_X - 1) / TILE_X", "(NY + TILE_Y - 1) / TILE_Y"]
    assert s.launch.block == ["TILE_X", "TILE_Y"] and s.launch.shared_mem == "0"
    assert [(c.name, c.dtype, c.count, c.init.kind) for c in s.constants] == \
        [("heat::c_stencil", "float32", "5", "uniform")]
    assert s.todo == []


def test_apply_boundary_through_cudaLaunchKernel(heatcg_meps):
    app, _ = heatcg_meps
    s = spec(app, "heat.apply_boundary")
    assert table(s) == {
        "u": ("inout", "float32", "NX * NY", "uniform"),
        "nx": ("scalar", "int32", "NX", None), "ny": ("scalar", "int32", "NY", None),
        "kind": ("scalar", None, "heat::BoundaryKind::Dirichlet", None),
        "value": ("scalar", "float32", "0.0f", None),
    }
    assert s.launch.grid == ["((2 * NX + 2 * (NY - 2)) + BLOCK_SIZE - 1) / BLOCK_SIZE"]
    # the struct constant's value is traced to main()'s `grid` through heat_set_constants()
    assert [(c.name, c.value) for c in s.constants] == [("heat::c_grid", "heat::Grid{NX, NY, 1.0f, 1.0f}")]


def test_spmv_csr(heatcg_meps):
    app, _ = heatcg_meps
    s = spec(app, "cg.spmv_csr")
    assert table(s) == {
        "nrows": ("scalar", "int32", "NROWS", None),
        "row_ptr": ("in", "int32", "NROWS + 1", "csr_row_ptr"),
        "col_idx": ("in", "int32", "NNZ", "index"),
        "vals": ("in", "float32", "NNZ", "uniform"),
        "x": ("in", "float32", "NROWS", "uniform"),
        "y": ("out", "float32", "NROWS", None),
    }
    assert s.param("row_ptr").init.args == {"rows": "NROWS", "nnz": "NNZ"}
    # columns within +-sqrt(NROWS) of each row's diagonal (a banded matrix), said in the note
    assert s.param("col_idx").init.args == {"low": 0, "high": "NROWS", "band": 1024}
    assert "within +-1024 of each row's diagonal" in (app / ".mepgen/meps/cg.spmv_csr/mep.yaml").read_text()
    assert s.sizes == {"BLOCK_SIZE": 256, "NROWS": 1 << 20, "NNZ": 5 << 20}
    assert [t.field for t in s.todo] == ["sizes.NROWS", "sizes.NNZ"]
    assert "A.nrows" in s.todo[0].reason


@pytest.mark.parametrize("kid,rows", [
    ("cg.axpy", {"n": ("scalar", "int32", "N", None), "a": ("scalar", "float32", "-1.0f", None),
                 "x": ("in", "float32", "N", "uniform"), "y": ("inout", "float32", "N", "uniform")}),
    ("cg.xpay", {"n": ("scalar", "int32", "N", None), "x": ("in", "float32", "N", "uniform"),
                 "beta": ("scalar", "float32", "float{}", None), "p": ("inout", "float32", "N", "uniform")}),
    ("cg.dot", {"n": ("scalar", "int32", "N", None), "a": ("in", "float32", "N", "uniform"),
                "b": ("in", "float32", "N", "uniform"), "result": ("inout", "float32", "1", "zeros")}),
])
def test_vector_kernels(heatcg_meps, kid, rows):
    app, _ = heatcg_meps
    s = spec(app, kid)
    assert table(s) == rows
    # vector_blocks(n) is a one-line helper: inlined into the launch configuration
    assert s.launch.grid == ["std::max(1, std::min((N + BLOCK_SIZE - 1) / BLOCK_SIZE, 1024))"]
    assert s.size(s.launch.grid[0]) == 1024
    # beta = rr_new / rr is computed at run time: a todo, never a made-up "safe default"
    assert [t.field for t in s.todo] == ["sizes.N"] + (["params[2].value"] if kid == "cg.xpay" else [])


def test_axpy_template_and_dot_shared_memory(heatcg_meps):
    app, _ = heatcg_meps
    axpy, dot = spec(app, "cg.axpy"), spec(app, "cg.dot")
    assert axpy.launch.callee == "cg::axpy<float>" and axpy.kernel.template_args == ["float"]
    assert "<double>" in (app / ".mepgen/meps/cg.axpy/mep.yaml").read_text()   # the other instantiation is noted
    assert dot.launch.shared_mem == "BLOCK_SIZE * sizeof(float)"
    # float atomics reorder the sum: a looser tolerance than plain float32 outputs
    assert (dot.verify.tolerance["result"].rtol, axpy.verify.tolerance["y"].rtol) == (1e-4, 1e-5)


def test_analysis_kernels(heatcg_meps):
    app, _ = heatcg_meps
    assert table(spec(app, "analysis.dense_matvec")) == {
        "A": ("in", "float32", "MAT_N * MAT_N", "uniform"), "x": ("in", "float32", "MAT_N", "uniform"),
        # `y[row] = 0` comes first and every later access is y[row]: an output, not an in/out buffer
        "y": ("out", "float32", "MAT_N", None),
        "nrows": ("scalar", "int32", "MAT_N", None), "ncols": ("scalar", "int32", "MAT_N", None)}
    assert table(spec(app, "analysis.column_mean")) == {
        "A": ("in", "float32", "MAT_N * MAT_N", "uniform"), "mean": ("out", "float32", "MAT_N", None),
        "nrows": ("scalar", "int32", "MAT_N", None), "ncols": ("scalar", "int32", "MAT_N", None)}
    h = spec(app, "analysis.histogram")
    assert table(h) == {"data": ("in", "float32", "NX * NY", "uniform"), "n": ("scalar", "int32", "NX * NY", None),
                        "bins": ("inout", "uint32", "NBINS", "zeros")}
    assert h.launch.grid == ["std::max(1, std::min(((NX * NY) + BLOCK_SIZE - 1) / BLOCK_SIZE, 4096))"]
    assert h.verify.tolerance["bins"].rtol == 0 and h.verify.tolerance["bins"].atol == 0
    # the range main() passes to set_histogram_range(0.0f, kHotTemp) becomes the constant's values
    assert [(c.name, c.init.kind, c.init.args) for c in h.constants] == \
        [("analysis::c_hist_range", "values", {"values": [0.0, 1.0]})]
    assert h.todo == []


def test_kernel_file_is_self_contained_and_keeps_the_kernel_bytes(heatcg_meps):
    app, _ = heatcg_meps
    s = spec(app, "analysis.histogram")
    text = (app / ".mepgen/meps/analysis.histogram/kernel.cu").read_text()
    source = (app / s.kernel.source).read_bytes()[s.kernel.start_byte:s.kernel.end_byte].decode()
    assert source in text
    assert '#include "' not in text                               # no application header
    assert "#define NBINS MEPGEN_SIZE_NBINS\n" in text and "#define NBINS 64" in text  # a size overrides
    assert f'#line 18 "{(app / "src/analysis.cu").resolve()}"' in text
    assert "void compute_histogram" not in text                  # no host code
    assert "namespace analysis {" in text and "bin_index" in text and "clamp_val" in text


def test_default_inputs_are_written(heatcg_meps, tmp_path):
    import numpy as np
    from mepgen import datagen
    app, _ = heatcg_meps
    # spmv_csr's sizes are placeholder todos: its MEP allocates nothing until they are set; the generator
    # makes the inputs its spec describes once they are
    assert not (app / ".mepgen/meps/cg.spmv_csr/data").exists()
    d = tmp_path / "in"
    datagen.make_inputs(spec(app, "cg.spmv_csr"), app / ".mepgen/meps/cg.spmv_csr", 1, d)
    assert sorted(p.name for p in d.iterdir()) == ["col_idx.npy", "row_ptr.npy", "vals.npy", "x.npy"]
    rp = np.load(d / "row_ptr.npy")
    assert rp[0] == 0 and rp[-1] == 5 << 20 and (np.diff(rp) >= 0).all()
    col = np.load(d / "col_idx.npy").astype(np.int64)
    assert col.min() >= 0 and col.max() < 1 << 20
    assert np.abs(col - np.arange(5 << 20) // 5).max() <= 1024                  # banded
    h = app / ".mepgen/meps/analysis.histogram/data/in"
    assert np.load(h / "const.analysis.c_hist_range.npy").tolist() == [0.0, 1.0]
    assert np.load(h / "bins.npy").dtype == np.uint32


def test_tolerances_allow_reordered_sums_but_stay_tight_for_elementwise_kernels(heatcg_meps):
    app, _ = heatcg_meps
    # dense_matvec sums a row in a loop: a reordered sum (warp shuffles, tiles) must pass
    assert (spec(app, "analysis.dense_matvec").verify.tolerance["y"].rtol,
            spec(app, "analysis.dense_matvec").verify.tolerance["y"].atol) == (1e-4, 1e-3)
    # grid-stride element-wise kernels and loop-free stencils keep the tight float32 tolerance
    assert spec(app, "cg.xpay").verify.tolerance["p"].rtol == 1e-5
    assert spec(app, "heat.diffuse_step").verify.tolerance["u_new"].rtol == 1e-5


def test_work_of_a_loop_free_kernel_is_capped_by_its_threads(heatcg_meps):
    app, _ = heatcg_meps
    bnd = spec(app, "heat.apply_boundary")
    # one thread per perimeter cell reads and writes one float: not the whole NX x NY field
    threads = ((2 * 2048 + 2 * (2048 - 2)) + 255) // 256 * 256
    assert bnd.size(bnd.work.bytes) == 8 * threads
    diffuse = spec(app, "heat.diffuse_step")
    # u_new is inout (its border is never written) but never read: 4 bytes read from u, 4 written to u_new
    assert next(p for p in diffuse.params if p.name == "u_new").role == "inout"
    assert diffuse.size(diffuse.work.bytes) == 8 * 2048 * 2048
