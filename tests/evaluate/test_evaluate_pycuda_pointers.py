"""The pycuda backend runs MEPs whose kernels take captured device pointers (mep.yaml `buffers`, `relocate`) as the
native harness does: the same buffers, the MEP's own addresses written into a struct argument and into buffers for
every input set, the same outputs. CPU: the worker's State over tests/fake_pycuda's driver (host memory)."""
from __future__ import annotations

import os
import importlib.util
import struct
from pathlib import Path

import numpy as np
import pytest

from pointer_mep import APP, N, write_mep
from mepgen import perturb
from mepgen.evaluate import captured_pointers, devices, pycuda_worker
from mepgen.evaluate.pycuda_backend import PycudaBackend, worker_layout
from mepgen.evaluate.pycuda_entry import entry_source
from mepgen.evaluate.store import Store
from mepgen.harness import render_harness
from mepgen.spec import load_spec

FIXTURES = Path(__file__).resolve().parent.parent / "evaluate_fixtures"


def fake_cuda():
    where = Path(__file__).resolve().parent.parent / "fake_pycuda" / "pycuda" / "driver.py"
    found = importlib.util.spec_from_file_location("fake_pycuda_driver_pointers", where)   # not as `pycuda`
    cuda = importlib.util.module_from_spec(found)
    found.loader.exec_module(cuda)
    return cuda


def u64(cuda, address: int, n: int = 1) -> list[int]:
    return list(np.frombuffer(bytes(cuda._at(address, 8 * n)), np.uint64).astype(int))


@pytest.fixture
def loaded(tmp_path):
    """The worker's State with the MEP's two input sets loaded and its kernel's launch description."""
    spec = write_mep(tmp_path / "mep")
    cuda = fake_cuda()
    state = pycuda_worker.State(cuda, 0)
    params, buffers, _ = worker_layout(spec)
    state.op_setup(params, b"flush", None, buffers)
    store = Store(tmp_path / "mep", spec)
    for k in (0, 1):
        folder = store.input_set(k)
        state.op_load_set(k, {x.name: str(folder / f"{x.name}.npy") for x in [*spec.inputs, *spec.chain_inputs]}, {})
    arg = struct.pack("<QQii", APP["x"], APP["w"] + 4, N, 0)
    desc = {"entry": "drift", "constants": [], "shared": 0, "grid": [8, 1, 1], "block": [128, 1, 1],
            "params": [{"name": "p", "role": "scalar", "size": 24, "align": 8, "bytes": arg.hex()},
                       {"name": "fields", "role": "in", "size": 8, "align": 8},
                       {"name": "nfields", "role": "scalar", "size": 4, "align": 4, "bytes": "02000000"},
                       {"name": "dt", "role": "scalar", "size": 4, "align": 4, "bytes": "0ad7233c"},
                       {"name": "weights", "role": "in", "size": 8, "align": 8},
                       {"name": "energy", "role": "out", "size": 8, "align": 8}]}
    state.op_load("base", b"cubin", desc)
    return spec, cuda, state, store


def test_the_struct_argument_gets_each_input_set_s_addresses(loaded):
    """Two captured pointers in a struct passed by value: one into a buffer of `buffers` the kernel writes (the
    output buffer's address, the same for every set), one 4 bytes into an `in` parameter (that set's copy); the
    rest of the struct (its `n`, its padding) as captured."""
    spec, cuda, state, _ = loaded
    out_x = int(state.outputs["reached_x"][0])
    for k in (0, 1):
        args = state._args(state.modules["base"], k)
        assert len(args) == 56
        assert int.from_bytes(args[0:8], "little") == out_x
        assert int.from_bytes(args[8:16], "little") == int(state.sets[k]["dev"]["weights"]) + 4
        assert args[16:24] == struct.pack("<ii", N, 0)
        assert int.from_bytes(args[24:32], "little") == int(state.sets[k]["dev"]["fields"])
        assert args[32:40] == bytes.fromhex("02000000" + "0ad7233c")
        assert int.from_bytes(args[48:56], "little") == int(state.outputs["energy"][0])
    a0, a1 = (state._args(state.modules["base"], k) for k in (0, 1))
    assert a0[8:16] != a1[8:16] and a0[0:8] == a1[0:8]
    assert not any(v in (APP["x"], APP["w"] + 4) for v in struct.unpack("<QQ", a0[:16]))


