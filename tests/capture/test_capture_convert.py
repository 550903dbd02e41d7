"""Raw dumps -> .npy + manifest, `--use` on mep.yaml, and the one-line explanations of a failed capture.

The raw dumps are written here exactly as injector/capture.cpp writes them (capture.json, allocN.{before,after}.bin,
constN.bin), so the conversion is tested without a GPU.
"""
from __future__ import annotations

import json
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest
import yaml
from click.testing import CliRunner

from mepgen.capture.convert import convert, load_manifest
from mepgen.capture.launcher import AppRun, explain_failure
from mepgen.capture.names import choose_kernel
from mepgen.capture.plan import make_plan
from mepgen.capture.use import BACKUP_SUFFIX, apply_capture, bytes_expression, literal
from mepgen.errors import MepgenError
from mepgen.spec import load_spec

ROW_PTR = np.array([0, 2, 3, 5, 6], np.int32)
COL_IDX = np.array([0, 1, 1, 0, 3, 2], np.int32)
VALS = np.array([1.5, -2.0, 4.0, 0.25, 8.0, -1.0], np.float32)
X_ALLOC = np.array([9, 9, 1.0, 2.0, 3.0, 4.0], np.float32)  # x points at element 2 of its allocation
Y_AFTER = np.array([1.5 - 4.0, 8.0, 0.25 + 32.0, -3.0], np.float32)


def _raw(raw: Path, name: str, params: list[dict], allocs: list[tuple[np.ndarray, np.ndarray]],
         consts: list[tuple[str, str, bytes]] = (), grid=(1, 1, 1), block=(256, 1, 1), smem=0) -> Path:
    raw.mkdir(parents=True, exist_ok=True)
    adesc = []
    for i, (before, after) in enumerate(allocs):
        before.tofile(raw / f"alloc{i}.before.bin")
        after.tofile(raw / f"alloc{i}.after.bin")
        adesc.append({"id": i, "base": 4096 * (i + 1), "bytes": before.nbytes, "before": f"alloc{i}.before.bin",
                      "after": f"alloc{i}.after.bin"})
    cdesc = []
    for i, (qname, sym, data) in enumerate(consts):
        (raw / f"const{i}.bin").write_bytes(data)
        cdesc.append({"name": qname, "symbol": sym, "bytes": len(data), "file": f"const{i}.bin"})
    doc = {"format": "mepgen.capture.raw", "version": 2, "injector": "2", "pid": 1, "api": "cuLaunchKernel",
           "mangled": "_Zx", "demangled": name, "launch_index": 0, "time_ms": 12.0, "grid": list(grid),
           "block": list(block), "cluster": [0, 0, 0], "shared_mem": smem, "stream": {"handle": 0, "id": 1},
           "params": params, "constants": cdesc, "allocations": adesc, "capture_ms": 3.5}
    (raw / "capture.json").write_text(json.dumps(doc))
    return raw


def _ptr(i, name, alloc, offset, nbytes):
    return {"index": i, "name": name, "kind": "pointer", "offset": 8 * i, "size": 8, "bytes_hex": "00" * 8,
            "address": 4096 * (alloc + 1) + offset, "alloc": alloc, "alloc_offset": offset, "alloc_bytes": nbytes}


def _val(i, name, data: bytes):
    return {"index": i, "name": name, "kind": "value", "offset": 0, "size": len(data), "bytes_hex": data.hex()}


def spmv_raw(raw: Path) -> Path:
    params = [_val(0, "nrows", struct.pack("<i", 4)), _ptr(1, "row_ptr", 0, 0, 20), _ptr(2, "col_idx", 1, 0, 24),
              _ptr(3, "vals", 2, 0, 24), _ptr(4, "x", 3, 8, 24), _ptr(5, "y", 4, 0, 16)]
    allocs = [(ROW_PTR, ROW_PTR), (COL_IDX, COL_IDX), (VALS, VALS), (X_ALLOC, X_ALLOC),
              (np.zeros(4, np.float32), Y_AFTER)]
    return _raw(raw, "cg::spmv_csr(int, int const*, int const*, float const*, float const*, float*)", params, allocs)


