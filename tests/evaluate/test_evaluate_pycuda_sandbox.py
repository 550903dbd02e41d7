"""The pycuda worker runs in the sandbox like the native harness (confined.for_worker, docs/sandbox.md).

Device code cannot open files; the threat is the worker process itself doing what a candidate makes it do
(device code writing the worker's host memory where the GPU can address it, a driver bug on a crafted cubin).
So the tests put a probe into the worker's start (tests/worker_probe/sitecustomize.py: code running in the
worker with its rights) and check what it reaches: not the reference outputs, not the input set's folder (its
inputs come as descriptors), not the user's home, no workspace writes, no network. On CPU the worker runs
with a stand-in pycuda (tests/fake_pycuda) placed under /tmp, as a wheel unpacked there on PYTHONPATH would
be; on a GPU with the real one, running a real kernel.
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import sys
from pathlib import Path

import numpy as np
import pytest

from evaluate_fakes import FIXTURES, axpy_desc, axpy_workspace
from mepgen.evaluate import confine_paths, confined, l2_flush, sandbox
from mepgen.evaluate.backend import Built, InputSet, TimingPlan
from mepgen.evaluate.pycuda_backend import PycudaBackend
from mepgen.evaluate.results import CompileInfo
from mepgen.evaluate.store import Store
from mepgen.spec import load_spec

HERE = Path(__file__).resolve().parent.parent
LEVEL = sandbox.strongest()[0]
needs_bwrap = pytest.mark.skipif(LEVEL != "bwrap", reason=f"bubblewrap unusable here ({sandbox.strongest()[1]})")


@pytest.fixture
def ws(tmp_path):
    """An application's workspace with the axpy MEP, an input set and a reference output."""
    mep = axpy_workspace(tmp_path)
    spec = load_spec(mep / "mep.yaml")
    store = Store(mep, spec)
    inputs = InputSet(0, store.input_set(0))
    ref = store.ref_dir("original", 0)
    ref.mkdir(parents=True)
    np.save(ref / "y.npy", np.arange(8, dtype=np.float32))
    return {"mep": mep, "spec": spec, "store": store, "inputs": inputs, "ref": ref / "y.npy"}


def probe_plan(ws, port: int) -> dict:
    home_file = next((str(f) for f in sorted(Path.home().iterdir()) if f.is_file() and os.access(f, os.R_OK)), None)
    read = [str(ws["ref"]), str(ws["inputs"].data_dir / "x.npy"), str(ws["mep"] / "mep.yaml")]
    return {"read": read + ([home_file] if home_file else []),
            "list": [str(ws["mep"].parent.parent), str(ws["inputs"].data_dir)],
            "write": [str(ws["mep"] / "planted"), str(ws["store"].build_dir / "planted")],
            "connect": port}


def probe_of(be: PycudaBackend) -> dict:
    be.log_file.seek(0)
    lines = [ln for ln in be.log_file.read().decode().splitlines() if ln.startswith("MEPGEN-PROBE ")]
    assert len(lines) == 1, "the probe did not run in the worker"
    return json.loads(lines[0].split(" ", 1)[1])


def assert_contained(found: dict, plan: dict) -> None:
    assert found["read"] == {p: False for p in plan["read"]}
    assert all(not found["list"][p] for p in plan["list"]), found["list"]    # hidden: empty, or not there
    assert found["write"] == {p: False for p in plan["write"]}
    assert found["connect"] is False
    assert found["pid"] < 10                 # its own PID namespace: no other process in sight
    if os.geteuid() == 0 and confine_paths.nobody_can_run():
        assert found["uid"] == confine_paths.NOBODY


@pytest.fixture
def listening():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    yield server.getsockname()[1]
    server.close()


def test_the_worker_binds_python_but_no_workspace(ws, tmp_path, monkeypatch):
    """What the worker's sandbox binds: the interpreter and sys.path's folders (one under /tmp, hidden, comes
    back), never a folder above a workspace as a whole (only the packages in it), nothing in a workspace."""
    site = tmp_path / "site"
    (site / "pycuda").mkdir(parents=True)
    (site / "pycuda" / "__init__.py").write_text("")
    above = ws["mep"].parent.parent.parent          # the application's folder: holds .mepgen
    monkeypatch.syspath_prepend(str(above))
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.syspath_prepend(str(ws["mep"]))
    libs = tmp_path / "cuda-libs"       # a library folder under /tmp on LD_LIBRARY_PATH: bound back too
    libs.mkdir()
    monkeypatch.setenv("LD_LIBRARY_PATH", f"{libs}:{ws['mep']}:{above}")
    c = confined.for_worker("bwrap", hide=[ws["mep"], ws["store"].build_dir])
    assert libs.resolve() in c.read
    assert ws["mep"].parent.parent in c.hide
    assert site.resolve() in c.read and Path(sys.prefix).resolve() in c.read
    assert above not in c.read and not any(confine_paths.workspace_of(p) for p in c.read)
    assert c.gpu and c.write == [] and c.limits.file_bytes == confined.WORKER_FILE_LIMIT
    line = c.command(["python"])
    c.close()
    assert any(a.endswith("bwrap") for a in line[:8]) and ["--ro-bind", str(site.resolve()), str(site.resolve())] == \
        line[line.index(str(site.resolve())) - 1:line.index(str(site.resolve())) + 2]
    assert "--unshare-all" in line or "--unshare-net" in line