def test_pointers_inside_an_input_are_the_mep_s_and_the_input_is_checked_against_them(loaded):
    """The table of pointers (an `in` parameter) holds the set's copies of the buffers it points into, offsets kept;
    so does the worker's host copy, so an untouched table is no change, a kernel that overwrote it is named, and
    it is restored with the MEP's addresses."""
    spec, cuda, state, _ = loaded
    for k in (0, 1):
        s = state.sets[k]
        want = [int(s["dev"]["reached_fa"]), int(s["dev"]["reached_fb"]) + 16]
        assert u64(cuda, s["dev"]["fields"], 2) == want
        assert [int(v) for v in s["host"]["fields"]] == want
    assert state._inputs_changed(0) == []
    s = state.sets[0]
    cuda.memcpy_htod(s["dev"]["fields"], np.array([APP["fa"]], np.uint64))      # the application's address back
    assert state._inputs_changed(0) == ["fields"]
    assert u64(cuda, s["dev"]["fields"], 2) == [int(s["dev"]["reached_fa"]), int(s["dev"]["reached_fb"]) + 16]


def test_buffers_reached_through_pointers_hold_their_data_and_the_written_one_is_an_output(loaded):
    spec, cuda, state, store = loaded
    folder = store.input_set(0)
    for name in ("reached_fa", "reached_fb"):      # read only: the set's copy, from its file
        want = np.load(folder / f"{name}.npy")
        got = np.frombuffer(bytes(cuda._at(state.sets[0]["dev"][name], want.nbytes)), np.uint8)
        assert np.array_equal(got, want)
    out = state.op_run("base", 0)
    assert sorted(out["outputs"]) == ["energy", "reached_x"] == sorted(p.name for p in spec.outputs)
    # the launch of the stand-in driver writes nothing: reached_x comes back as it was reset, from its captured bytes
    assert np.array_equal(out["outputs"]["reached_x"], np.load(folder / "reached_x.npy"))
    assert out["outputs"]["reached_x"].dtype == np.uint8 and out["outputs"]["reached_x"].size == 4 * N
    assert np.isnan(out["outputs"]["energy"]).all()          # poisoned, as every output before a run
    assert out["inputs_changed"] == []
    # a kernel writing a buffer it only reads: restored for the next candidate, not named (as the native harness)
    dev = state.sets[0]["dev"]["reached_fa"]
    cuda.memset_d8(dev, 0x7F, 4 * N)
    assert state._inputs_changed(0) == []
    assert bytes(cuda._at(dev, 4 * N)) == np.load(folder / "reached_fa.npy").tobytes()


def test_a_pointer_inside_a_buffer_and_a_buffer_without_a_file(tmp_path):
    """A buffer of `buffers` that holds a pointer (relocated inside it), and one with no input file (zeros, as the
    harness's memset), which the pointer reaches."""
    cuda = fake_cuda()
    state = pycuda_worker.State(cuda, 0)
    params = [{"name": "v", "role": "inout", "dtype": "float32", "count": 4, "relocate": []}]
    buffers = [{"name": "table", "role": None, "dtype": "uint8", "count": 24,
                "relocate": [{"at": 8, "buffer": "scratch", "offset": 12}, {"at": 16, "buffer": "v", "offset": 0}]},
               {"name": "scratch", "role": None, "dtype": "float32", "count": 6, "relocate": []}]
    state.op_setup(params, b"flush", None, buffers)
    table = np.arange(24, dtype=np.uint8)
    np.save(tmp_path / "table.npy", table)
    np.save(tmp_path / "v.npy", np.ones(4, np.float32))
    state.op_load_set(0, {"v": str(tmp_path / "v.npy"), "table": str(tmp_path / "table.npy")}, {})
    s = state.sets[0]
    got = bytes(cuda._at(s["dev"]["table"], 24))
    assert got[:8] == table[:8].tobytes()                                       # no pointer there: as captured
    assert int.from_bytes(got[8:16], "little") == int(s["dev"]["scratch"]) + 12
    assert int.from_bytes(got[16:24], "little") == int(state.outputs["v"][0])    # the buffer the kernel sees
    assert bytes(cuda._at(s["dev"]["scratch"], 24)) == bytes(24)
    assert table[8] == 8                                                        # the file's array is left alone


