"""Kernel chains (`mepgen mep --chain`): an earlier launch whose output the target reads runs first in the MEP.

On examples/heatcg, `axpy<float>(n, -1.0f, Ap, r)` at src/cg.cu:197 reads `Ap`, which
`spmv_csr(n, A.row_ptr, A.col_idx, A.vals, x, Ap)` at src/cg.cu:194 wrote just before.
"""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from click.testing import CliRunner

from mepgen import mepbuild
from mepgen.cli import main
from mepgen.errors import MepgenError
from mepgen.evaluate import rules
from mepgen.evaluate.devices import resolve_backend
from mepgen.extract import ExtractOptions, extract
from mepgen.spec import Init, load_spec

from conftest import copy_example

SIZES = ["--size", "N=4096", "--size", "NNZ=20480"]


@pytest.fixture(scope="module")
def chained(tmp_path_factory):
    """heatcg extracted, axpy cut with --chain (small sizes, no todo left)."""
    app = copy_example("heatcg", tmp_path_factory.mktemp("chain"))
    extract(app, ExtractOptions(jobs=2))
    r = CliRunner().invoke(main, ["mep", "cg::axpy", "--chain", "-C", str(app), *SIZES])
    assert r.exit_code == 0, r.output
    return app, app / ".mepgen" / "meps" / "cg.axpy", r.output


def mep_yaml(d):
    return (d / "mep.yaml").read_text()


def test_axpy_is_fed_by_spmv_and_the_chain_is_written(chained):
    app, d, output = chained
    s = load_spec(d / "mep.yaml")
    assert [(c.kernel, c.callee, c.site) for c in s.chain] == [("cg::spmv_csr", "cg::spmv_csr", "src/cg.cu:194")]
    step = s.chain[0]
    assert step.grid == ["(N + BLOCK_SIZE - 1) / BLOCK_SIZE"] and step.block == ["BLOCK_SIZE"]
    assert step.shared_mem == "0"
    # one argument per spmv_csr parameter: the shared size symbol, four chain buffers, and axpy's x
    assert [(a.name, a.role, a.dtype, a.buffer, a.value) for a in step.args] == [
        ("nrows", "scalar", "int32", None, "N"),
        ("row_ptr", "in", "int32", "spmv_csr_row_ptr", None),
        ("col_idx", "in", "int32", "spmv_csr_col_idx", None),
        ("vals", "in", "float32", "spmv_csr_vals", None),
        ("x", "in", "float32", "spmv_csr_x", None),
        ("y", "out", "float32", "x", None),
    ]
    assert [(b.name, b.dtype, b.count, b.init.to_dict()) for b in s.buffers] == [
        ("spmv_csr_row_ptr", "int32", "N + 1", {"kind": "csr_row_ptr", "rows": "N", "nnz": "NNZ"}),
        ("spmv_csr_col_idx", "int32", "NNZ", {"kind": "index", "low": 0, "high": "N", "band": 64}),
        ("spmv_csr_vals", "float32", "NNZ", {"kind": "uniform", "low": -1.0, "high": 1.0}),
        ("spmv_csr_x", "float32", "N", {"kind": "uniform", "low": -1.0, "high": 1.0}),
    ]
    # the fed input says so; the other input is generated as before
    assert s.param("x").init == Init("chain", {"by": "cg::spmv_csr"})
    assert s.param("y").init.kind == "uniform" and s.param("y").role == "inout"
    assert [p.name for p in s.inputs] == ["y"] and [p.name for p in s.fed] == ["x"]
    # spmv_csr's row count is axpy's `n` (the same host value): one symbol; NNZ joins the sizes
    assert s.sizes == {"BLOCK_SIZE": 256, "N": 4096, "NNZ": 20480} and s.todo == []
    assert s.launch.callee == "cg::axpy<float>"
    assert "chain: cg::spmv_csr<<<" in output and "computes x" in output


def test_kernel_file_holds_the_feeder_before_the_target_once(chained):
    app, d, _ = chained
    text = (d / "kernel.cu").read_text()
    assert text.count("void spmv_csr(") == 1 and text.count("void axpy(") == 1
    assert text.index("void spmv_csr(") < text.index("void axpy(")
    src = (app / "src" / "cg.cu").resolve()
    assert f'#line 24 "{src}"' in text            # spmv_csr's own line in the application
    # the target is still the last definition, byte for byte (patch splices it back by extent)
    kernel = (app / "src" / "cg.cu").read_bytes()
    s = load_spec(d / "mep.yaml")
    assert kernel[s.kernel.start_byte:s.kernel.end_byte].decode() in text.rsplit("#line", 1)[1]


