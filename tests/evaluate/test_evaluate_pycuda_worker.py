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


def test_a_worker_warmed_ahead_serves_the_first_run_and_a_failed_warm_up_is_said_by_it(backend, tmp_path,
                                                                                        monkeypatch):
    """The evaluator starts the worker while the original builds (warm): the first run finds it ready; a worker
    that could not start leaves nothing behind, and the first run says why."""
    be, inputs = backend
    be.warm()
    proc = be.proc
    assert proc is not None and proc.poll() is None
    first = be.run(built("good"), inputs, tmp_path)
    assert first.fault is None and be.proc is proc
    be.close()
    monkeypatch.setattr(be, "entry", "no_such_worker_module")
    be.warm()
    assert be.proc is None
    failed = be.run(built("good"), inputs, tmp_path)
    assert failed.fault.kind == "crash" and "No module named 'no_such_worker_module'" in failed.fault.message


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


def fake_driver_state(tmp_path):
    """The real worker State over tests/fake_pycuda's driver (host memory), axpy's set 0 loaded, modules b and c."""
    import importlib.util
    from pathlib import Path
    where = Path(__file__).resolve().parent.parent / "fake_pycuda" / "pycuda" / "driver.py"
    found = importlib.util.spec_from_file_location("fake_pycuda_driver", where)   # not as `pycuda`: no other test
    cuda = importlib.util.module_from_spec(found)                                   # may take it for the real one
    found.loader.exec_module(cuda)
    spec = load_spec(FIXTURES / "axpy" / "mep.yaml")
    folder = Store(tmp_path, spec).input_set(0)
    state = pycuda_worker.State(cuda, 0)
    params = [{"name": p.name, "role": p.role, "dtype": p.dtype, "count": spec.count(p) if p.is_buffer else 0,
               "placement": None, "perturb": None} for p in spec.params]
    state.op_setup(params, b"flush")
    state.op_load_set(0, {p.name: str(folder / f"{p.name}.npy") for p in spec.inputs}, {})
    desc = {"entry": "k", "constants": [], "shared": 0, "grid": [1, 1, 1], "block": [1, 1, 1],
            "params": [{"name": "n", "role": "scalar", "size": 4, "align": 4, "bytes": "00001000"},
                       {"name": "a", "role": "scalar", "size": 4, "align": 4, "bytes": "0000003f"},
                       {"name": "x", "role": "in", "size": 8, "align": 8}, {"name": "y", "role": "inout", "size": 8,
                                                                             "align": 8}]}
    state.op_load("b", b"cubin", desc)
    state.op_load("c", b"cubin", desc)
    launches = []
    for key in ("b", "c"):
        state.modules[key]["func"]._launch_kernel = lambda *a, key=key: launches.append(key)
    return state, launches


def test_a_session_in_rounds_launches_the_controls_and_only_its_last_call_rechecks(tmp_path):
    """Sequential timing drives the worker a round per call: the candidate `reps` times and the original `control`
    times a round, the perturbation step carried from call to call, the re-checks only with `finish`."""
    state, launches = fake_driver_state(tmp_path)
    first = state.op_time("b", "c", 0, 2, 10, 1, False, None, None, 3, False, 0)
    assert [len(r) for r in first["candidate_rounds"]] == [10] and [len(r) for r in first["baseline_rounds"]] == [3]
    assert "after" not in first and first["step"] == 2 + 2 + 13          # warm-up: 2 of each side, then 13 launches
    assert launches.count("c") == 12 and launches.count("b") == 5
    launches.clear()
    second = state.op_time("b", "c", 0, 0, 10, 1, False, None, None, 3, False, first["step"])
    assert second["step"] == first["step"] + 13 and launches.count("b") == 3
    launches.clear()
    last = state.op_time("b", "c", 0, 0, 10, 0, False, None, None, 3, True, second["step"])
    assert last["candidate_rounds"] == [] and launches == ["c"]          # the re-check run of the candidate alone
    assert set(last["after"]) == {"y"} and last["inputs_changed"] == []
    launches.clear()
    legacy = state.op_time("b", "c", 0, 1, 4, 2, False, None)            # no control: both sides alike, A B B A
    assert [len(r) for r in legacy["baseline_rounds"]] == [4, 4] and launches[2:6] == ["b", "c", "c", "b"]