def test_a_pointer_past_the_end_of_its_holder_is_an_error_not_a_write():
    with pytest.raises(ValueError, match="relocation inside s: a pointer at byte 20 does not fit in its 24 bytes"):
        captured_pointers.patch_bytes(bytes(24), [{"at": 20, "buffer": "b", "offset": 0}], lambda n: 1, "s")


def test_the_refusal_is_gone_and_the_entry_checks_the_struct_holds_its_pointers(tmp_path):
    spec = write_mep(tmp_path / "mep")
    assert devices.pycuda_unsupported(spec) is None
    PycudaBackend(spec, tmp_path / "mep", tmp_path / "build").close()    # no "unsupported by the pycuda backend"
    src = entry_source(spec, tmp_path / "mep" / "kernel.cu")
    assert 'static_assert(sizeof(MEPGEN_PARAM(0)) >= 0 + sizeof(void*), "relocation inside p");' in src
    assert 'static_assert(sizeof(MEPGEN_PARAM(0)) >= 8 + sizeof(void*), "relocation inside p");' in src
    params, buffers, _ = worker_layout(spec)
    assert [b["name"] for b in buffers] == ["reached_x", "reached_fa", "reached_fb"]
    assert [b["role"] for b in buffers] == ["inout", None, None] and buffers[2]["count"] == 4 * (N + 4)
    assert params[1]["relocate"] == [{"at": 0, "buffer": "reached_fa", "offset": 0},
                                     {"at": 8, "buffer": "reached_fb", "offset": 16}]


def test_the_native_harness_checks_a_relocated_input_against_its_own_addresses(tmp_path):
    """Its `in` buffer holding pointers is compared with the file except where it wrote its addresses (there: with
    those addresses), so an untouched table is not reported as changed; a harness without relocations is as before."""
    spec = write_mep(tmp_path / "mep")
    text = render_harness(spec)
    assert "if (std::memcmp(host.data() + 8, &v, sizeof(v)) != 0) moved = true;" in text
    assert "reinterpret_cast<char*>(d_reached_fb) + 16;" in text
    assert "if (moved || host.size() != host_fields.size()" in text
    assert "moved" not in render_harness(load_spec(FIXTURES / "axpy" / "mep.yaml"))


def test_a_buffer_holding_pointers_is_never_perturbed(tmp_path):
    spec = write_mep(tmp_path / "mep")
    assert perturb.names(spec) == ["weights"]
    spec.param("weights").relocate = [{"at": 0, "buffer": "reached_fa", "offset": 0}]
    assert perturb.names(spec) == []


def test_a_worker_process_gets_the_buffers_through_the_protocol(tmp_path, monkeypatch):
    """The backend's own worker process (the stand-in driver, unconfined): `setup` carries the buffers and the
    relocations, `load_set` the buffers' files as descriptors, and the written buffer comes back as an output."""
    import shutil
    from mepgen.evaluate import l2_flush
    from mepgen.evaluate.backend import Built, InputSet
    from mepgen.evaluate.results import CompileInfo
    site = tmp_path / "site"
    shutil.copytree(Path(__file__).resolve().parent.parent / "fake_pycuda", site)
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setattr(l2_flush, "build_cubin", lambda arch, folder, timeout: FIXTURES / "axpy" / "kernel.cu")
    spec = write_mep(tmp_path / "mep")
    store = Store(tmp_path / "mep", spec)
    desc = {"entry": "drift", "constants": [], "shared": 0, "grid": [8, 1, 1], "block": [128, 1, 1],
            "params": [{"name": "p", "role": "scalar", "size": 24, "align": 8, "bytes": "00" * 24},
                       {"name": "fields", "role": "in", "size": 8, "align": 8},
                       {"name": "nfields", "role": "scalar", "size": 4, "align": 4, "bytes": "02000000"},
                       {"name": "dt", "role": "scalar", "size": 4, "align": 4, "bytes": "0ad7233c"},
                       {"name": "weights", "role": "in", "size": 8, "align": 8},
                       {"name": "energy", "role": "out", "size": 8, "align": 8}]}
    be = PycudaBackend(spec, tmp_path / "mep", store.build_dir, run_timeout=30.0, start_timeout=60.0)
    be.sandbox_level = "off"
    kernel = tmp_path / "mep" / "kernel.cu"
    try:
        out = be.run(Built(kernel, kernel, "k", CompileInfo(), "", desc), InputSet(0, store.input_set(0)), tmp_path)
    finally:
        be.close()
    assert out.fault is None, out.fault
    assert sorted(out.outputs) == ["energy", "reached_x"] and out.inputs_changed == []
    np.testing.assert_array_equal(out.outputs["reached_x"], np.load(store.input_set(0) / "reached_x.npy"))