@pytest.fixture
def spmv_capture(heatcg_extracted, tmp_path):
    app, inv = heatcg_extracted
    plan = make_plan(choose_kernel(inv, "cg::spmv_csr"), tmp_path / "raw", app_root=app)
    dest = tmp_path / "mep" / "data" / "captured"
    manifest = convert(spmv_raw(tmp_path / "raw"), plan, dest, extra={"app": {"exit_code": 0}})
    return manifest, dest


def test_spmv_dumps_become_npy_files_and_a_manifest(spmv_capture):
    m, dest = spmv_capture
    assert load_manifest(dest) == m
    assert (m["kernel"], m["id"], m["grid"], m["block"], m["shared_mem"]) == ("cg::spmv_csr", "cg.spmv_csr",
                                                                              [1, 1, 1], [256, 1, 1], 0)
    assert m["bytes_captured"] == 20 + 24 + 24 + 24 + 16 and m["app"] == {"exit_code": 0}
    p = {q["name"]: q for q in m["params"]}
    assert p["nrows"]["kind"] == "value" and p["nrows"]["value"] == 4 and p["nrows"]["dtype"] == "int32"
    for name, want in (("row_ptr", ROW_PTR), ("col_idx", COL_IDX), ("vals", VALS)):
        got = np.load(dest / "before" / f"{name}.npy")
        assert got.dtype == want.dtype and np.array_equal(got, want)
        assert p[name]["written"] is False and p[name]["role_guess"] == "in" and p[name]["changed_elements"] == 0
    # x points two elements into its allocation: element 0 of the file is what the kernel sees as x[0]
    x = np.load(dest / "before" / "x.npy")
    assert x.tolist() == [1.0, 2.0, 3.0, 4.0]
    assert (p["x"]["offset_bytes"], p["x"]["offset_elements"], p["x"]["count"], p["x"]["alloc_bytes"]) == (8, 2, 4, 24)
    assert p["y"]["written"] is True and p["y"]["role_guess"] == "written" and p["y"]["changed_elements"] == 4
    assert np.array_equal(np.load(dest / "after" / "y.npy"), Y_AFTER)
    assert np.array_equal(np.load(dest / "before" / "y.npy"), np.zeros(4, np.float32))
    assert sorted(f.name for f in (dest / "before").iterdir()) == \
        ["col_idx.npy", "row_ptr.npy", "vals.npy", "x.npy", "y.npy"]
    assert not list(dest.parent.glob(".captured.tmp")), "the staging folder is renamed into place"


def test_reference_outputs_match_a_numpy_spmv_of_the_inputs(spmv_capture):
    _, dest = spmv_capture
    b = {n: np.load(dest / "before" / f"{n}.npy") for n in ("row_ptr", "col_idx", "vals", "x")}
    y = [sum(b["vals"][k] * b["x"][b["col_idx"][k]] for k in range(b["row_ptr"][r], b["row_ptr"][r + 1]))
         for r in range(4)]
    assert np.array_equal(np.load(dest / "after" / "y.npy"), np.array(y, np.float32))


