"""Guard zones around device buffers (guards.py, the pycuda worker's; the native harness's guards.h keeps the
same layout): a write past the end or before the start is found, named and the guards are whole again for
the next candidate; alignment and `placement` are kept. CPU: the stand-in driver of tests/fake_pycuda."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from mepgen.evaluate import guards
from mepgen.evaluate.native import classify
from mepgen.evaluate.process import Completed
from mepgen.spec import PLACEMENT_SPAN

def _fake_driver():
    """tests/fake_pycuda's driver, loaded under another name: registered as `pycuda` it would make every later
    test of the session believe pycuda is installed."""
    import importlib.util
    where = Path(__file__).resolve().parent.parent / "fake_pycuda" / "pycuda" / "driver.py"
    found = importlib.util.spec_from_file_location("fake_pycuda_driver_guards", where)
    module = importlib.util.module_from_spec(found)
    found.loader.exec_module(module)
    return module


fake = _fake_driver()


@pytest.fixture
def g():
    return guards.DeviceGuards(fake)


def poke(address: int, data: bytes) -> None:
    fake.memcpy_htod(address, data)


def test_buffers_keep_their_alignment_and_placement(g):
    small = g.allocate(100, None, PLACEMENT_SPAN, "x")
    assert small % 256 == 0
    placed = g.allocate(4096, 768, PLACEMENT_SPAN, "y")
    assert (placed - 768) % PLACEMENT_SPAN == 0
    large = g.allocate(PLACEMENT_SPAN, None, PLACEMENT_SPAN, "z")
    assert large % PLACEMENT_SPAN == 0
    assert g.check("the run") is None
    assert guards.GUARD_BYTES % 256 == 0 and guards.after_bytes(100) == 156 + guards.GUARD_BYTES


def test_a_write_past_the_end_is_named_and_the_guards_are_filled_again(g):
    x = g.allocate(100, None, PLACEMENT_SPAN, "x")
    y = g.allocate(1024, None, PLACEMENT_SPAN, "y")
    poke(y, b"\1" * 1024)                                   # inside: not a hit
    assert g.check("the run") is None
    poke(y + 1024 + 256, b"\0" * 8)                         # 64 floats past the end
    hit = g.check("the run")
    assert hit == {"buffer": "y", "side": "after", "offset": 256, "bytes": hit["bytes"], "phase": "the run"}
    assert 1 <= hit["bytes"] <= 8
    assert g.check("the run") is None                       # filled again: the next candidate starts clean
    poke(x + 100, b"\x55")                                  # one byte past an unaligned end
    assert g.check("the run")["offset"] == 0


def test_a_write_before_the_start_is_named_with_its_distance(g):
    x = g.allocate(512, None, PLACEMENT_SPAN, "x")
    poke(x - 8, b"\0\0\0\0")
    hit = g.check("timing and the re-check")
    assert hit["buffer"] == "x" and hit["side"] == "before" and 5 <= hit["offset"] <= 8
    line = guards.describe(hit)
    assert "before the start of x" in line and "timing and the re-check" in line


def test_the_pattern_differs_between_processes_and_is_not_a_poison_byte():
    a, b = guards.DeviceGuards(fake), guards.DeviceGuards(fake)
    assert a.pattern[:4].tobytes() != b.pattern[:4].tobytes() or a.pattern[:4].tobytes() != b"\0\0\0\0"
    assert a.pattern[0] & 1


def test_the_native_harness_memory_error_is_an_out_of_bounds_fault():
    line = ('MEPGEN_RESULT {"status": "memory_error", "kernel": "k", "buffer": "y", "side": "after", "offset": 256, '
            '"bytes": 4, "phase": "the run"}\n')
    record, fault = classify(Completed(["mep"], 4, line, "", 0.1), 10)
    assert fault.kind == "out_of_bounds" and "past the end of y" in fault.message and "at byte 256" in fault.message


def test_the_harness_template_guards_every_buffer_and_checks_after_each_verification():
    from mepgen.harness import render_harness
    from mepgen.spec import load_spec
    text = render_harness(load_spec(Path(__file__).resolve().parent.parent / "evaluate_fixtures" / "axpy" / "mep.yaml"))
    assert 'reinterpret_cast<void**>(&d_x), "x")' in text and 'reinterpret_cast<void**>(&d_y), "y")' in text
    assert text.count("mep_guard_check(") == 3        # the definition, after the run, after timing's re-check
    assert "--exact-alloc" in text and "constexpr size_t mep_guard_bytes = 65536;" in text
    assert np.int64(guards.GUARD_BYTES) == 65536
