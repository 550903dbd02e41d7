"""A complete MEP from one record: a struct of device pointers passed by value and a table of device pointers.

The application is written here (a particle step; its state is a struct holding two device pointers, its forces a
device array of device pointers; its shared header is found through -Iinclude). The raw record is written exactly
as injector/capture.cpp writes it, so everything from the record to a built MEP is tested without a GPU; the
gpu-marked test runs the real injector on the real program and the MEP on the captured data.
"""
from __future__ import annotations

import json
import shutil
import struct
import subprocess
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import yaml
from click.testing import CliRunner

from mepgen.capture.compare import compare
from mepgen.capture.convert import convert, load_array
from mepgen.capture.mepwrite import write_captured_mep
from mepgen.capture.names import choose_kernel
from mepgen.capture.plan import make_plan
from mepgen.spec import load_spec
from mepgen.workspace import Workspace

HEADER = """#pragma once
#define STEP_SCALE 0.5f
struct Swarm {
    float* pos;
    float* vel;
    int n;
    float dt;
};
"""

SOURCE = r"""
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <swarm.h>

__global__ void drift(Swarm s, const float* const* pulls, int npulls)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= s.n) return;
    float f = 0.0f;
    for (int k = 0; k < npulls; ++k) f += pulls[k][i];
    s.vel[i] += STEP_SCALE * f * s.dt;
    s.pos[i] += s.vel[i] * s.dt;
}

__global__ void rescale(float* v, float a, int n, const char* keep, size_t* hits)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n && keep[i]) { v[i] *= a; atomicAdd((unsigned long long*)hits, 1ull); }
}

int main(int argc, char** argv)
{
    int n = argc > 1 ? std::atoi(argv[1]) : 1000;
    const int npulls = 2;
    std::vector<float> h(n);
    Swarm s{nullptr, nullptr, n, 0.01f};
    cudaMalloc(&s.pos, n * sizeof(float));
    cudaMalloc(&s.vel, n * sizeof(float));
    for (int i = 0; i < n; ++i) h[i] = 0.001f * i;
    cudaMemcpy(s.pos, h.data(), n * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemset(s.vel, 0, n * sizeof(float));
    float* fields[npulls];
    for (int k = 0; k < npulls; ++k) {
        cudaMalloc(&fields[k], n * sizeof(float));
        for (int i = 0; i < n; ++i) h[i] = (k + 1) * 0.5f - 0.0003f * i;
        cudaMemcpy(fields[k], h.data(), n * sizeof(float), cudaMemcpyHostToDevice);
    }
    float** table = nullptr;
    cudaMalloc(&table, sizeof(fields));
    cudaMemcpy(table, fields, sizeof(fields), cudaMemcpyHostToDevice);
    for (int step = 0; step < 3; ++step)
        drift<<<(n + 127) / 128, 128>>>(s, table, npulls);
    cudaMemcpy(h.data(), s.pos, n * sizeof(float), cudaMemcpyDeviceToHost);
    double sum = 0;
    for (float v : h) sum += v;
    std::printf("sum %.6f\n", sum);
    return 0;
}
"""

N = 300
BASE = [0x7f0000000000 + (i << 21) for i in range(5)]     # pos, vel, pulls table, field 0, field 1


@pytest.fixture(scope="module")
def swarm_app(tmp_path_factory):
    from mepgen.extract import ExtractOptions, extract
    app = tmp_path_factory.mktemp("swarm") / "swarm"
    (app / "include").mkdir(parents=True)
    (app / "include" / "swarm.h").write_text(HEADER)
    (app / "swarm.cu").write_text(SOURCE)
    inv = extract(app, ExtractOptions(include_dirs=[str(app / "include")], jobs=1))
    return app, inv


def _step(pos, vel, fields, dt=np.float32(0.01)):
    f = np.zeros_like(pos)
    for fld in fields:
        f += fld
    vel = vel + np.float32(0.5) * f * dt
    return pos + vel * dt, vel