def test_datagen_writes_chain_buffers_and_not_fed_inputs(chained):
    _, d, _ = chained
    files = sorted(f.name for f in (d / "data" / "in").iterdir())
    assert files == ["spmv_csr_col_idx.npy", "spmv_csr_row_ptr.npy", "spmv_csr_vals.npy", "spmv_csr_x.npy", "y.npy"]
    row_ptr = np.load(d / "data" / "in" / "spmv_csr_row_ptr.npy")
    assert row_ptr.dtype == np.int32 and row_ptr.size == 4097 and row_ptr[0] == 0 and row_ptr[-1] == 20480
    col = np.load(d / "data" / "in" / "spmv_csr_col_idx.npy")
    assert col.min() >= 0 and col.max() < 4096


def test_without_chain_the_feeder_is_only_a_note(heatcg_meps):
    app, result = heatcg_meps
    note = "`x` is fed by cg::spmv_csr at src/cg.cu:194 (its `y`); `mepgen mep --chain` runs it in the MEP"
    assert note in result.output
    d = app / ".mepgen" / "meps" / "cg.axpy"
    assert f"# {note}" in mep_yaml(d)
    s = load_spec(d / "mep.yaml")
    assert s.chain == [] and s.buffers == [] and s.param("x").init.kind == "uniform"
    assert not (d / "data").exists()          # sizes.N is a placeholder todo: nothing is allocated yet


def test_kernels_without_a_feeder(heatcg_meps):
    app, result = heatcg_meps
    for kid in ("cg.spmv_csr", "cg.dot"):       # the first launch of cg_solve; dot(n, b, b, d_dot) reads b only
        text = mep_yaml(app / ".mepgen" / "meps" / kid)
        assert "fed by" not in text and "chain" not in text
    # xpay(n, r, beta, p): r was last written by axpy, which also reads it (inout): not chained, said why
    text = mep_yaml(app / ".mepgen" / "meps" / "cg.xpay")
    assert "`x` (r) is written by cg::axpy at src/cg.cu:244 as inout" in text and "fed by" not in text


def test_chain_flag_without_a_feeder_says_so(chained):
    app, _, _ = chained
    r = CliRunner().invoke(main, ["mep", "cg::spmv_csr", "--chain", "-C", str(app), "--size", "NROWS=64",
                                  "--size", "NNZ=320"])
    assert r.exit_code == 0, r.output
    assert "--chain: no earlier launch feeds this kernel's inputs" in r.output
    assert load_spec(app / ".mepgen" / "meps" / "cg.spmv_csr" / "mep.yaml").chain == []


MEMCPY_BETWEEN = """
    #include <cuda_runtime.h>
    __global__ void produce(int n, float* out) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) out[i] = i; }
    __global__ void consume(int n, const float* in, float* out)
    {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) out[i] = 2.0f * in[i];
    }
    #define N 4096
    int main()
    {
        float *tmp, *res, *other;
        float host[N];
        cudaMalloc(&tmp, N * sizeof(float));
        cudaMalloc(&res, N * sizeof(float));
        cudaMalloc(&other, N * sizeof(float));
        produce<<<(N + 255) / 256, 256>>>(N, tmp);
        produce<<<(N + 255) / 256, 256>>>(N, other);
        cudaMemcpy(host, other, N * sizeof(float), cudaMemcpyDeviceToHost);   // reads other: no write
        cudaMemcpy(tmp, host, N * sizeof(float), cudaMemcpyHostToDevice);     // overwrites tmp
        consume<<<(N + 255) / 256, 256>>>(N, tmp, res);
        consume<<<(N + 255) / 256, 256>>>(N, other, res);
        return 0;
    }
"""


def small_app(tmp_path, source):
    app = tmp_path / "app"
    (app / "src").mkdir(parents=True)
    (app / "src" / "k.cu").write_text(textwrap.dedent(source))
    extract(app, ExtractOptions(jobs=1))
    return app