def test_templates_structs_constants_and_shared_allocations(heatcg_extracted, tmp_path):
    app, inv = heatcg_extracted
    # axpy<double>: T binds to double from the launched name
    plan = make_plan(choose_kernel(inv, "cg::axpy"), tmp_path / "r1", app_root=app)
    xy = np.arange(8, dtype=np.float64)
    raw = _raw(tmp_path / "r1", "void cg::axpy<double>(int, double, double const*, double*)",
               [_val(0, "n", struct.pack("<i", 4)), _val(1, "a", struct.pack("<d", 0.5)),
                _ptr(2, "x", 0, 0, 64), _ptr(3, "y", 0, 32, 64)],
               [(xy, np.concatenate([xy[:4], 0.5 * xy[:4] + xy[4:]]))])
    m = convert(raw, plan, tmp_path / "c1")
    p = {q["name"]: q for q in m["params"]}
    assert m["template_args"] == ["double"] and p["a"]["value"] == 0.5 and p["a"]["dtype"] == "float64"
    assert p["x"]["dtype"] == "float64" and p["x"]["count"] == 8 and p["y"]["count"] == 4
    assert np.array_equal(np.load(tmp_path / "c1" / "after" / "y.npy"), 0.5 * xy[:4] + xy[4:])
    assert any("shares its allocation with y" in n for n in p["x"]["notes"])
    assert [{k: a[k] for k in ("id", "bytes", "params")} for a in m["allocations"]] == \
        [{"id": 0, "bytes": 64, "params": ["x", "y"]}]

    # diffuse_step: a struct by value keeps its bytes; the __constant__ stencil becomes const.heat.c_stencil.npy
    plan = make_plan(choose_kernel(inv, "heat::diffuse_step"), tmp_path / "r2", app_root=app)
    grid = struct.pack("<iiff", 4, 4, 1.0, 1.0)
    u = np.arange(16, dtype=np.float32)
    stencil = np.array([-1, 0.5, 0, 0.5, 0], np.float32)
    raw = _raw(tmp_path / "r2", "heat::diffuse_step(float const*, float*, heat::Grid, float, float)",
               [_ptr(0, "u", 0, 0, 64), _ptr(1, "u_new", 1, 0, 64), _val(2, "g", grid),
                _val(3, "alpha", struct.pack("<f", 0.25)), _val(4, "dt", struct.pack("<f", 0.1))],
               [(u, u), (np.zeros(16, np.float32), u + 1)],
               consts=[("heat::c_stencil", "_ZN4heat9c_stencilE", stencil.tobytes())], grid=(1, 1, 1), block=(32, 8, 1))
    m = convert(raw, plan, tmp_path / "c2")
    p = {q["name"]: q for q in m["params"]}
    assert p["g"]["value"] is None and p["g"]["bytes_hex"] == grid.hex() and p["g"]["struct"] == "heat::Grid"
    assert p["alpha"]["value"] == pytest.approx(0.25) and p["alpha"]["dtype"] == "float32"
    (c,) = m["constants"]
    assert (c["dtype"], c["count"], c["file"]) == ("float32", 5, "before/const.heat.c_stencil.npy")
    assert np.array_equal(np.load(tmp_path / "c2" / c["file"]), stencil)


def test_null_pointers_and_raw_byte_element_types(heatcg_extracted, tmp_path):
    app, inv = heatcg_extracted
    plan = make_plan(choose_kernel(inv, "cg::spmv_csr"), tmp_path / "r", app_root=app)
    plan.params[3].pointee = "heat::Grid"
    params = [_val(0, "nrows", struct.pack("<i", 4)), _ptr(1, "row_ptr", 0, 0, 20), _ptr(2, "col_idx", 1, 0, 24),
              _ptr(3, "vals", 2, 0, 24), {**_ptr(4, "x", 0, 0, 0), "null": True}, _ptr(5, "y", 3, 0, 16)]
    for q in params[4:5]:
        for k in ("address", "alloc", "alloc_offset", "alloc_bytes"):
            q.pop(k)
    raw = _raw(tmp_path / "r", "cg::spmv_csr(int, int const*, int const*, float const*, float const*, float*)",
               params, [(ROW_PTR, ROW_PTR), (COL_IDX, COL_IDX), (VALS, VALS), (Y_AFTER, Y_AFTER)])
    m = convert(raw, plan, tmp_path / "c")
    p = {q["name"]: q for q in m["params"]}
    assert p["x"]["kind"] == "null" and not (tmp_path / "c" / "before" / "x.npy").exists()
    assert p["vals"]["dtype"] == "uint8" and p["vals"]["count"] == 24
    assert any("no numpy dtype" in n for n in p["vals"]["notes"])