def swarm_raw(raw: Path) -> dict:
    """The record of launch 1 (the second step), as the injector writes it."""
    raw.mkdir(parents=True, exist_ok=True)
    fields = [np.float32((k + 1) * 0.5) - np.float32(0.0003) * np.arange(N, dtype=np.float32) for k in range(2)]
    pos0 = np.float32(0.001) * np.arange(N, dtype=np.float32)
    pos1, vel1 = _step(pos0, np.zeros(N, np.float32), fields)
    pos2, vel2 = _step(pos1, vel1, fields)
    table = np.array(BASE[3:5], np.uint64)
    before = [pos1, vel1, table, *fields]
    after = [pos2, vel2, table, *fields]
    allocs = []
    for i, (b, a) in enumerate(zip(before, after)):
        b.tofile(raw / f"alloc{i}.before.bin")
        a.tofile(raw / f"alloc{i}.after.bin")
        allocs.append({"id": i, "base": BASE[i], "bytes": b.nbytes, "via": "param pulls" if i == 2 else "reached",
                       "depth": 0 if i == 2 else 1, "scanned": i == 2, "managed": False,
                       "before": f"alloc{i}.before.bin", "after": f"alloc{i}.after.bin"})
    s = struct.pack("<QQif", BASE[0], BASE[1], N, 0.01)
    params = [{"index": 0, "name": "s", "kind": "value", "offset": 0, "size": 24, "bytes_hex": s.hex()},
              {"index": 1, "name": "pulls", "kind": "pointer", "offset": 24, "size": 8,
               "bytes_hex": struct.pack("<Q", BASE[2]).hex(), "address": BASE[2], "alloc": 2, "alloc_offset": 0,
               "alloc_bytes": 16},
              {"index": 2, "name": "npulls", "kind": "value", "offset": 32, "size": 4,
               "bytes_hex": struct.pack("<i", 2).hex()}]
    relocs = [{"in": "param", "where": 0, "at": 0, "target": 0, "offset": 0},
              {"in": "param", "where": 0, "at": 8, "target": 1, "offset": 0},
              {"in": "allocation", "where": 2, "at": 0, "target": 3, "offset": 0},
              {"in": "allocation", "where": 2, "at": 8, "target": 4, "offset": 0}]
    doc = {"format": "mepgen.capture.raw", "version": 2, "injector": "2", "target": 0, "pid": 1,
           "api": "cuLaunchKernel", "mangled": "_Z5drift5SwarmPKPKfi", "demangled": "drift(Swarm, float const* const*, int)",
           "launch_index": 1, "selection": "index", "launches_timed": 1, "time_ms": 5.0, "kernel_ms": 0.01,
           "grid": [3, 1, 1], "block": [128, 1, 1], "cluster": [0, 0, 0], "shared_mem": 0,
           "stream": {"handle": 0, "id": 1}, "params": params, "constants": [], "allocations": allocs,
           "relocations": relocs, "capture_ms": 2.0}
    (raw / "capture.json").write_text(json.dumps(doc))
    return {"pos2": pos2, "vel2": vel2}


@pytest.fixture
def swarm_captured(swarm_app, tmp_path):
    app, inv = swarm_app
    app = Path(shutil.copytree(app, tmp_path / "app"))
    ws = Workspace(app)
    choice = choose_kernel(inv, "drift")
    want = swarm_raw(tmp_path / "raw")
    plan = make_plan(choice, tmp_path / "raw", app_root=app, launch=1)
    manifest = convert(tmp_path / "raw", plan, ws.mep_dir(choice.kernel["id"]) / "data" / "captured",
                       compress_above=1000)
    return ws, inv, choice.kernel, manifest, want


def test_record_names_the_pointers_inside_the_struct_and_the_table(swarm_captured):
    ws, _, k, m, want = swarm_captured
    cap = ws.mep_dir(k["id"]) / "data" / "captured"
    assert m["relocations"] == [
        {"in": "param", "at": 0, "target": 0, "offset": 0, "param": "s"},
        {"in": "param", "at": 8, "target": 1, "offset": 0, "param": "s"},
        {"in": "allocation", "at": 0, "target": 3, "offset": 0, "allocation": 2},
        {"in": "allocation", "at": 8, "target": 4, "offset": 0, "allocation": 2}]
    a = {x["id"]: x for x in m["allocations"]}
    assert a[2]["params"] == ["pulls"] and a[0]["params"] == [] and a[0]["written"] and not a[3]["written"]
    # the outputs reached through the struct, as bytes; over --compress-above (1000 bytes) they are compressed
    assert a[0]["after"] == "after/alloc0.npz" and a[3]["after"] is None
    assert np.array_equal(load_array(cap, a[0]["after"]).view(np.float32), want["pos2"])
    assert "never" not in m["storage"]["policy"] and "compressed" in m["storage"]["policy"]