def test_an_intervening_cudaMemcpy_breaks_the_chain(tmp_path):
    app = small_app(tmp_path, MEMCPY_BETWEEN)
    r = CliRunner().invoke(main, ["mep", "consume", "--chain", "-C", str(app)])
    assert r.exit_code == 0, r.output
    s = load_spec(app / ".mepgen" / "meps" / "consume" / "mep.yaml")
    assert s.chain == [] and s.param("in").init.kind == "uniform"
    assert "`in` (tmp) is written by produce at src/k.cu:17, but `tmp` is used at src/k.cu:20 " \
           "(`cudaMemcpy(tmp, host, N * sizeof(float), cudaMemcpyHostToDevice)`) in between: not chained" in r.output


def test_a_copy_that_only_reads_the_variable_does_not_break_it(tmp_path):
    # the second consume site reads `other`; only its first site is used by the MEP, so check detection directly
    from mepgen.inventory import load
    from mepgen.mep.assemble import assemble
    from mepgen.mep.chain import detect
    from mepgen.mep.project import Project
    from mepgen.mep.symbols import Symbols
    app = small_app(tmp_path, MEMCPY_BETWEEN)
    inv = load(app / ".mepgen" / "inventory.json")
    project = Project(app, inv["translation_units"])
    k = next(k for k in inv["kernels"] if k["qualified_name"] == "consume")
    site = k["launch_sites"][1]
    symbols = Symbols()
    spec, _ = assemble(project, inv, k, {}, detect_gpu=False, site=site, symbols=symbols)
    found = detect(project, inv, k, spec, site, symbols, {})
    assert [(f.kernel["qualified_name"], f.site["line"], f.feeds) for f in found.feeders] == \
        [("produce", 18, {"in": "out"})]


# --- a hand-written chain is validated strictly -------------------------------------------------------

def _edited(d, old, new):
    text = mep_yaml(d)
    assert old in text
    return text.replace(old, new, 1)


def _line_of(text, needle):
    return next(i for i, l in enumerate(text.splitlines(), 1) if needle in l)


def test_unknown_buffer_name_is_an_error_naming_key_and_line(chained):
    _, d, _ = chained
    text = _edited(d, "buffer: spmv_csr_vals}", "buffer: spmv_vals}")
    with pytest.raises(MepgenError) as e:
        load_spec(d / "mep.yaml", text)
    line = _line_of(text, "buffer: spmv_vals}")
    assert f"mep.yaml:{line}: chain[0].args[3].buffer: no parameter or chain buffer named 'spmv_vals'" in str(e.value)


def test_wrong_dtype_is_an_error_naming_key_and_line(chained):
    _, d, _ = chained
    text = _edited(d, "dtype: int32, buffer: spmv_csr_col_idx}", "dtype: int32, buffer: spmv_csr_vals}")
    with pytest.raises(MepgenError) as e:
        load_spec(d / "mep.yaml", text)
    line = _line_of(text, "name: col_idx")
    assert f"mep.yaml:{line}: chain[0].args[2].dtype: 'col_idx' is int32 but 'spmv_csr_vals' holds float32" \
        in str(e.value)


@pytest.mark.parametrize("old,new,message", [
    ("name: nrows, role: scalar, ctype: int, dtype: int32, value: N}", "name: nrows, role: scalar, ctype: int, dtype: int32}",
     "chain[0].args[0]: scalar argument 'nrows' needs a 'value'"),
    ("init: {kind: chain, by: 'cg::spmv_csr'}", "init: {kind: uniform, low: -1, high: 1}",
     "chain[0].args[5].buffer: cg::spmv_csr writes the target's 'x': give it init {kind: chain"),
    ("init: {kind: chain, by: 'cg::spmv_csr'}", "init: {kind: chain, by: 'cg::other'}",
     "chain[0].args[5].buffer: cg::spmv_csr writes the target's 'x'"),
    ("count: N, init: {kind: uniform, low: -1.0, high: 1.0}}", "count: N, init: {kind: chain, by: 'cg::spmv_csr'}}",
     "params[3].init.by: no chain step 'cg::spmv_csr' writes 'y'"),
    ("shared_mem: '0'}\n    args:", "shared_mem: '0', stream: s}\n    args:", "chain[0].launch.stream"),
    ("launch: {grid: [(N + BLOCK_SIZE - 1) / BLOCK_SIZE]", "launch: {grid: ['(M + 1)']", "chain[0].launch.grid[0]: cannot evaluate"),
])
def test_other_chain_errors(chained, old, new, message):
    _, d, _ = chained
    text = _edited(d, old, new)
    with pytest.raises(MepgenError) as e:
        load_spec(d / "mep.yaml", text)
    assert message in str(e.value) and "mep.yaml:" in str(e.value)