@needs_bwrap
@pytest.mark.parametrize("level", ["bwrap", "unshare", "off"])
def test_the_worker_runs_confined_and_gets_only_its_inputs(ws, tmp_path, monkeypatch, listening, level):
    """`off` is the probe's control: unconfined, the same worker reads the reference and writes the workspace;
    `unshare` confines the network and the processes only."""
    site = tmp_path / "site"            # a stand-in pycuda under /tmp (hidden in the sandbox, so bound back)
    shutil.copytree(HERE / "fake_pycuda", site)
    shutil.copy(HERE / "worker_probe" / "sitecustomize.py", site)
    monkeypatch.syspath_prepend(str(site))
    plan = probe_plan(ws, listening)
    monkeypatch.setenv("MEPGEN_TEST_PROBE", json.dumps(plan))
    monkeypatch.setattr(l2_flush, "build_cubin", lambda arch, folder, timeout: FIXTURES / "axpy" / "kernel.cu")
    be = PycudaBackend(ws["spec"], ws["mep"], ws["store"].build_dir, run_timeout=30.0, start_timeout=60.0)
    be.sandbox_level = level
    kernel = ws["mep"] / "kernel.cu"
    try:
        out = be.run(Built(kernel, kernel, "k", CompileInfo(), "", axpy_desc()), ws["inputs"], tmp_path / "scratch")
        assert out.fault is None, out.fault
        assert be.level == level and be.info["device"] == "FAKE PYCUDA"
        # the in/out buffer comes back as the input set's values (the stand-in's launch does nothing): the
        # input set reached the worker through the descriptors, though its folder is out of its reach
        np.testing.assert_array_equal(out.outputs["y"], np.load(ws["inputs"].data_dir / "y.npy"))
        # a timing session with the perturbation re-check: the largest reply, through the same protocol
        other = Built(kernel, kernel, "k2", CompileInfo(), "", axpy_desc())
        t = be.time(other, Built(kernel, kernel, "k", CompileInfo(), "", axpy_desc()), ws["inputs"],
                    TimingPlan(warmup=1, reps=3, rounds=2, perturb_seed=5), tmp_path / "scratch")
        assert t.fault is None, t.fault
        assert [len(r) for r in t.baseline_rounds] == [3, 3] and [len(r) for r in t.candidate_rounds] == [3, 3]
        assert t.after["y"].dtype == np.float32 and t.after["y"].shape == out.outputs["y"].shape
        assert t.perturbed_buffers == 2 and set(t.perturbed) == set(t.perturbed_ref) == {"y"}
        found = probe_of(be)
    finally:
        be.close()
    if level == "off":
        assert found["read"][str(ws["ref"])] and found["write"][str(ws["mep"] / "planted")] and found["connect"]
    elif level == "unshare":          # no network, own PID namespace; files not confined (docs/sandbox.md)
        assert found["connect"] is False and found["pid"] < 10 and found["read"][str(ws["ref"])]
    else:
        assert_contained(found, plan)
        assert not (ws["mep"] / "planted").exists()


@needs_bwrap
@pytest.mark.skipif(os.geteuid() != 0 or not confine_paths.nobody_can_run(), reason="only root's worker runs as nobody")
def test_packages_closed_to_others_keep_the_worker_root_in_its_namespaces(ws, tmp_path, monkeypatch):
    """A wheel unpacked into a folder of mode 0700 (mktemp -d) cannot be imported as `nobody`: the worker then
    stays root inside its namespaces (no capabilities), its seccomp filter and everything else kept."""
    site = tmp_path / "closed"
    shutil.copytree(HERE / "fake_pycuda", site)
    site.chmod(0o700)
    monkeypatch.syspath_prepend(str(site))
    c = confined.for_worker("bwrap", hide=[ws["mep"]])
    line = c.command(["true"])
    c.close()
    assert c.keep_root and not c.drops_root and "setpriv" not in " ".join(line)
    assert ("--seccomp" in line) == (sandbox.seccomp_filter.compiled() is not None)
    monkeypatch.setattr(l2_flush, "build_cubin", lambda arch, folder, timeout: FIXTURES / "axpy" / "kernel.cu")
    be = PycudaBackend(ws["spec"], ws["mep"], ws["store"].build_dir, run_timeout=30.0, start_timeout=60.0)
    be.sandbox_level = "bwrap"
    try:
        out = be.run(Built(ws["mep"] / "kernel.cu", ws["mep"] / "kernel.cu", "k", CompileInfo(), "", axpy_desc()),
                     ws["inputs"], tmp_path / "scratch")
    finally:
        be.close()
    assert out.fault is None and be.info["device"] == "FAKE PYCUDA", out.fault