class EmulatedCompare:
    """device_compare.py's kernels over the fake driver's memory: the mask as the CUDA source draws it, the
    comparison by verify.compare (the GPU's own parity with it is tests/test_evaluate_device_compare_gpu.py)."""

    def __init__(self, cuda):
        self.cuda = cuda

    @staticmethod
    def mask(key: int, n: int, size: int):
        import numpy as np
        c = lambda v: np.uint64(v)
        with np.errstate(over="ignore"):          # uint64 arithmetic wraps as the CUDA source's does
            z = c(key) + (np.arange(n, dtype=np.uint64) + c(1)) * c(0x9E3779B97F4A7C15)
            z = (z ^ (z >> c(30))) * c(0xBF58476D1CE4E5B9)
            z = (z ^ (z >> c(27))) * c(0x94D049BB133111EB)
            z = z ^ (z >> c(31))
        return z.astype({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[size])

    def get_function(self, name):
        import numpy as np
        from mepgen.evaluate.verify import compare
        from mepgen.spec import Tolerance
        size = int(name[-1])
        u = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[size]
        view = lambda addr, n: np.frombuffer(self.cuda._at(int(addr), n * size), u)

        def mask(buf, n, key, **launch):
            view(buf, int(n))[:] ^= self.mask(int(key), int(n), size)

        def broken(now, ref, n, key, counts, **launch):
            dt = {2: np.float16, 4: np.float32, 8: np.float64}[size]
            plain = (view(ref, int(n)) ^ self.mask(int(key), int(n), size)).view(dt)
            bad = ~np.isfinite(view(now, int(n)).view(dt)) & np.isfinite(plain)
            np.frombuffer(self.cuda._at(int(counts), 16), np.uint64)[:] = [bad.sum(), 0]

        def check(got, ref, n, key, *rest, **launch):
            counts = rest[-1]
            plain = view(ref, int(n)) ^ self.mask(int(key), int(n), size)
            dt = {2: np.float16, 4: np.float32, 8: np.float64}[size] if name.startswith("mepgen_close") else u
            tol = Tolerance(float(rest[0]), float(rest[1])) if len(rest) == 4 else Tolerance(0.0, 0.0)
            m = compare("o", view(got, int(n)).view(dt), plain.view(dt), tol, 0, "run", bool(rest[2]) if len(rest) == 4
                        else True)
            np.frombuffer(self.cuda._at(int(counts), 16), np.uint64)[:] = [m.bad, m.first_bad_index] if m else [0, 0]

        return mask if name.startswith("mepgen_mask") else broken if name.startswith("mepgen_broken") else check


def test_references_stay_masked_on_the_gpu_and_only_differing_outputs_come_back(tmp_path):
    """load_refs keeps input set 0's reference of y on the GPU masked; a run with `check` sends no y when it equals
    the reference there, and sends it (for the parent's evidence) when it differs; the re-check after timing alike."""
    import numpy as np
    state, launches = fake_driver_state(tmp_path)
    state.op_compare(b"cubin")
    state.compare = EmulatedCompare(state.cuda)
    y = state.sets[0]["host"]["y"]                # an inout buffer: the fake launch leaves its input values
    (tmp_path / "ref").mkdir()
    np.save(tmp_path / "ref" / "y.npy", y)
    held = state.op_load_refs(0, {"y": str(tmp_path / "ref" / "y.npy")}, {"y": ["mepgen_close4", 1e-5, 1e-6, False]})
    assert held == ["y"]
    ref_buf, n = state.refs[0]["y"][:2]
    on_gpu = np.frombuffer(state.cuda._at(int(ref_buf), y.nbytes), np.float32)
    assert n == y.size and not np.array_equal(on_gpu.view(np.uint32), y.view(np.uint32))
    same = state.op_run("c", 0, True)
    assert same["matched"] == ["y"] and same["outputs"] == {}
    assert set(state.op_run("c", 0)["outputs"]) == {"y"}              # without `check`: as before
    np.save(tmp_path / "ref" / "y.npy", y + 1)
    state.op_load_refs(0, {"y": str(tmp_path / "ref" / "y.npy")}, {"y": ["mepgen_close4", 1e-5, 1e-6, False]})
    differs = state.op_run("c", 0, True)
    assert differs["matched"] == [] and np.array_equal(differs["outputs"]["y"], y)
    after = state.op_time("b", "c", 0, 0, 3, 0, False, None, None, 2, True, 0, True)
    assert after["after_matched"] == [] and set(after["after"]) == {"y"}


def test_with_the_comparison_kernels_an_input_the_kernel_wrote_is_found_on_the_gpu_and_restored(tmp_path):
    import numpy as np
    state, launches = fake_driver_state(tmp_path)
    state.op_compare(b"cubin")
    state.compare = EmulatedCompare(state.cuda)
    x = state.sets[0]["host"]["x"]
    dev = state.sets[0]["dev"]["x"]
    assert state._inputs_changed(0) == [] and "x" in state.sets[0]["pristine"]
    copy = np.frombuffer(state.cuda._at(int(state.sets[0]["pristine"]["x"]), x.nbytes), np.uint8)
    assert not np.array_equal(copy, x.view(np.uint8))                    # the copy is masked
    state.cuda._at(int(dev) + 4 * 1000, 4)[:] = b"\x00\x00\x80\x7f"       # the kernel wrote an Inf into x[1000]
    assert state._inputs_changed(0) == ["x"]
    assert bytes(state.cuda._at(int(dev), x.nbytes)) == x.tobytes()      # restored
    assert state._inputs_changed(0) == []


def test_the_perturbation_recheck_runs_on_the_gpu_and_sends_back_outputs_only_when_they_differ(tmp_path):
    """With every output's reference on the GPU, the candidate's outputs on the changed inputs are compared there with
    the original's: a match sends back a summary (elements the change moved against the reference), a mismatch both
    outputs for the parent's evidence (perturb.recheck)."""
    import numpy as np
    from mepgen import perturb
    state, launches = fake_driver_state(tmp_path)
    state.op_compare(b"cubin")
    state.compare = EmulatedCompare(state.cuda)
    state.perturbed = ["x", "y"]
    y = state.sets[0]["host"]["y"]
    np.save(tmp_path / "y.npy", y)
    state.op_load_refs(0, {"y": str(tmp_path / "y.npy")}, {"y": ["mepgen_close4", 1e-5, 1e-6, False]})
    args = ("b", "c", 0, 0, 3, 1, False, None, 7, 2, True, 0, True)
    same = state.op_time(*args)
    moved = perturb.block(7, perturb.RECHECK_STEP, 1, y.size)[2]   # the fake kernels leave the changed y as it is
    assert same["perturbed_summary"] == {"followed": moved, "outputs": ["y"]} and moved > 0
    assert same["perturbed"] == {} and same["perturbed_ref"] == {}
    out_y = state.outputs["y"][0]
    state.modules["c"]["func"]._launch_kernel = lambda *a: state.cuda._at(int(out_y), 4).__setitem__(
        slice(0, 4), b"\x00\x00\x80\x7f")                             # the candidate writes an Inf into y[0]
    differs = state.op_time(*args)
    assert differs["perturbed_summary"] is None
    assert differs["perturbed"]["y"][0] == np.inf and np.isfinite(differs["perturbed_ref"]["y"][0])


def test_a_hit_copy_on_the_gpu_costs_a_host_comparison_not_a_wrong_verdict(tmp_path):
    """A candidate that wrote past its buffers into the masked copy of an input: the GPU says the input changed,
    the host's comparison says it did not, so nothing is reported and the copy is made again."""
    state, launches = fake_driver_state(tmp_path)
    state.op_compare(b"cubin")
    state.compare = EmulatedCompare(state.cuda)
    assert state._inputs_changed(0) == []
    copy = state.sets[0]["pristine"]["x"]
    state.cuda._at(int(copy), 8)[:] = b"\x01" * 8
    assert state._inputs_changed(0) == [] and "x" not in state.sets[0]["pristine"]        # dropped
    assert state._inputs_changed(0) == [] and "x" in state.sets[0]["pristine"]            # made again


def test_references_the_parent_contradicts_are_sent_again(backend):
    be, _ = backend
    be.refs_held = {0: ["y"], 1: ["y"]}
    be.recheck_references(0, ["y"])
    be.recheck_references(1, ["z"])
    assert be.refs_held == {1: ["y"]}


def test_a_written_device_variable_comes_back_from_each_modules_own_symbol(tmp_path):
    """A `__device__` variable the kernel writes (mep.yaml constants with role inout) is set from its input before
    the launch and read back from that module's symbol after a kept run, whichever module (candidate) ran."""
    import importlib.util
    from pathlib import Path
    import numpy as np
    where = Path(__file__).resolve().parent.parent / "fake_pycuda" / "pycuda" / "driver.py"
    found = importlib.util.spec_from_file_location("fake_pycuda_driver_symbols", where)
    cuda = importlib.util.module_from_spec(found)
    found.loader.exec_module(cuda)
    state = pycuda_worker.State(cuda, 0)
    state.op_setup([], b"flush", None, [], [{"name": "tally::seen", "role": "inout", "dtype": "int32", "count": 2}])
    np.save(tmp_path / "seen.npy", np.array([7, 7], np.int32))
    state.op_load_set(0, {}, {"const.tally.seen": str(tmp_path / "seen.npy")})
    desc = {"entry": "k", "params": [], "shared": 0, "grid": [1, 1, 1], "block": [32, 1, 1],
            "constants": [{"name": "tally::seen", "symbol": "_ZN5tally4seenE", "size": 8, "output": True,
                           "file": "const.tally.seen"}]}
    starts = []
    for key, value in (("b", 1), ("c", 2)):
        state.op_load(key, b"cubin", desc)
        ptr = state.modules[key]["harvest"][0][0]

        def launch(*a, ptr=ptr, value=value):
            starts.append(np.frombuffer(bytes(cuda._at(int(ptr), 8)), np.int32).tolist())
            cuda._at(int(ptr), 8)[:] = np.array([value, -value], np.int32).tobytes()
        state.modules[key]["func"]._launch_kernel = launch
    for key, value in (("b", 1), ("c", 2), ("b", 1)):
        out = state.op_run(key, 0)
        assert out["outputs"]["tally::seen"].tolist() == [value, -value]
    # each launch started from the input set's value, not from what the previous run left in the symbol
    assert starts == [[7, 7]] * 3 and state.outputs["tally::seen"][1] == 8
    timed = state.op_time("b", "c", 0, 0, 2, 1, False, None)
    assert timed["after"]["tally::seen"].tolist() == [2, -2]          # the re-check after timing: the candidate's
