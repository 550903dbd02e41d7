"""Time-outs and crash isolation with real subprocesses; the native backend's reading of harness results."""
from __future__ import annotations

import sys
import time

import numpy as np
import pytest

from evaluate_fakes import FAKE_HARNESS, FakeNative, install, make_mep, variant
from mepgen.evaluate import process
from mepgen.evaluate.backend import InputSet, TimingPlan
from mepgen.evaluate.native import classify, parse_result_line
from mepgen.evaluate.store import Store
from mepgen.spec import load_spec


def fake(mode, *args):
    return [sys.executable, str(FAKE_HARNESS), "--mode", mode, *args]


def test_hang_is_killed_at_the_time_out():
    start = time.monotonic()
    done = process.run(fake("hang"), timeout=1.0)
    assert done.timed_out and done.returncode is None
    assert time.monotonic() - start < 8


def test_grandchild_holding_the_pipes_is_killed_too():
    start = time.monotonic()
    done = process.run(fake("hang_child"), timeout=1.0)
    assert done.timed_out and time.monotonic() - start < 8
    rec, fault = classify(done, 1.0)
    assert fault.kind == "timeout" and "killed" in fault.message


def test_segfault_is_a_crash_result():
    done = process.run(fake("segv"), timeout=30)
    assert done.signal_name == "SIGSEGV"
    _, fault = classify(done, 30)
    assert fault.kind == "crash" and "SIGSEGV" in fault.message


def test_cuda_error_line_is_classified():
    done = process.run(fake("illegal"), timeout=30)
    rec, fault = classify(done, 30)
    assert done.returncode == 3 and rec["status"] == "cuda_error"
    assert fault.kind == "illegal_address"
    assert "cudaErrorIllegalAddress: an illegal memory access was encountered" in fault.message


def test_input_error_exit_2_is_a_harness_error():
    _, fault = classify(process.run(fake("badinput"), timeout=30), 30)
    assert fault.kind == "harness_error" and "x.npy" in fault.message


def test_result_line_parsing():
    assert parse_result_line('noise\nMEPGEN_RESULT {"status": "ok", "median_ms": 1.5}\n') == {"status": "ok",
                                                                                              "median_ms": 1.5}
    assert parse_result_line("MEPGEN_RESULT {broken") is None
    assert parse_result_line("nothing here") is None


def test_output_is_clipped():
    done = process.run([sys.executable, "-c", "print('x' * 2_000_000)"], timeout=30)
    assert done.returncode == 0 and len(done.stdout) < process.MAX_OUTPUT + 100


@pytest.fixture
def backend(tmp_path):
    mep = make_mep(tmp_path)
    spec = load_spec(mep / "mep.yaml")
    store = Store(mep, spec)
    return FakeNative(spec, mep, store.build_dir, run_timeout=3.0), InputSet(0, store.input_set(0)), mep


def test_native_run_reads_outputs_and_inputs_back(backend, tmp_path):
    be, inputs, mep = backend
    built = be.compile(mep / "kernel.cu")
    out = be.run(built, inputs, tmp_path / "o")
    assert out.fault is None and out.record["device"] == "FAKE GPU"
    x = np.load(inputs.data_dir / "x.npy")
    y = np.load(inputs.data_dir / "y.npy")
    np.testing.assert_array_equal(out.outputs["y"], np.float32(0.5) * x + y)
    np.testing.assert_array_equal(out.inputs_after["x"], x)


def test_native_fault_carries_the_input_set(backend, tmp_path):
    be, inputs, mep = backend
    out = be.run(be.compile(variant(mep, "hang")), InputSet(2, inputs.data_dir), tmp_path / "o")
    assert out.fault.kind == "timeout" and out.fault.input_set == 2


def test_native_timing_alternates_rounds(backend, tmp_path):
    be, inputs, mep = backend
    base, cand = be.compile(mep / "kernel.cu"), be.compile(variant(mep, "faster"))
    t = be.time(base, cand, inputs, TimingPlan(warmup=1, reps=7, rounds=2), tmp_path / "t")
    assert t.fault is None and len(t.baseline_rounds) == 2 and len(t.candidate_rounds) == 2
    assert all(len(r) == 7 for r in t.baseline_rounds + t.candidate_rounds)
    assert np.median(t.candidate_rounds[0]) < np.median(t.baseline_rounds[0])
    assert sorted(p.name for p in (tmp_path / "t").iterdir()) == ["round0-baseline", "round0-candidate",
                                                                  "round1-baseline", "round1-candidate"]
    assert "y" in t.after


def test_a_crash_does_not_stop_the_next_candidate(tmp_path, monkeypatch):
    from mepgen.evaluate import Evaluator, Options
    from mepgen.evaluate.batch import evaluate_many
    install(monkeypatch)
    mep = make_mep(tmp_path)
    ev = Evaluator(load_spec(mep / "mep.yaml"), mep, Options(reps=5, rounds=1, run_timeout=3.0))
    ev.prepare()
    res = evaluate_many(ev, [(m, variant(mep, m)) for m in ("segv", "hang", "illegal", "good")])
    assert [r.status for r in res] == ["runtime_fault"] * 3 + ["ok"]