@needs_bwrap
def test_a_worker_that_breaks_the_protocol_is_a_fault_not_a_crash(ws, tmp_path, monkeypatch):
    """A subverted worker's reply is data, never code (no pickle), and its size is capped."""
    monkeypatch.setattr(l2_flush, "build_cubin", lambda arch, folder, timeout: FIXTURES / "axpy" / "kernel.cu")
    monkeypatch.setenv("MEPGEN_TEST_PWNED", str(tmp_path / "pwned"))
    be = PycudaBackend(ws["spec"], ws["mep"], ws["store"].build_dir, run_timeout=30.0, start_timeout=60.0)
    be.entry = "evaluate_fakes:rogue_worker_main"
    try:
        out = be.run(Built(ws["mep"] / "kernel.cu", ws["mep"] / "kernel.cu", "k", CompileInfo(), "", {}),
                     ws["inputs"], tmp_path / "scratch")
    finally:
        be.close()
    assert out.fault is not None and out.fault.kind == "harness_error" and "broke the protocol" in out.fault.message
    assert not (tmp_path / "pwned").exists()


@pytest.mark.gpu
def test_the_real_worker_runs_a_kernel_confined(ws, tmp_path, monkeypatch, listening):
    pytest.importorskip("pycuda", reason="the pycuda backend needs mepgen[gpu]")
    if LEVEL != "bwrap":
        pytest.skip(f"bubblewrap unusable here ({sandbox.strongest()[1]})")
    probe = tmp_path / "probe"
    shutil.copytree(HERE / "worker_probe", probe)
    monkeypatch.syspath_prepend(str(probe))
    plan = probe_plan(ws, listening)
    monkeypatch.setenv("MEPGEN_TEST_PROBE", json.dumps(plan))
    be = PycudaBackend(ws["spec"], ws["mep"], ws["store"].build_dir, run_timeout=60.0)
    be.sandbox_level = "bwrap"
    try:
        built = be.compile(ws["mep"] / "kernel.cu")
        assert isinstance(built, Built), built
        out = be.run(built, ws["inputs"], tmp_path / "scratch")
        assert out.fault is None, out.fault
        x, y = (np.load(ws["inputs"].data_dir / f"{n}.npy") for n in ("x", "y"))
        np.testing.assert_allclose(out.outputs["y"], np.float32(0.5) * x + y, rtol=1e-6)
        assert be.level == "bwrap"
        assert_contained(probe_of(be), plan)
    finally:
        be.close()


@pytest.mark.skipif(sandbox.landlock_works()[0] is False, reason="no Landlock here")
def test_the_worker_under_landlock_gets_only_its_inputs(ws, tmp_path, monkeypatch, listening):
    """The level without namespaces (forced: never bubblewrap here): the worker's Python starts through the links
    to its packages, gets its input set through the descriptors, and the probe in its start reaches no reference,
    no home file, no workspace folder and no network."""
    site = tmp_path / "site"
    shutil.copytree(HERE / "fake_pycuda", site)
    shutil.copy(HERE / "worker_probe" / "sitecustomize.py", site)
    monkeypatch.syspath_prepend(str(site))
    for name in [m for m in sys.modules if m == "pycuda" or m.startswith("pycuda.")]:
        monkeypatch.delitem(sys.modules, name)      # a GPU host's real pycuda, imported by an earlier test, must
        #                                             not be what the worker's links point to
    plan = probe_plan(ws, listening)
    monkeypatch.setenv("MEPGEN_TEST_PROBE", json.dumps(plan))
    monkeypatch.setattr(l2_flush, "build_cubin", lambda arch, folder, timeout: FIXTURES / "axpy" / "kernel.cu")
    be = PycudaBackend(ws["spec"], ws["mep"], ws["store"].build_dir, run_timeout=30.0, start_timeout=60.0)
    be.sandbox_level = "landlock"
    kernel = ws["mep"] / "kernel.cu"
    try:
        out = be.run(Built(kernel, kernel, "k", CompileInfo(), "", axpy_desc()), ws["inputs"], tmp_path / "scratch")
        assert out.fault is None, out.fault
        np.testing.assert_array_equal(out.outputs["y"], np.load(ws["inputs"].data_dir / "y.npy"))
        found = probe_of(be)
    finally:
        be.close()
    assert found["read"] == {p: False for p in plan["read"]}
    assert all(not found["list"][p] for p in plan["list"]), found["list"]
    assert found["write"] == {p: False for p in plan["write"]} and found["connect"] is False
    assert not (ws["mep"] / "planted").exists()
