"""Verification and decision logic on real numpy arrays."""
from __future__ import annotations

import numpy as np
import pytest

from mepgen.evaluate import verify
from mepgen.evaluate.decide import decide, round_range, summarize
from mepgen.evaluate.verify import (DEFAULT_TOLERANCE, compare, reference_problem, tolerance_for, unchanged,
                                   written_region)
from mepgen.spec import Tolerance, load_spec
from evaluate_fakes import FIXTURES

TOL = Tolerance(rtol=1e-5, atol=1e-6)


def poison_f32(n):
    return np.frombuffer(b"\xff" * 4 * n, np.float32).copy()


def test_equal_and_within_tolerance_match():
    ref = np.linspace(-1, 1, 1000, dtype=np.float32)
    assert compare("y", ref.copy(), ref, TOL, 0) is None
    assert compare("y", (ref * (1 + 5e-6)).astype(np.float32), ref, TOL, 0) is None


def test_beyond_tolerance_reports_the_numbers():
    ref = np.ones(100, np.float32)
    got = ref.copy()
    got[7] = 1.01
    got[50] = 0.98
    m = compare("y", got, ref, TOL, 2)
    assert (m.bad, m.total, m.first_bad_index, m.input_set) == (2, 100, 7, 2)
    assert m.max_abs_err == pytest.approx(0.02, rel=1e-3)
    assert m.max_rel_err == pytest.approx(0.02, rel=1e-3)
    assert m.expected == 1.0 and m.got == pytest.approx(1.01)
    assert "2 of 100 elements wrong" in m.describe()


def test_nan_and_inf_never_match_even_where_the_reference_has_them():
    ref = np.array([1.0, np.nan, np.inf, 4.0], np.float32)
    m = compare("y", ref.copy(), ref, Tolerance(1.0, 1.0), 0)
    assert m.bad == 2 and m.nan == 1 and m.inf == 1
    assert "NaN" in reference_problem("y", ref, 0)


def test_unwritten_float_elements_are_counted_apart_from_nan():
    ref = np.arange(10, dtype=np.float32)
    got = ref.copy()
    got[5:] = poison_f32(5)
    got[0] = np.nan                      # a NaN the kernel wrote (not the poison's bits)
    m = compare("y", got, ref, TOL, 0)
    assert (m.bad, m.unwritten, m.nan) == (6, 5, 1)
    assert "5 never written" in m.describe()


def test_integers_are_exact_and_poison_is_detected():
    ref = np.arange(8, dtype=np.int32)
    got = ref.copy()
    got[3] += 1
    got[6:] = np.frombuffer(b"\xa5" * 8, np.int32)
    m = compare("bins", got, ref, Tolerance(0.0, 0.0), 1)
    assert (m.bad, m.unwritten, m.first_bad_index) == (3, 2, 3)


def test_bool_poison_never_reads_as_true():
    ref = np.array([True, False, True])
    got = np.frombuffer(bytes([1, 0, 0xA5]), np.bool_)
    m = compare("flags", got, ref, Tolerance(0.0, 0.0), 0)
    assert m.bad == 1 and m.unwritten == 1


def test_wrong_size_or_dtype_is_a_mismatch():
    ref = np.zeros(10, np.float32)
    assert "expected 10 elements of float32" in compare("y", np.zeros(9, np.float32), ref, TOL, 0).note
    assert compare("y", np.zeros(10, np.float64), ref, TOL, 0).bad == 10


def test_reference_problems():
    assert reference_problem("y", np.ones(4, np.float32), 0) is None
    msg = reference_problem("u_new", poison_f32(4), 1)
    assert "leaves 4 of 4 elements of 'u_new' unwritten" in msg and "'inout'" in msg


def test_an_output_written_in_a_slice_is_compared_where_the_original_writes():
    """The original writes elements 2..5 of 8 (a plane of a 3D array): no reference problem, a note naming the
    region; a candidate that writes the same is right, one that also writes outside it or misses one is not."""
    ref = poison_f32(8)
    ref[2:6] = [1.0, 2.0, 3.0, 4.0]
    assert reference_problem("plane", ref, 0) is None
    note = written_region("plane", ref, 0)
    assert "writes 4 of 8 elements of 'plane'" in note and "[2, 5]" in note
    assert compare("plane", ref.copy(), ref, TOL, 0) is None
    spills = ref.copy()
    spills[7] = 0.0
    assert compare("plane", spills, ref, TOL, 0).bad == 1
    misses = ref.copy()
    misses[3] = poison_f32(1)[0]
    m = compare("plane", misses, ref, TOL, 0)
    assert (m.bad, m.unwritten) == (1, 1)
    assert written_region("y", np.ones(3, np.float32), 0) is None