def test_truncated_or_foreign_dumps_are_refused(heatcg_extracted, tmp_path):
    app, inv = heatcg_extracted
    plan = make_plan(choose_kernel(inv, "cg::spmv_csr"), tmp_path / "raw", app_root=app)
    raw = spmv_raw(tmp_path / "raw")
    (raw / "alloc2.after.bin").write_bytes(b"\0" * 7)
    with pytest.raises(MepgenError, match="capture of vals is truncated"):
        convert(raw, plan, tmp_path / "c")
    (raw / "capture.json").write_text('{"format": "other"}')
    with pytest.raises(MepgenError, match="not a version-2 raw capture"):
        convert(raw, plan, tmp_path / "c")
    with pytest.raises(MepgenError, match="no capture at"):
        load_manifest(tmp_path / "nothing")


SPMV_SPEC = {
    "version": 1,
    "kernel": {"name": "cg::spmv_csr", "id": "cg.spmv_csr", "source": "src/cg.cu", "source_sha256": "0" * 64,
               "start_byte": 0, "end_byte": 10},
    "sizes": {"N": 1024, "NNZ": 5000},
    "params": [
        {"name": "nrows", "role": "scalar", "ctype": "int", "dtype": "int32", "value": "N"},
        {"name": "row_ptr", "role": "in", "ctype": "const int *", "dtype": "int32", "count": "N + 1",
         "init": {"kind": "csr_row_ptr", "rows": "N", "nnz": "NNZ"}},
        {"name": "col_idx", "role": "in", "ctype": "const int *", "dtype": "int32", "count": "NNZ",
         "init": {"kind": "index", "low": 0, "high": "N"}},
        {"name": "vals", "role": "in", "ctype": "const float *", "dtype": "float32", "count": "NNZ",
         "init": {"kind": "uniform", "low": -1, "high": 1}},
        {"name": "x", "role": "in", "ctype": "const float *", "dtype": "float32", "count": "N",
         "init": {"kind": "uniform", "low": -1, "high": 1}},
        {"name": "y", "role": "out", "ctype": "float *", "dtype": "float32", "count": "N"}],
    "launch": {"grid": ["(N + 255) / 256"], "block": [256], "shared_mem": "0", "callee": "cg::spmv_csr"},
    "todo": [{"field": "sizes.NNZ", "reason": "the number of non-zeros is computed at run time"}],
}


def test_use_points_mep_yaml_at_the_capture(spmv_capture):
    m, dest = spmv_capture
    mep = dest.parent.parent
    (mep / "mep.yaml").write_text(yaml.safe_dump(SPMV_SPEC, sort_keys=False))
    original = (mep / "mep.yaml").read_text()
    report = apply_capture(mep, m)
    spec = load_spec(mep / "mep.yaml")
    assert spec.sizes == {"N": 4, "NNZ": 6}
    assert spec.param("nrows").value == "N" and spec.param("row_ptr").count == "N + 1"
    assert spec.param("col_idx").count == "NNZ" and spec.param("vals").count == "NNZ"
    for name in ("row_ptr", "col_idx", "vals", "x"):
        assert spec.param(name).init.kind == "file"
        assert spec.param(name).init.args == {"path": f"data/captured/before/{name}.npy"}
    assert spec.param("y").init is None and spec.launch.grid == ["(N + 255) / 256"]
    assert spec.todo == [], "the capture settles the todo on NNZ"
    # each buffer starts where the application's did, modulo 2 MiB (x: 8 bytes into its 4096-byte-aligned allocation)
    assert spec.param("x").placement == 4 * 4096 + 8 and spec.param("row_ptr").placement == 4096
    assert report.backup.name == "mep.yaml" + BACKUP_SUFFIX and report.backup.read_text() == original
    assert np.array_equal(np.load(mep / "data" / "in" / "x.npy"), [1.0, 2.0, 3.0, 4.0])
    assert np.array_equal(np.load(mep / "data" / "in" / "row_ptr.npy"), ROW_PTR)
    # a second --use keeps the first original
    apply_capture(mep, m)
    assert report.backup.read_text() == original


