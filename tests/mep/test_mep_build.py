"""The example's MEPs build with nvcc exactly as the protocol says, and (with a GPU) run reproducibly."""
from __future__ import annotations

import json
import shlex
import subprocess
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from mepgen import mepbuild
from mepgen.spec import load_spec


def mep_dirs(app):
    return sorted(p for p in (app / ".mepgen" / "meps").iterdir() if not p.name.startswith("."))


def build(d):
    spec = load_spec(d / "mep.yaml")
    cmd = mepbuild.nvcc_command(spec, d, d / "kernel.cu", d / "mep")
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    return d.name, r.returncode, r.stderr[-3000:]


def test_makefile_uses_the_protocol_flags(heatcg_meps):
    app, _ = heatcg_meps
    for d in mep_dirs(app):
        spec = load_spec(d / "mep.yaml")
        line = next(l for l in (d / "Makefile").read_text().splitlines() if l.startswith("FLAGS"))
        assert shlex.split(line.split(":=", 1)[1]) == mepbuild.build_flags(spec)


@pytest.mark.nvcc
def test_every_example_mep_compiles(heatcg_meps):
    app, _ = heatcg_meps
    dirs = mep_dirs(app)
    assert len(dirs) == 9
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(build, dirs))
    failed = {name: err for name, rc, err in results if rc != 0}
    assert not failed, failed
    assert all((d / "mep").is_file() for d in dirs)


def run_mep(d, out, *extra):
    r = subprocess.run([str(d / "mep"), "--data", str(d / "data" / "in"), "--out", str(out), *extra],
                       capture_output=True, text=True, timeout=300, cwd=d)
    lines = [l for l in r.stdout.splitlines() if l.startswith("MEPGEN_RESULT ")]
    assert len(lines) == 1, r.stdout + r.stderr
    return r.returncode, json.loads(lines[0][len("MEPGEN_RESULT "):])


@pytest.mark.gpu
@pytest.mark.nvcc
def test_every_example_mep_runs_reproducibly(heatcg_meps, tmp_path):
    app, _ = heatcg_meps
    dirs = mep_dirs(app)
    with ThreadPoolExecutor(2) as pool:
        assert all(rc == 0 for _, rc, _ in pool.map(build, dirs))
    complete = [d for d in dirs if not load_spec(d / "mep.yaml").todo]   # an MEP with todos has no data/in yet
    assert len(complete) >= 5, [d.name for d in dirs]
    for d in complete:
        spec = load_spec(d / "mep.yaml")
        rc1, res1 = run_mep(d, tmp_path / d.name / "a")
        rc2, res2 = run_mep(d, tmp_path / d.name / "b", "--time", "--reps", "10")
        assert rc1 == rc2 == 0 and res1["status"] == res2["status"] == "ok", (res1, res2)
        assert len(res2["times_ms"]) == 10 and res2["median_ms"] > 0
        for p in spec.outputs:
            a = np.load(tmp_path / d.name / "a" / f"{p.name}.npy")
            b = np.load(tmp_path / d.name / "b" / f"{p.name}.npy")
            after = np.load(tmp_path / d.name / "b" / "after" / f"{p.name}.npy")
            tol = spec.verify.tolerance[p.name]
            assert a.shape == (spec.count(p),) and not np.isnan(a.astype(np.float64)).any()
            assert np.allclose(a, b, rtol=tol.rtol, atol=tol.atol), (d.name, p.name)
            assert np.allclose(a, after, rtol=tol.rtol, atol=tol.atol), (d.name, p.name)


def test_harness_speaks_the_protocol(heatcg_meps):
    app, _ = heatcg_meps
    text = (app / ".mepgen/meps/analysis.histogram/harness.cu").read_text()
    for flag in ("--data", "--out", "--time", "--warmup", "--reps", "--no-flush", "--device", "--check-inputs",
                 "--recheck-data"):
        assert f'"{flag}"' in text
    assert '#include MEP_KERNEL_FILE' in text and 'MEPGEN_RESULT' in text
    # launched exactly as configured: callee, grid, block, dynamic shared memory, on the created stream
    # sizes are spelled as the build defines them (-DMEPGEN_SIZE_NX=...): they cannot collide with the app's names
    assert "analysis::histogram<<<grid, block, shared_mem, stream>>>(d_data, MEPGEN_SIZE_NX * MEPGEN_SIZE_NY, " \
        "d_bins);" in text
    assert "cudaMemcpyToSymbolAsync(analysis::c_hist_range" in text
    dot = (app / ".mepgen/meps/cg.dot/harness.cu").read_text()
    assert "static_cast<size_t>(MEPGEN_SIZE_BLOCK_SIZE * sizeof(float))" in dot
    grid = (app / ".mepgen/meps/heat.apply_boundary/harness.cu").read_text()
    assert "heat::Grid{MEPGEN_SIZE_NX, MEPGEN_SIZE_NY, 1.0f, 1.0f}" in grid and "heat::BoundaryKind::Dirichlet" in grid


def test_harness_flushes_the_l2_with_clean_lines(heatcg_meps):
    """The timed loop empties the L2 by reading (l2_flush.h), never by a memset whose dirty lines the timed
    kernel would write back; inputs are reset before the flush, so their writes are not in the L2 either."""
    app, _ = heatcg_meps
    text = (app / ".mepgen/meps/cg.axpy/harness.cu").read_text()
    assert 'extern "C" __global__ void mepgen_l2_flush(' in text
    loop = text[text.index("for (int i = 0; i < opt.reps; ++i) {"):text.index("cudaEventRecord(stop, stream)")]
    assert "mepgen_l2_flush_launch(" in loop and "cudaMemsetAsync" not in loop
    assert loop.index("reset();") < loop.index("mepgen_l2_flush_launch(") < loop.index("cudaEventRecord(start")


def test_the_pycuda_worker_flushes_with_the_harness_geometry():
    """The worker launches mepgen_l2_flush itself: its constants must be those of l2_flush.h."""
    import re
    from mepgen.evaluate import l2_flush
    text = l2_flush.source()
    assert f'extern "C" __global__ void {l2_flush.KERNEL}(' in text
    assert re.search(rf"mepgen_l2_flush_block = {l2_flush.BLOCK};", text)
    assert re.search(rf"mepgen_l2_flush_blocks_per_sm = {l2_flush.BLOCKS_PER_SM};", text)
    assert "2 * static_cast<size_t>(l2_bytes > (1 << 20) ? l2_bytes : (1 << 20)) / 16 * 16" in text
    assert l2_flush.flush_bytes(60 << 20) == 120 << 20 and l2_flush.flush_bytes(1000) == 2 << 20