def test_poison_bits_in_a_buffer_that_is_never_poisoned_are_data():
    """A record kept as bytes (uint8) in an inout buffer: about one byte in 256 is 0xA5, the integer poison; the
    harness resets inout buffers from their inputs, never poisons them, so those bytes are written data."""
    ref = np.array([1, 0xA5, 7, 0xA5], np.uint8)
    assert reference_problem("rec", ref, 0) is None          # an out buffer: read as written in part (a slice)
    assert "writes 2 of 4 elements of 'rec'" in written_region("rec", ref, 0)
    assert reference_problem("rec", ref, 0, poisoned=False) is None
    got = ref.copy()
    got[0] = 2
    assert compare("rec", got, ref, TOL, 0).unwritten == 0
    got[2] = 0xA5
    assert compare("rec", got, ref, TOL, 0).unwritten == 1
    assert compare("rec", got, ref, TOL, 0, poisoned=False).unwritten == 0


def test_tolerance_from_spec_else_default_by_dtype():
    spec = load_spec(FIXTURES / "axpy" / "mep.yaml")
    assert tolerance_for(spec, "y") == Tolerance(1e-5, 1e-6)
    heat = load_spec(FIXTURES / "heat" / "mep.yaml")
    assert tolerance_for(heat, "u_new") == DEFAULT_TOLERANCE["float32"]


def test_unchanged_is_bit_exact():
    a = np.array([0.0, 1.0], np.float32)
    assert unchanged(a, a.copy())
    assert not unchanged(a, np.array([-0.0, 1.0], np.float32))   # -0.0 == 0.0, but the bits differ


# --- the decision rule ------------------------------------------------------------------------------

def rounds(center, noise, rng, n=3, reps=50):
    return [list(center * (1 + noise * rng.standard_normal(reps))) for _ in range(n)]


def test_clear_win_is_faster():
    rng = np.random.default_rng(1)
    d = decide(rounds(1.0, 0.005, rng), rounds(0.8, 0.005, rng))
    assert d.decision == "faster" and d.speedup == pytest.approx(1.25, rel=0.01)
    assert "won 3/3 rounds" in d.why


def test_gain_inside_the_noise_is_not_a_win():
    rng = np.random.default_rng(2)
    base = [list(1.0 + 0.001 * rng.standard_normal(50)), list(1.06 + 0.001 * rng.standard_normal(50)),
            list(0.98 + 0.001 * rng.standard_normal(50))]           # rounds drift by 8%
    d = decide(base, rounds(0.96, 0.001, rng))
    assert d.noise > 0.05 and d.decision == "same"


def test_gain_below_min_gain_is_not_a_win():
    rng = np.random.default_rng(3)
    d = decide(rounds(1.0, 0.0005, rng), rounds(0.995, 0.0005, rng))
    assert d.decision == "same" and d.threshold >= 0.01


def test_losing_one_round_is_not_a_win():
    base = [[1.0] * 20, [1.0] * 20, [1.0] * 20]
    cand = [[0.5] * 20, [0.5] * 20, [1.2] * 20]
    assert decide(base, cand).decision != "faster"


def test_slower():
    rng = np.random.default_rng(4)
    assert decide(rounds(1.0, 0.002, rng), rounds(1.3, 0.002, rng)).decision == "slower"


def test_summary_numbers():
    s = summarize([[1.0, 2.0, 3.0], [4.0, 5.0]])
    assert (s.median_ms, s.min_ms, s.max_ms, s.launches) == (3.0, 1.0, 5.0, 5)
    assert s.round_medians_ms == [2.0, 4.5]
    assert round_range([1.0, 1.01, 0.99]) == pytest.approx(0.02)


def test_sliced_float_check_gives_the_same_verdicts_as_the_whole_array(monkeypatch):
    """compare() decides a float output slice by slice (verify.CHUNK); a bad element in any slice, the last
    partial one included, must still be found, and NaN/Inf on either side never match."""
    import mepgen.evaluate.verify as verify_mod
    monkeypatch.setattr(verify_mod, "CHUNK", 7)
    tol = Tolerance(rtol=1e-4, atol=1e-6)
    rng = np.random.default_rng(3)
    for dtype in (np.float32, np.float64, np.float16):
        ref = rng.uniform(-1, 1, 50).astype(dtype)
        assert compare("y", ref.copy(), ref, tol, 0) is None
        for pos in (0, 6, 7, 48, 49):
            for bad in (np.nan, np.inf, -np.inf, 0.5):
                got = ref.copy()
                got[pos] = ref[pos] + dtype(bad)
                m = compare("y", got, ref, tol, 0)
                assert m is not None and m.bad == 1 and m.first_bad_index == pos, (dtype, pos, bad)
            inf_ref = ref.copy()
            inf_ref[pos] = np.inf
            m = compare("y", inf_ref.copy(), inf_ref, tol, 0)
            assert m is not None and m.first_bad_index == pos