def test_refresh_refuses_a_chain_whose_kernel_is_not_in_kernel_cu(chained, tmp_path):
    import shutil
    app, d, _ = chained
    copy = tmp_path / "app"
    shutil.copytree(app, copy)
    cd = copy / ".mepgen" / "meps" / "cg.axpy"
    kernel = (cd / "kernel.cu").read_text()
    (cd / "kernel.cu").write_text(kernel.replace("void spmv_csr(", "void spmv_renamed("))
    r = CliRunner().invoke(main, ["mep", "cg::axpy", "--refresh", "-C", str(copy)])
    assert r.exit_code != 0
    assert "chain[0].kernel: kernel.cu defines no kernel cg::spmv_csr" in r.output


# --- build, evaluator rules, patch -----------------------------------------------------------------------

@pytest.mark.nvcc
def test_chained_mep_compiles(chained, tmp_path):
    _, d, _ = chained
    spec = load_spec(d / "mep.yaml")
    r = subprocess.run(mepbuild.nvcc_command(spec, d, d / "kernel.cu", tmp_path / "mep"), capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    harness = (d / "harness.cu").read_text()
    assert "cg::spmv_csr<<<chain_grid, chain_block, static_cast<size_t>(0), stream>>>(MEPGEN_SIZE_N, " \
           "mep_record_ptr{d_spmv_csr_row_ptr}" in harness
    assert 'fed_dir + "/x.npy"' in harness            # only as the fed file it writes, never loaded
    assert 'load_input(dir, "x.npy"' not in harness


def test_a_variant_may_not_change_the_chain(chained):
    _, d, _ = chained
    original = (d / "kernel.cu").read_text()
    spec = load_spec(d / "mep.yaml")
    chain = [c.kernel for c in spec.chain]
    target = original.replace("y[i] = a * x[i] + y[i];", "y[i] = fmaf(a, x[i], y[i]);")
    assert rules.check(target, original, chain, spec.kernel.name) == []
    cheat = original.replace("y[row] = sum;", "y[row] = 0.0f;")
    found = rules.check(cheat, original, chain, spec.kernel.name)
    assert len(found) == 1 and "changes cg::spmv_csr, a kernel of the MEP's chain" in found[0].rule


def test_pycuda_refuses_a_chain_and_auto_picks_native(chained):
    from mepgen.evaluate.pycuda_backend import PycudaBackend
    _, d, _ = chained
    spec = load_spec(d / "mep.yaml")
    with pytest.raises(MepgenError, match="unsupported by the pycuda backend: the MEP runs a chain"):
        PycudaBackend(spec, d, d / "build")
    assert resolve_backend("auto", chained=True) == "native"


def _patch(app, *args):
    return subprocess.run([sys.executable, "-m", "mepgen.cli", "patch", *args], cwd=app, capture_output=True,
                          text=True)


def test_patch_splices_only_the_target_of_a_chained_variant(chained, tmp_path):
    app, d, _ = chained
    original = (d / "kernel.cu").read_text()
    v = tmp_path / "variant.cu"
    v.write_text(original.replace("y[i] = a * x[i] + y[i];", "y[i] = fmaf(a, x[i], y[i]);"))
    r = _patch(app, "cg::axpy", "--from", str(v))
    assert r.returncode == 0, r.stderr
    diff = (app / ".mepgen" / "patches" / "cg.axpy.diff").read_text() \
        if (app / ".mepgen" / "patches" / "cg.axpy.diff").is_file() else r.stdout
    changed = [l for l in diff.splitlines() if l.startswith(("+", "-")) and not l.startswith(("+++", "---"))]
    assert changed == ["-        y[i] = a * x[i] + y[i];", "+        y[i] = fmaf(a, x[i], y[i]);"], diff
    v.write_text(original.replace("y[row] = sum;", "y[row] = 2.0f * sum;"))
    r = _patch(app, "cg::axpy", "--from", str(v))
    assert r.returncode != 0
    assert "the variant changes cg::spmv_csr" in r.stderr and "patch changes only cg::axpy" in r.stderr


# --- on a GPU ----------------------------------------------------------------------------------------------

def _spmv(d, data):
    row_ptr = np.load(data / "spmv_csr_row_ptr.npy").astype(np.int64)
    col = np.load(data / "spmv_csr_col_idx.npy")
    vals = np.load(data / "spmv_csr_vals.npy").astype(np.float64)
    x = np.load(data / "spmv_csr_x.npy").astype(np.float64)
    rows = np.repeat(np.arange(row_ptr.size - 1), np.diff(row_ptr))
    return np.bincount(rows, weights=vals * x[col], minlength=row_ptr.size - 1)


@pytest.mark.gpu
@pytest.mark.nvcc
def test_chained_mep_runs_the_feeder_first(chained, tmp_path):
    _, d, _ = chained
    spec = load_spec(d / "mep.yaml")
    exe = tmp_path / "mep"
    r = subprocess.run(mepbuild.nvcc_command(spec, d, d / "kernel.cu", exe), capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    # a second input set for the post-timing re-check: the chain runs again on it
    other = tmp_path / "set2"
    from mepgen import datagen
    datagen.make_inputs(spec, d, 7, other)
    out = tmp_path / "out"
    r = subprocess.run([str(exe), "--data", str(d / "data" / "in"), "--out", str(out), "--time", "--reps", "3",
                        "--warmup", "1", "--check-inputs", "--recheck-data", str(other)],
                       capture_output=True, text=True, timeout=300, cwd=d)
    line = [l for l in r.stdout.splitlines() if l.startswith("MEPGEN_RESULT ")]
    assert r.returncode == 0 and len(line) == 1, r.stdout + r.stderr
    result = json.loads(line[0][len("MEPGEN_RESULT "):])
    assert result["status"] == "ok" and result["kernel"] == "cg::axpy<float>" and len(result["times_ms"]) == 3
    for data, folder in ((d / "data" / "in", out), (other, out / "after")):
        expected = _spmv(d, data)
        fed = np.load(folder / "fed" / "x.npy")
        np.testing.assert_allclose(fed, expected, rtol=1e-5, atol=1e-5)
        # axpy(n, -1, x, y): y_out = y_in - spmv(...)
        y_in = np.load(data / "y.npy").astype(np.float64)
        np.testing.assert_allclose(np.load(folder / "y.npy"), y_in - expected, rtol=1e-5, atol=1e-5)
        # --check-inputs writes the fed input back: axpy did not modify it
        assert np.array_equal(np.load(folder / "in" / "x.npy"), fed)


@pytest.mark.gpu
@pytest.mark.nvcc
def test_mepgen_run_on_a_chained_mep(chained, tmp_path):
    """The evaluator verifies the target on fresh input sets (the chain runs on each) and times it; a variant
    that changes the feeder is rejected by the rules, one that rewrites the target is verified."""
    app, d, _ = chained
    original = (d / "kernel.cu").read_text()
    good, cheat = tmp_path / "good.cu", tmp_path / "cheat.cu"
    good.write_text(original.replace("y[i] = a * x[i] + y[i];", "y[i] = fmaf(a, x[i], y[i]);"))
    cheat.write_text(original.replace("y[row] = sum;", "y[row] = 0.0f;"))
    r = subprocess.run([sys.executable, "-m", "mepgen.cli", "run", "cg::axpy", "--backend", "native", "--json",
                        "--reps", "5", "--rounds", "1", "--variant", str(good), "--variant", str(cheat)],
                       cwd=app, capture_output=True, text=True, timeout=900)
    assert r.returncode == 1, r.stdout + r.stderr       # `mepgen run` exits 1 when a variant fails: the cheat
    out = json.loads(r.stdout)
    assert out["baseline"]["status"] == "ok", out["baseline"]
    by_name = {v["name"]: v for v in out["variants"]}
    assert by_name["good.cu"]["status"] == "ok", by_name["good.cu"]
    assert by_name["cheat.cu"]["status"] == "rejected_by_rules", by_name["cheat.cu"]