def test_mep_from_the_record_relocates_instead_of_passing_the_applications_addresses(swarm_captured):
    ws, inv, k, m, _ = swarm_captured
    w = write_captured_mep(ws, inv, k, m, detect_gpu=False)
    assert w.todo == [] and w.spec.todo == []
    # extracted without compile_commands.json: the MEP says its flags are mepgen's, not the application's
    assert any(n.startswith("build flags: the application's compile commands were not known") for n in w.notes)
    d = yaml.safe_load((w.path / "mep.yaml").read_text())
    p = {x["name"]: x for x in d["params"]}
    assert p["s"]["role"] == "scalar" and p["s"]["relocate"] == [
        {"at": 0, "buffer": "reached0", "offset": 0}, {"at": 8, "buffer": "reached1", "offset": 0}]
    assert p["pulls"]["role"] == "in" and p["pulls"]["relocate"] == [
        {"at": 0, "buffer": "reached3", "offset": 0}, {"at": 8, "buffer": "reached4", "offset": 0}]
    assert p["pulls"]["init"] == {"kind": "file", "path": "data/captured/before/pulls.npy"}
    assert p["npulls"]["value"] == "2"
    assert {b["name"] for b in d["buffers"]} == {"reached0", "reached1", "reached3", "reached4"}
    # what the kernel writes through the struct's pointers is reset before every run and checked by `mepgen run`
    roles = {b["name"]: b.get("role") for b in d["buffers"]}
    assert roles == {"reached0": "inout", "reached1": "inout", "reached3": None, "reached4": None}
    assert [o.name for o in w.spec.outputs] == ["reached0", "reached1"]
    assert d["launch"]["grid"] == ["3"] and d["launch"]["block"] == ["128"]
    # the application's include folder is in the build, and its header is not included on top of the copied struct
    assert f"-I{ws.app_root / 'include'}" in d["build"]["nvcc_flags"]
    kernel = (w.path / "kernel.cu").read_text()
    assert "#include <swarm.h>" not in kernel and "struct Swarm" in kernel
    harness = (w.path / "harness.cu").read_text()
    assert "auto arg_s = " in harness and "reinterpret_cast<char*>(d_reached0) + 0" in harness
    assert "drift<<<grid, block, shared_mem, stream>>>(arg_s, mep_record_ptr{d_pulls}, 2)" in harness
    assert "reinterpret_cast<char*>(d_pulls) + 8" in harness
    assert (w.path / "data" / "in" / "reached0.npy").is_file()
    assert "MEP_CHECK(cudaMemcpyAsync(d_reached0, mep_init_reached0," in harness
    assert "reinterpret_cast<char*>(d_reached0) + 0" in harness
    # a user's --refresh renders the same MEP again: nothing is left for a person
    from mepgen.cli import main
    r = CliRunner().invoke(main, ["mep", "drift", "--refresh", "-C", str(ws.app_root)])
    assert r.exit_code == 0, r.output


def test_static_and_captured_disagreements_are_named(swarm_captured):
    ws, inv, k, m, _ = swarm_captured
    from mepgen.cli import main
    r = CliRunner().invoke(main, ["mep", "drift", "--size", "N=1000", "-C", str(ws.app_root)])
    assert r.exit_code in (0, 3), r.output
    static = load_spec(ws.mep_dir(k["id"]) / "mep.yaml")
    found = {d.field: d for d in compare(static, m)}
    assert "launch.grid" in found and found["launch.grid"].captured == "[3, 1, 1]"
    assert "params.pulls.count" in found       # the table of two pointers, not float32 data
    write_captured_mep(ws, inv, k, m, detect_gpu=False)
    r = CliRunner().invoke(main, ["capture", "drift", "--compare", "-C", str(ws.app_root)])
    assert r.exit_code == 0, r.output
    assert "mep.yaml.before-capture" in r.output and "launch.grid: static" in r.output


