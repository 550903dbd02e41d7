"""Interrupts (issue 40): SIGTERM or Ctrl-C to `mepgen extract` stops its parser processes within a second and
writes nothing."""
from __future__ import annotations

import os
import signal
import time

import pytest

import mepgen.extract.run as run
from fault_tools import alive, slow_facts, spawn, wait


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_the_parsers_within_a_second(tmp_path, monkeypatch, sig):
    app = tmp_path / "app"
    app.mkdir()
    for i in range(4):
        (app / f"k{i}.cu").write_text(f"__global__ void k{i}(float* x) {{ x[threadIdx.x] = {i}; }}\n")
    pids = tmp_path / "pids"
    pids.mkdir()
    monkeypatch.setattr(run, "tu_facts", slow_facts)
    pid, out = spawn(["extract", str(app), "-j", "2", "--no-cache"], env={"MEPGEN_TEST_PIDS": str(pids)})
    deadline = time.monotonic() + 60
    while len(list(pids.iterdir())) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    workers = [int(p.name) for p in pids.iterdir()]
    assert len(workers) == 2
    os.kill(pid, sig)
    sent = time.monotonic()
    rc, text = wait(pid, out)
    while any(alive(w) for w in workers) and time.monotonic() - sent < 5:
        time.sleep(0.02)
    took = time.monotonic() - sent
    assert not any(alive(w) for w in workers), text
    assert took < 1.5, f"{took:.2f} s"
    assert rc == 130 and "mepgen: interrupted" in text and "Traceback" not in text, text
    assert not (app / ".mepgen/inventory.json").exists()