def test_use_sets_literals_where_expressions_disagree(spmv_capture):
    m, dest = spmv_capture
    mep = dest.parent.parent
    spec = json.loads(json.dumps(SPMV_SPEC))
    spec["params"][0]["value"] = "N / 2"
    spec["params"][4]["count"] = "N * 2"
    (mep / "mep.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    m = {**m, "grid": [3, 1, 1], "shared_mem": 64}
    report = apply_capture(mep, m)
    got = load_spec(mep / "mep.yaml")
    assert got.param("nrows").value == "4" and got.param("x").count == "4"
    assert got.launch.grid == ["3"] and got.launch.shared_mem == "64"
    assert any("launch.grid" in c for c in report.changes)


def test_use_settles_the_launch_todo_and_sizes_only_the_launch_used(spmv_capture):
    """The issue's case: static completion left `launch` and `sizes.NBLOCKS` todos; the capture answers both, and
    the result passes `--refresh`'s validation with nothing left for a person."""
    m, dest = spmv_capture
    mep = dest.parent.parent
    spec = json.loads(json.dumps(SPMV_SPEC))
    spec["sizes"]["NBLOCKS"] = 1
    spec["launch"]["grid"] = ["NBLOCKS"]
    spec["todo"] = [{"field": "launch", "reason": "the grid could not be traced"},
                    {"field": "sizes.NBLOCKS", "reason": "a placeholder"},
                    {"field": "sizes.NNZ", "reason": "computed at run time"}]
    (mep / "mep.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    report = apply_capture(mep, {**m, "grid": [7, 1, 1]}, include_flags=["-I/opt/app/include"])
    got = load_spec(mep / "mep.yaml")
    assert got.todo == [] and got.sizes["NBLOCKS"] == 7 and got.launch.grid == ["NBLOCKS"]
    assert "-I/opt/app/include" in got.build.nvcc_flags
    assert any("3 entr(ies) settled" in c for c in report.changes)
    # a literal grid leaves a size symbol no expression uses: its todo is settled as well
    spec["launch"]["grid"] = ["NBLOCKS + 1"]
    (mep / "mep.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    (mep / ("mep.yaml" + BACKUP_SUFFIX)).unlink()
    apply_capture(mep, {**m, "grid": [5, 1, 1]})
    got = load_spec(mep / "mep.yaml")
    assert got.launch.grid == ["5"] and got.todo == []


def test_use_keeps_a_smaller_spec_count_and_trims_the_input(spmv_capture):
    m, dest = spmv_capture
    mep = dest.parent.parent
    spec = json.loads(json.dumps(SPMV_SPEC))
    spec["params"][4]["count"] = "N - 1"      # the spec's x is one element shorter than its allocation
    (mep / "mep.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    report = apply_capture(mep, m)
    got = load_spec(mep / "mep.yaml")
    assert got.param("x").count == "N - 1"
    assert got.param("x").init.args == {"path": "data/captured/trimmed/x.npy"}
    assert np.array_equal(np.load(dest / "trimmed" / "x.npy"), [1.0, 2.0, 3.0])
    assert np.array_equal(np.load(dest / "before" / "x.npy"), [1.0, 2.0, 3.0, 4.0]), "the capture itself is kept"
    assert any("3 of the 4 captured elements" in c for c in report.changes)
    assert (mep / "mep.yaml").read_text().startswith("# MEP of cg::spmv_csr, pointed at the data captured")


def test_use_refuses_without_an_mep_or_with_another_dtype(spmv_capture):
    m, dest = spmv_capture
    mep = dest.parent.parent
    with pytest.raises(MepgenError, match=r"no MEP at .*run `mepgen mep cg::spmv_csr` first"):
        apply_capture(mep, m)
    spec = json.loads(json.dumps(SPMV_SPEC))
    spec["params"][3]["dtype"] = "float64"
    (mep / "mep.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    with pytest.raises(MepgenError, match="vals: mep.yaml says float64, the capture holds float32"):
        apply_capture(mep, m)
    assert not (mep / ("mep.yaml" + BACKUP_SUFFIX)).exists(), "a refused --use changes nothing"


def test_scalar_literals_round_trip():
    assert literal(0.1, "float32", "float", "") == "0.1f"
    assert float(np.float32(literal(1e-5, "float32", "float", "")[:-1])) == np.float32(1e-5)
    assert literal(7, "int32", "int", "") == "7" and literal(7, "uint64", "size_t", "") == "7ull"
    assert literal(0.1, "float64", "double", "") == "0.1" and literal(True, "bool", "bool", "") == "true"
    nan = struct.pack("<f", float("nan")).hex()
    assert literal(float("nan"), "float32", "float", nan).startswith("[] { float v_;")
    expr = bytes_expression("heat::Grid", "0400000004000000")
    assert "heat::Grid v_;" in expr and "b_[8] = {0x04, 0x00, 0x00, 0x00, 0x04" in expr and expr.endswith("}()")


def _plan(inv, tmp_path, **kw):
    return make_plan(choose_kernel(inv, "cg::spmv_csr"), tmp_path, **kw)


def test_failures_are_explained_in_one_line(heatcg_extracted, tmp_path):
    _, inv = heatcg_extracted
    plan = _plan(inv, tmp_path, launch=5)
    def status(seen=None, runtime_only=None, error=None, graph_launches=0, **target):
        return {"seen": seen or {}, "runtime_only": runtime_only or {}, "error": error or "",
                "graph_launches": graph_launches, "targets": [target]}
    say = lambda *statuses, code=0: explain_failure(AppRun(["./app"], code, 1.0, [status(**s) for s in statuses]), plan)
    assert "injector never started (exit code 1)" in say(code=1)
    assert say({"error": "cuptiSubscribe: CUPTI_ERROR_MULTIPLE_SUBSCRIBERS"}).endswith(
        "failed to start: cuptiSubscribe: CUPTI_ERROR_MULTIPLE_SUBSCRIBERS")
    assert say({"refusal": "parameter x points to managed (unified) memory"}) == \
        "cannot capture cg::spmv_csr launch 5: parameter x points to managed (unified) memory"
    assert "launched 3 time(s), so there is no launch 5" in say({"matched": 2, "seen": {}}, {"matched": 1})
    seen = {"cg::spmv_csr2(int)": 4, "heat::diffuse_step(float const*)": 9}
    msg = say({"seen": seen}, code=1)
    assert "cg::spmv_csr was never launched (2 other kernel(s) were)" in msg
    assert "closest launched: cg::spmv_csr2(int)" in msg and msg.endswith("exited with 1")
    assert "launched no kernel at all" in say({"seen": {}})
    assert "without passing through the driver" in say({"seen": {}, "runtime_only": {"cg::spmv_csr(int)": 3}})
    assert "launched CUDA graphs 2 time(s)" in say({"seen": {}, "graph_launches": 2})
    assert "a cooperative launch" in say({"refusal": "a cooperative launch (cuLaunchCooperativeKernel): ..."})
    plan.after_ms = 50.0
    assert "all before --after-ms 50" in say({"before_window": 7})
    axpy = make_plan(choose_kernel(inv, "cg::axpy<half>"), tmp_path)
    msg = explain_failure(AppRun(["./app"], 0, 1.0, [status(seen={"void cg::axpy<float>(int)": 2})]), axpy)
    assert "cg::axpy<half> never launched; its instantiations that did: void cg::axpy<float>(int)" in msg


def test_cli_needs_a_command_or_a_capture_to_use(heatcg_extracted):
    from mepgen.cli import main
    app, _ = heatcg_extracted
    r = CliRunner().invoke(main, ["capture", "cg::spmv_csr", "-C", str(app)])
    assert r.exit_code == 2 and "no application to run: give it after `--`" in r.output
    r = CliRunner().invoke(main, ["capture", "cg::spmv_csr", "-C", str(app), "--use"])
    assert r.exit_code == 3 and "cg::spmv_csr: not captured: no capture at" in r.output
    r = CliRunner().invoke(main, ["capture", "--kernels", "cg::spmv_csr", "--all", "-C", str(app), "--", "true"])
    assert r.exit_code == 2 and "choose kernels one way" in r.output
    r = CliRunner().invoke(main, ["capture", "--kernels", "cg::spmv_csr", "--launch", "2", "--longest", "-C", str(app),
                                  "--", "true"])
    assert r.exit_code == 2 and "give one" in r.output
    r = CliRunner().invoke(main, ["capture", "nope", "-C", str(app), "--", "true"])
    assert r.exit_code == 2 and "no kernel named 'nope'" in r.output


@pytest.mark.nvcc
def test_cli_says_when_the_injector_never_started(heatcg_extracted, capture_injector, tmp_path, monkeypatch):
    from mepgen.cli import main
    monkeypatch.setenv("XDG_CACHE_HOME", str(capture_injector[1]))    # built once per session
    app, _ = heatcg_extracted
    # our options may follow KERNEL; everything after `--` is the application's, its own options included
    r = CliRunner().invoke(main, ["capture", "cg::spmv_csr", "-C", str(app), "--launch", "2", "--",
                                  "true", "--steps", "3"])
    assert r.exit_code == 3, r.output
    assert "the capture injector never started (exit code 0)" in r.output
    assert not list((app / ".mepgen" / "cache").glob("capture-*")), "the raw folder is removed"
    r = CliRunner().invoke(main, ["capture", "cg::spmv_csr", "-C", str(app), "--", str(tmp_path / "no-app")])
    assert r.exit_code == 2 and "not found" in r.output


def test_captured_bytes_read_back_only_what_bytes_expression_wrote():
    from mepgen.cbytes import bytes_expression, captured_bytes
    raw = bytes(range(0, 256, 5))
    assert captured_bytes(bytes_expression("ns::Params", raw.hex())) == raw
    assert captured_bytes(bytes_expression("decltype(ns::c_table)", "ff00")) == b"\xff\x00"
    assert captured_bytes("heat::Grid{NX, NY, 1.0f, 0.5f}") is None and captured_bytes("0.5f") is None
    assert captured_bytes(None) is None


def test_the_applications_output_never_reaches_mepgens_stdout(tmp_path):
    """--json is for scripts: the application's stdout goes to stderr, whether stderr is a file or not (relayed)."""
    import sys
    prog = ("import io, os, sys\n"
            "from mepgen.capture.launcher import _run\n"
            "cmd = ['sh', '-c', 'echo app-line; echo app-err >&2']\n"
            "if sys.argv[1] == 'relay': sys.stderr = io.TextIOWrapper(io.BytesIO())\n"
            "code = _run(cmd, dict(os.environ), 30)\n"
            "if sys.argv[1] == 'relay': sys.stderr.flush(); sys.__stderr__.write(sys.stderr.buffer.getvalue().decode())\n"
            "print('[]')\n")
    root = Path(__file__).resolve().parents[2]
    for mode in ("file", "relay"):
        r = subprocess.run([sys.executable, "-c", prog, mode], capture_output=True, text=True, timeout=60, cwd=root)
        assert r.returncode == 0, r.stderr
        assert r.stdout == "[]\n" and "app-line" in r.stderr and "app-err" in r.stderr, (mode, r)