def test_one_run_of_several_kernels_names_each_outcome(swarm_app, tmp_path, monkeypatch):
    """`capture --all --use`: the injector's run is replaced by the files it writes (one kernel recorded, one
    never launched), everything after it is the real command."""
    from mepgen.capture import build, launcher
    from mepgen.cli import main
    app = Path(shutil.copytree(swarm_app[0], tmp_path / "app"))

    def fake_run(command, injector, plan, raw_dir, timeout=None):
        names = [t.choice.kernel["qualified_name"] for t in plan.targets]
        assert sorted(names) == ["drift", "rescale"] and command == ["./swarm", "300"]
        swarm_raw(Path(raw_dir) / f"k{names.index('drift')}")
        targets = [{"matched": 3 if n == "drift" else 0, "captured": n == "drift", "refusal": ""} for n in names]
        return launcher.AppRun(command, 0, 0.5, [{"error": "", "graph_launches": 0, "targets": targets,
                                                  "seen": {"drift(Swarm, float const* const*, int)": 3}}])
    monkeypatch.setattr(launcher, "run_injected", fake_run)
    monkeypatch.setattr(build, "build_injector", lambda **kw: build.Injector(Path("/x.so"), SimpleNamespace(version="13.0"), built=False))
    r = CliRunner().invoke(main, ["capture", "--all", "--launch", "1", "--use", "--json", "-C", str(app), "--",
                                  "./swarm", "300"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    got = {o["kernel"]: o for o in json.loads(r.output)}
    assert got["drift"]["outcome"] == "captured" and got["drift"]["complete"] is True
    assert got["drift"]["relocations"] == 4 and got["drift"]["allocations"] == 5
    assert got["rescale"]["outcome"] == "not_launched"
    assert got["rescale"]["reason"].startswith("rescale was never launched (1 other kernel(s) were)")
    assert load_spec(app / ".mepgen" / "meps" / "drift" / "mep.yaml").todo == []
    # the text report names both
    r = CliRunner().invoke(main, ["capture", "--kernels", "drift,rescale", "--use", "-C", str(app)])
    assert r.exit_code == 0 and "drift: captured" in r.output and "rescale: not captured: no capture at" in r.output


@pytest.mark.nvcc
def test_the_captured_mep_builds(swarm_captured, tmp_path):
    from mepgen import mepbuild
    ws, inv, k, m, _ = swarm_captured
    w = write_captured_mep(ws, inv, k, m, detect_gpu=False)
    cmd = mepbuild.nvcc_command(w.spec, w.path, w.path / "kernel.cu", tmp_path / "mep")
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]


@pytest.mark.nvcc
def test_the_captured_mep_builds_for_the_pycuda_worker_which_writes_its_own_addresses(swarm_captured, tmp_path):
    """The same MEP as a cubin (the pycuda entry) run by the worker over the stand-in driver (host memory): the
    struct's bytes come from the cubin as captured, its two pointers and the table's two are the worker's buffers."""
    import importlib.util
    from mepgen.evaluate import pycuda_worker
    from mepgen.evaluate.pycuda_backend import worker_layout
    from mepgen.evaluate.pycuda_entry import build_cubin
    from mepgen.evaluate.store import Store
    ws, inv, k, m, _ = swarm_captured
    w = write_captured_mep(ws, inv, k, m, detect_gpu=False)
    built = build_cubin(w.spec, w.path, w.path / "kernel.cu", tmp_path / "build", 300)
    assert getattr(built, "extra", None), getattr(built, "message", built)
    assert built.extra["params"][0]["bytes"] == struct.pack("<QQif", BASE[0], BASE[1], N, 0.01).hex()
    driver = Path(__file__).resolve().parent.parent / "fake_pycuda" / "pycuda" / "driver.py"
    found = importlib.util.spec_from_file_location("fake_pycuda_driver_swarm", driver)   # not as `pycuda`
    cuda = importlib.util.module_from_spec(found)
    found.loader.exec_module(cuda)
    state = pycuda_worker.State(cuda, 0)
    params, buffers, _ = worker_layout(w.spec)
    state.op_setup(params, b"flush", None, buffers)
    folder = Store(w.path, w.spec).input_set(0)
    state.op_load_set(0, {x.name: str(folder / f"{x.name}.npy") for x in [*w.spec.inputs, *w.spec.chain_inputs]}, {})
    state.op_load("k", b"cubin", built.extra)
    args, s = state._args(state.modules["k"], 0), state.sets[0]
    assert list(struct.unpack("<QQ", args[:16])) == [int(state.outputs[b][0]) for b in ("reached0", "reached1")]
    table = np.frombuffer(bytes(cuda._at(s["dev"]["pulls"], 16)), np.uint64).tolist()
    assert table == [int(s["dev"]["reached3"]), int(s["dev"]["reached4"])]
    out = state.op_run("k", 0)
    assert sorted(out["outputs"]) == ["reached0", "reached1"] and out["inputs_changed"] == []


@pytest.mark.gpu
@pytest.mark.nvcc
def test_one_run_records_the_swarm_and_its_mep_reproduces_the_launch(swarm_app, tmp_path):
    app = Path(shutil.copytree(swarm_app[0], tmp_path / "app"))
    exe = app / "swarm"
    r = subprocess.run(["nvcc", "-O2", "-Iinclude", "swarm.cu", "-o", str(exe)], cwd=app, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    from conftest import run_mepgen
    r = run_mepgen("capture", "--all", "--launch", "1", "--use", "--json", "-C", app, "--", exe, N)
    assert r.returncode == 0, r.stdout + r.stderr
    got = {o["kernel"]: o for o in json.loads(r.stdout)}       # only mepgen's JSON on stdout
    assert "sum " in r.stderr                                   # the application's own output, on stderr
    o = got["drift"]
    assert o["outcome"] == "captured" and o["complete"] and o["relocations"] == 4, o
    assert o["allocations"] == 5 and o["grid"] == [3, 1, 1] and o["launch_index"] == 1
    assert got["rescale"]["outcome"] == "not_launched"
    mep = app / ".mepgen" / "meps" / "drift"
    assert subprocess.run(["make", "-s"], cwd=mep, capture_output=True, timeout=300).returncode == 0
    assert subprocess.run(["./mep", "--out", "data/out"], cwd=mep, capture_output=True, timeout=60).returncode == 0
    m = json.loads((mep / "data" / "captured" / "manifest.json").read_text())
    for a in m["allocations"]:
        if a.get("written"):
            got = np.load(mep / "data" / "out" / f"reached{a['id']}.npy")
            assert np.array_equal(got, load_array(mep / "data" / "captured", a["after"])), a
    # `mepgen run` verifies it on both backends (the table of pointers, an input, is no modified input on either)
    import importlib.util
    for backend in ["native"] + (["pycuda"] if importlib.util.find_spec("pycuda") else []):
        r = run_mepgen("run", "drift", "--backend", backend, "--json", "-C", app)
        assert r.returncode == 0, f"{backend}: {r.stdout[-3000:]} {r.stderr[-3000:]}"
        base = json.loads(r.stdout)["baseline"]
        assert base["status"] == "ok" and base["backend"] == backend, base


def test_buffers_written_through_captured_pointers_are_outputs(swarm_captured):
    from mepgen.errors import MepgenError
    from mepgen.evaluate.verify import tolerance_for
    from mepgen.spec import validate_dict
    ws, inv, k, m, _ = swarm_captured
    w = write_captured_mep(ws, inv, k, m, detect_gpu=False)
    t = tolerance_for(w.spec, "reached0")
    assert (t.rtol, t.atol) == (0.0, 0.0)          # bytes: compared exactly
    d = w.spec.to_dict()
    d["buffers"][0].pop("init")
    with pytest.raises(MepgenError, match="role inout is for a buffer reached through captured pointers"):
        validate_dict(d)
    d = w.spec.to_dict()
    d["params"][1]["relocate"][0]["buffer"] = "nowhere"
    with pytest.raises(MepgenError, match="no buffer parameter or buffer named 'nowhere'"):
        validate_dict(d)


def test_element_types_spelled_unlike_the_harness_are_passed_as_the_kernels_pointer(swarm_app):
    """`char` is int8 but the harness declares `signed char`; `size_t` is uint64 but `unsigned long long`: the MEP
    passes those buffers converted to the kernel's pointer type, and `float` as it is."""
    from mepgen.capture.mepwrite import captured_spec
    _, inv = swarm_app
    k = next(x for x in inv["kernels"] if x["qualified_name"] == "rescale")
    buf = lambda name, dtype, item: {"name": name, "kind": "buffer", "dtype": dtype, "itemsize": item, "count": 4,
                                     "offset_bytes": 0, "allocation": {"v": 0, "keep": 1, "hits": 2}[name],
                                     "address": 4096, "before": f"before/{name}.npy", "after": None,
                                     "written": False, "changed_elements": 0, "notes": []}
    m = {"kernel": "rescale", "params": [buf("v", "float32", 4), {"name": "a", "kind": "value", "value": 2.0,
         "dtype": "float32", "bytes_hex": "00000040"}, {"name": "n", "kind": "value", "value": 4, "dtype": "int32",
         "bytes_hex": "04000000"}, buf("keep", "int8", 1), buf("hits", "uint64", 8)],
         "allocations": [], "relocations": [], "constants": [], "grid": [1, 1, 1], "block": [4, 1, 1],
         "shared_mem": 0, "launch_index": 0}
    d, _ = captured_spec(inv, k, m, detect_gpu=False)
    p = {x["name"]: x for x in d["params"]}
    assert "lanes" not in p["v"] and p["keep"]["lanes"] == 1 and p["hits"]["lanes"] == 1
    assert p["a"]["value"] == "2.0f" and p["n"]["value"] == "4"


def test_compare_tells_a_static_placeholder_from_a_disagreement(swarm_captured):
    """Static completion's placeholder (N = 1048576, a todo) makes the grid differ: named as the placeholder it is;
    once N is given (--size N=1000) the same grid is a real disagreement (the run used 300)."""
    ws, inv, k, m, _ = swarm_captured
    from mepgen.cli import main
    r = CliRunner().invoke(main, ["mep", "drift", "-C", str(ws.app_root)])
    assert r.exit_code == 3, r.output
    found = {d.field: d for d in compare(load_spec(ws.mep_dir(k["id"]) / "mep.yaml"), m)}
    assert found["launch.grid"].static_todo == "sizes.N" and found["launch.grid"].placeholder
    assert "[static placeholder: todo sizes.N]" in found["launch.grid"].line()
    assert not found["params.pulls.count"].placeholder          # a count static completion derived
    assert "16 bytes are 4 float32 elements" in found["params.pulls.count"].why
    r = CliRunner().invoke(main, ["mep", "drift", "--size", "N=1000", "-C", str(ws.app_root)])
    found = {d.field: d for d in compare(load_spec(ws.mep_dir(k["id"]) / "mep.yaml"), m)}
    assert found["launch.grid"].static == "['(N + 127) / 128'] = [8, 1, 1]" and not found["launch.grid"].placeholder
    r = CliRunner().invoke(main, ["capture", "drift", "--compare", "--json", "-C", str(ws.app_root)])
    d = {x["field"]: x for x in json.loads(r.stdout)[0]["disagreements"]}
    assert d["launch.grid"]["static_todo"] == "" and "static_todo" in d["params.pulls.count"]


def test_a_stated_default_is_a_placeholder_though_no_todo_names_it(swarm_captured):
    """mep.yaml keeps "0.5f is a safe default" as the comment above the value; compare reads it back."""
    ws, inv, k, m, _ = swarm_captured
    from mepgen.capture.command import _static_spec
    from mepgen.capture.compare import notes_from_comments
    text = ("params:\n  # npulls: launch argument `?` is computed at run time; 7 is a safe default\n"
            "  - {name: npulls, role: scalar, ctype: int, dtype: int32, value: '7'}\nsizes: {}\n  # N: not a param\n")
    assert notes_from_comments(text) == {"npulls": "launch argument `?` is computed at run time; 7 is a safe default"}
    from mepgen.cli import main
    CliRunner().invoke(main, ["mep", "drift", "--size", "N=300", "-C", str(ws.app_root)])
    path = ws.mep_dir(k["id"]) / "mep.yaml"
    path.write_text(path.read_text().replace("value: '2'}", "value: '7'}").replace(
        "  - {name: npulls", "  # npulls: computed at run time; 7 is a safe default\n  - {name: npulls", 1))
    static, _ = _static_spec(ws, inv, k)
    found = {d.field: d for d in compare(static, m)}
    assert found["params.npulls"].static_todo == "default" and "a stated default" in found["params.npulls"].line()