def test_a_pointer_into_another_parameter_s_buffer_runs_on_pycuda(tmp_path, monkeypatch):
    """The capture's form for two parameters the application pointed into one allocation: the second a null pointer
    of the parameter's type with `relocate` at byte 0. Its initializer is constant (auto keeps pycuda) and the worker
    passes the first one's address plus the offset."""
    spec = write_mep(tmp_path / "mep")
    monkeypatch.setattr(devices, "have_pycuda", lambda: True)
    alias = spec.param("nfields")
    alias.ctype, alias.dtype, alias.value = "const float *", None, "static_cast<const float *>(nullptr)"
    alias.relocate = [{"at": 0, "buffer": "weights", "offset": 12}]
    assert devices.choose_backend("auto", spec)[0] == "pycuda"
    alias.value = "nullptr"
    assert devices.pycuda_unsupported(spec) is None
    alias.value = "Payoff(4.0)"
    assert "by a constructor" in devices.pycuda_unsupported(spec)
    cuda = fake_cuda()
    state = pycuda_worker.State(cuda, 0)
    params, buffers, _ = worker_layout(spec)
    state.op_setup(params, b"flush", None, buffers)
    folder = Store(tmp_path / "mep", spec).input_set(0)
    state.op_load_set(0, {x.name: str(folder / f"{x.name}.npy") for x in [*spec.inputs, *spec.chain_inputs]}, {})
    size = {"p": 24}
    desc = {"params": [{"name": p.name, "role": p.role, "size": size.get(p.name, 8), "align": 8,
                        "bytes": "00" * size.get(p.name, 8)} for p in spec.params]}
    args = state._args({"desc": desc, "args": {}}, 0)
    assert int.from_bytes(args[32:40], "little") == int(state.sets[0]["dev"]["weights"]) + 12


def test_a_native_arch_becomes_the_gpu_s_own_for_a_cubin(tmp_path, monkeypatch):
    """mep.yaml's `arch: native` is resolved by nvcc through the driver, which a confined compile cannot reach; a
    cubin has no PTX to fall back on, so the pycuda backend asks nvidia-smi for the GPU's own (the visible
    device's, counted as nvidia-smi counts)."""
    from mepgen.evaluate import launchcfg          # both backends' device_arch
    smi = tmp_path / "nvidia-smi"
    smi.write_text('#!/bin/sh\ncase "$*" in *"-i 3"*) echo 8.6 ;; *"-i 0"*) echo 9.0 ;; *) exit 6 ;; esac\n')
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    launchcfg.device_arch.cache_clear()
    assert launchcfg.device_arch("native", 0) == "sm_90"
    assert launchcfg.device_arch("sm_80", 0) == "sm_80"
    assert launchcfg.device_arch("native", 1) == "native"          # nvidia-smi cannot say: nvcc's answer
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,0")
    launchcfg.device_arch.cache_clear()
    assert launchcfg.device_arch("native", 0) == "sm_86"
    assert launchcfg.device_arch("native", 0, physical=True) == "sm_90"     # the native harness's index
    assert launchcfg.device_arch("all", 0, only=("native",)) == "all"      # a fat binary runs anywhere
    launchcfg.device_arch.cache_clear()
