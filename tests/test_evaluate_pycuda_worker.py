"""The pycuda backend's supervision of its worker (spawned process: hang, crash, CUDA error, restart) with
a stand-in worker, and the worker's kernel-argument layout; no GPU and no pycuda needed."""
from __future__ import annotations

import time

import pytest

import evaluate_fakes
from evaluate_fakes import FIXTURES
from mepgen.evaluate import l2_flush, pycuda_worker
from mepgen.evaluate.backend import Built, InputSet
from mepgen.evaluate.pycuda_backend import PycudaBackend
from mepgen.evaluate.results import CompileInfo
from mepgen.evaluate.store import Store
from mepgen.spec import load_spec


@pytest.fixture
def backend(tmp_path, monkeypatch):
    monkeypatch.setattr(l2_flush, "build_cubin", lambda arch, folder, timeout: FIXTURES / "axpy" / "kernel.cu")
    spec = load_spec(FIXTURES / "axpy" / "mep.yaml")
    store = Store(tmp_path, spec)
    be = PycudaBackend(spec, tmp_path, tmp_path / "build", run_timeout=2.0, start_timeout=60.0)
    be.entry = evaluate_fakes.FAKE_WORKER
    yield be, InputSet(0, store.input_set(0))
    be.close()


def built(key: str) -> Built:
    return Built(FIXTURES / "axpy" / "kernel.cu", FIXTURES / "axpy" / "kernel.cu", key, CompileInfo(), "", {})


def test_worker_faults_are_results_and_the_worker_restarts(backend, tmp_path):
    be, inputs = backend
    first = be.run(built("good"), inputs, tmp_path)
    assert first.fault is None and first.record["device"] == "FAKE GPU"
    me = int(first.outputs["y"][0])
    assert be.run(built("good2"), inputs, tmp_path).outputs["y"][0] == me       # same worker, kept warm

    start = time.monotonic()
    hang = be.run(built("hang"), inputs, tmp_path)
    assert hang.fault.kind == "timeout" and time.monotonic() - start < 15
    crash = be.run(built("segv"), inputs, tmp_path)
    assert crash.fault.kind == "crash" and crash.fault.input_set == 0
    illegal = be.run(built("illegal"), inputs, tmp_path)
    assert illegal.fault.kind == "illegal_address" and "illegal memory access" in illegal.fault.message

    after = be.run(built("good"), inputs, tmp_path)
    assert after.fault is None and int(after.outputs["y"][0]) != me             # a fresh worker


def test_argument_buffer_follows_each_parameter_alignment():
    state = object.__new__(pycuda_worker.State)
    state.params = [{"name": "u", "role": "in"}, {"name": "u_new", "role": "inout"}, {"name": "g", "role": "scalar"},
                    {"name": "alpha", "role": "scalar"}, {"name": "flag", "role": "scalar"},
                    {"name": "d", "role": "scalar"}]
    state.sets = {0: {"dev": {"u": 0x1000}}}
    state.outputs = {"u_new": (0x2000, 0, 0)}
    desc = {"params": [{"name": "u", "role": "in", "size": 8, "align": 8},
                       {"name": "u_new", "role": "inout", "size": 8, "align": 8},
                       {"name": "g", "role": "scalar", "size": 16, "align": 4, "bytes": "01" * 16},
                       {"name": "alpha", "role": "scalar", "size": 4, "align": 4, "bytes": "0000003f"},
                       {"name": "flag", "role": "scalar", "size": 1, "align": 1, "bytes": "01"},
                       {"name": "d", "role": "scalar", "size": 8, "align": 8, "bytes": "00" * 7 + "40"}]}
    buf = state._args({"desc": desc, "args": {}}, 0)
    assert len(buf) == 48
    assert buf[0:8] == (0x1000).to_bytes(8, "little") and buf[8:16] == (0x2000).to_bytes(8, "little")
    assert buf[16:32] == b"\x01" * 16 and buf[32:36] == bytes.fromhex("0000003f") and buf[36] == 1
    assert buf[37:40] == b"\0\0\0" and buf[40:48] == bytes.fromhex("00" * 7 + "40")


def test_the_worker_reads_an_input_set_from_its_files(tmp_path):
    """load_set carries the .npy paths, not the arrays (hundreds of MiB pickled through the pipe per set): the
    worker reads the same bytes the store wrote and uploads them."""
    import numpy as np
    spec = load_spec(FIXTURES / "axpy" / "mep.yaml")
    folder = Store(tmp_path, spec).input_set(0)
    uploaded = []

    class Cuda:
        def mem_alloc(self, n):
            return 1 << 30

        def memcpy_htod(self, buf, arr):
            uploaded.append(arr.copy())

    state = object.__new__(pycuda_worker.State)
    state.cuda, state.params, state.sets = Cuda(), [], {}
    state.guards = type("Guards", (), {"allocate": lambda self, n, placement, span, name: 1 << 30})()
    paths = {p.name: str(folder / f"{p.name}.npy") for p in spec.inputs}
    state.op_load_set(0, paths, {})
    for name, path in paths.items():
        want = np.load(path)
        assert state.sets[0]["host"][name].tobytes() == want.tobytes()
    assert sorted(a.tobytes() for a in uploaded) == sorted(np.load(p).tobytes() for p in paths.values())


def test_inputs_a_run_wrote_are_found_and_restored_through_one_scratch_buffer():
    """After a run the worker copies each `in` buffer back and compares it bit for bit with its input: a buffer the
    kernel changed (one byte, in the word-aligned part or in the tail) is named and uploaded again; an unchanged
    one is not; one scratch buffer serves every check (a GB input is not allocated per run); -0.0 against 0.0 is a
    change (bits, not values)."""
    import numpy as np
    device = {}

    class Cuda:
        def memcpy_dtoh(self, out, buf):
            out[...] = device[buf].reshape(-1).view(np.uint8)

        def memcpy_htod(self, buf, arr):
            device[buf] = arr.copy()

    x = np.arange(1001, dtype=np.float32)          # 4004 bytes: 500 words and a 4-byte tail
    y = np.zeros(3, np.float32)
    state = object.__new__(pycuda_worker.State)
    state.cuda, state._scratch = Cuda(), None
    state.params = [{"name": "x", "role": "in"}, {"name": "y", "role": "in"}, {"name": "o", "role": "out"}]
    state.sets = {0: {"host": {"x": x, "y": y}, "dev": {"x": "dx", "y": "dy"}}}
    device.update(dx=x.copy(), dy=y.copy())
    assert state._inputs_changed(0) == []
    scratch = state._scratch
    device["dx"].view(np.uint8)[4003] ^= 1         # the tail
    device["dy"][1] = -0.0
    assert state._inputs_changed(0) == ["x", "y"]
    assert device["dx"].tobytes() == x.tobytes() and device["dy"].tobytes() == y.tobytes()
    device["dx"].view(np.uint8)[8] ^= 0x80         # inside the words
    assert state._inputs_changed(0) == ["x"] and state._scratch is scratch
    a = np.zeros(20, np.uint8)
    assert pycuda_worker.same_bytes(a, a.copy(), chunk=8)
    b = a.copy()
    b[17] = 1
    assert not pycuda_worker.same_bytes(a, b, chunk=8) and not pycuda_worker.same_bytes(a, a[:19])