def test_poison_is_found_by_element_for_every_width():
    for dtype, byte in ((np.float32, 0xFF), (np.float64, 0xFF), (np.float16, 0xFF), (np.int32, 0xA5),
                        (np.int64, 0xA5), (np.uint8, 0xA5), (np.int16, 0xA5)):
        a = np.zeros(5, dtype)
        a.view(np.uint8)[a.itemsize:2 * a.itemsize] = byte          # element 1 fully poisoned
        a.view(np.uint8)[3 * a.itemsize] = byte                      # element 3: one byte only
        assert verify._poisoned(a).tolist() == [False, True, False, a.itemsize == 1, False], dtype


def test_bit_identical_outputs_still_fail_where_both_hold_nan_or_inf():
    """The fast path (bit-identical slices) must not let a NaN or Inf that both sides hold pass."""
    from mepgen.evaluate.verify import compare
    from mepgen.spec import Tolerance
    ref = np.linspace(0, 1, 3000, dtype=np.float32)
    assert compare("y", ref.copy(), ref, Tolerance(rtol=0.0, atol=0.0), 0) is None
    for bad in (np.nan, np.inf):
        r = ref.copy()
        r[1234] = bad
        m = compare("y", r.copy(), r, Tolerance(rtol=1e-4, atol=1e-5), 0, poisoned=False)
        assert m is not None and m.bad == 1 and m.first_bad_index == 1234


def test_changed_elements_counts_bitwise_differences():
    from mepgen.evaluate.verify import changed_elements
    a = np.arange(10, dtype=np.float64)
    b = a.copy()
    b[[2, 7]] += 1
    assert changed_elements(a, b) == 2 and changed_elements(a, a.copy()) == 0
    c = np.zeros(4, dtype=np.complex64)
    d = c.copy()
    d[3] = 1j
    assert changed_elements(c, d) == 1


def test_an_output_written_in_part_is_decided_slice_by_slice(monkeypatch):
    """Unwritten elements are a NaN pattern: an output the original writes only in part (a border left alone) must
    still be decided chunk by chunk, not by the slow whole-array evidence (float64 copies of every element), and with
    the same verdicts: both unwritten there -> a match, a reassociated sum within tolerance -> a match, writing
    an element the original leaves alone or leaving one unwritten -> a mismatch."""
    monkeypatch.setattr(verify, "CHUNK", 16)
    ref = poison_f32(100)
    ref[10:90] = np.linspace(1.0, 2.0, 80, dtype=np.float32)
    slow = []
    real_astype = np.ndarray.astype

    class Spy(np.ndarray):
        def astype(self, *a, **k):
            if self.size == 100:
                slow.append(1)
            return real_astype(np.asarray(self), *a, **k)

    close = ref.copy()
    close[10:90] *= np.float32(1 + 2e-6)
    for got in (ref.copy(), close):
        assert compare("u", got.view(Spy), ref, TOL, 0) is None
    assert not slow
    spills = ref.copy()
    spills[3] = 0.5
    assert compare("u", spills, ref, TOL, 0).bad == 1
    misses = ref.copy()
    misses[40] = poison_f32(1)[0]
    m = compare("u", misses, ref, TOL, 0)
    assert (m.bad, m.unwritten) == (1, 1)
    assert compare("u", ref.copy(), ref, TOL, 0, poisoned=False) is not None       # an inout buffer: NaN is data


def test_unwritten_border_columns_in_every_slice_take_the_bit_identical_path(monkeypatch):
    """A 2D grid whose original leaves each row's first and last element unwritten (a border) has poison in every
    slice: an output bit for bit the reference must still be decided without float64 copies, with the same
    verdicts (a NaN both sides wrote is no match; poison where the reference has a written value is unwritten)."""
    monkeypatch.setattr(verify, "CHUNK", 16)
    rows, cols = 12, 10
    ref = np.linspace(-1.0, 1.0, rows * cols, dtype=np.float32).reshape(rows, cols)
    ref[:, 0] = ref[:, -1] = poison_f32(rows)
    ref = ref.reshape(-1)
    slow = []
    real_astype = np.ndarray.astype

    class Spy(np.ndarray):
        def astype(self, *a, **k):
            slow.append(1)
            return real_astype(np.asarray(self), *a, **k)

    assert compare("u", ref.copy().view(Spy), ref, TOL, 0) is None
    assert not slow
    both_nan = ref.copy()
    both_nan[25] = np.float32(np.nan)          # a NaN the kernel wrote (quiet NaN bits, not the poison's)
    m = compare("u", both_nan.copy(), both_nan, TOL, 0)
    assert m is not None and m.bad == 1 and m.first_bad_index == 25
    assert compare("u", ref.copy(), ref, TOL, 0, poisoned=False) is not None       # inout: the NaN bits are data
