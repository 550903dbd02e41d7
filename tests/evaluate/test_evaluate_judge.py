"""The judge that reuse cannot fool (perturb.py): inputs change between timed launches, and after timing the
candidate must follow a change of its inputs as the original kernel does; the same blocks on both backends."""
from __future__ import annotations

import subprocess

import numpy as np
import pytest

from conftest import ROOT
from evaluate_fakes import install, make_mep, variant
from mepgen.evaluate import Evaluator, Options
from mepgen import perturb
from mepgen.evaluate.batch import evaluate_many
from mepgen.spec import Init, Param, load_spec


@pytest.fixture
def ev(tmp_path, monkeypatch):
    install(monkeypatch)
    mep = make_mep(tmp_path)
    e = Evaluator(load_spec(mep / "mep.yaml"), mep, Options(reps=10, rounds=2, run_timeout=10.0))
    e.prepare()
    yield e
    e.close()


def test_reuse_of_results_is_caught_by_the_perturbation_recheck(ev):
    """A candidate that is right on every input set it saw and copies where inputs repeat (mode reuse:
    right in verification and on the re-check set, 20x faster when timed) is wrong_result, not FASTER."""
    reuse, good = evaluate_many(ev, [("reuse", variant(ev.mep_dir, "reuse")), ("good", variant(ev.mep_dir, "good"))])
    assert reuse.status == "wrong_result" and reuse.stage == "time"
    assert reuse.wrong.mismatches[0].phase == "perturbed"
    assert "inputs changed in place" in reuse.feedback()
    assert reuse.timed is None
    assert good.status == "ok"
    assert any("followed the original's" in n for n in good.notes)


def test_without_the_recheck_the_same_cheat_would_pass(tmp_path, monkeypatch):
    """The control: with perturbation off (the judge before this change) the cheat is called faster."""
    install(monkeypatch)
    mep = make_mep(tmp_path)
    e = Evaluator(load_spec(mep / "mep.yaml"), mep, Options(reps=10, rounds=2, run_timeout=10.0, perturb=False))
    try:
        e.prepare()
        (res,) = evaluate_many(e, [("reuse", variant(mep, "reuse"))])
    finally:
        e.close()
    assert res.status == "ok" and res.timed.decision == "faster"


def test_seed_depends_on_the_text_not_the_backend(ev):
    a = ev.plan_for("kernel A").perturb_seed
    assert a == ev.plan_for("kernel A").perturb_seed != ev.plan_for("kernel B").perturb_seed
    assert "native" not in ev.ref_key and a > 0


def test_blocks_change_values_inside_the_buffer():
    arr = np.arange(1000, dtype=np.float32)
    seen = set()
    for step in range(50):
        pos, src, m = perturb.block(7, step, 0, arr.size)
        assert m == perturb.BLOCK and 0 <= pos <= arr.size - m and 0 <= src <= arr.size - m
        out = perturb.apply(arr, 7, step, 0)
        assert (out != arr).sum() == m and set(out[pos:pos + m]) <= set(arr[src:src + m])
        seen.add(pos)
    assert len(seen) > 40                        # no two launches alike
    tiny = np.array([1.0, 2.0, 3.0], np.float32)
    assert sorted(perturb.apply(tiny, 1, 0, 0)) == [1.0, 2.0, 3.0] and (perturb.apply(tiny, 1, 0, 0) != tiny).all()


def test_only_values_that_are_free_to_change_are_perturbed():
    def p(kind, dtype="float32", role="in"):
        return Param("b", role, "float*", dtype=dtype, count="N", init=Init(kind))
    assert perturb.perturbable(p("uniform")) and perturb.perturbable(p("normal", "int32", "inout"))
    assert perturb.perturbable(p("file"))
    assert not perturb.perturbable(p("file", "int32"))           # captured indices keep their structure
    for kind in ("index", "csr_row_ptr", "arange", "zeros", "constant", "chain"):
        assert not perturb.perturbable(p(kind))
    assert not perturb.perturbable(p("uniform", role="out"))


@pytest.mark.nvcc
def test_the_harness_header_computes_the_same_blocks(tmp_path):
    """perturb.h (native harness) and perturb.py (pycuda worker) change the same elements."""
    src = tmp_path / "t.cu"
    src.write_text((ROOT / "templates" / "harness" / "perturb.h").read_text() + """
#include <cstdio>
int main() {
    const unsigned long long seeds[] = {0ull, 7ull, 123456789012345ull};
    const unsigned long long sizes[] = {1ull, 15ull, 16ull, 17ull, 1048576ull};
    const unsigned long long steps[] = {0ull, 1ull, 99ull, mepgen_recheck_step};
    for (unsigned long long seed : seeds) for (unsigned long long n : sizes) for (unsigned long long step : steps)
        for (unsigned b = 0; b < 3; ++b) {
            unsigned long long pos, src, m;
            mepgen_perturb_block_of(seed, step, b, n, &pos, &src, &m);
            std::printf("%llu %llu %llu\\n", pos, src, m);
        }
}
""")
    subprocess.run(["nvcc", "-o", str(tmp_path / "t"), str(src)], check=True, capture_output=True)
    got = subprocess.run([str(tmp_path / "t")], check=True, capture_output=True, text=True).stdout.split("\n")
    want = [f"{pos} {src} {m}" for seed in (0, 7, 123456789012345) for n in (1, 15, 16, 17, 1048576)
            for step in (0, 1, 99, perturb.RECHECK_STEP) for b in range(3) for pos, src, m in [perturb.block(seed, step, b, n)]]
    assert got[:-1] == want


class FakeCuda:
    """Device memory as one numpy byte array; addresses are offsets into it."""

    def __init__(self, size: int):
        self.mem = np.zeros(size, np.uint8)

    def memcpy_htod_async(self, addr, arr, stream=None):
        data = np.ascontiguousarray(arr).view(np.uint8).reshape(-1)
        self.mem[int(addr):int(addr) + data.size] = data


def test_the_worker_perturbs_and_restores_the_same_blocks():
    """pycuda_worker's _perturb/_unperturb on fake device memory: the state at each step is perturb.apply's."""
    from mepgen.evaluate.pycuda_worker import State

    x = np.random.default_rng(0).random(300).astype(np.float32)
    y = np.random.default_rng(1).integers(0, 9, 50).astype(np.int32)
    st = State.__new__(State)
    st.cuda, st.stream, st.touched, st.keep = FakeCuda(4096), None, [], []
    st.perturbed = ["x", "y"]
    st.sets = {0: {"host": {"x": x, "y": y}, "dev": {"x": 0, "y": 2048}}}
    for name, arr in (("x", x), ("y", y)):
        st.cuda.memcpy_htod_async(st.sets[0]["dev"][name], arr)

    def device(name, arr):
        a = st.sets[0]["dev"][name]
        return st.cuda.mem[a:a + arr.nbytes].view(arr.dtype)

    for step in (0, 1, 2, perturb.RECHECK_STEP):
        st._perturb(0, 99, step)
        np.testing.assert_array_equal(device("x", x), perturb.apply(x, 99, step, 0))
        np.testing.assert_array_equal(device("y", y), perturb.apply(y, 99, step, 1))
    st._unperturb()
    np.testing.assert_array_equal(device("x", x), x)
    np.testing.assert_array_equal(device("y", y), y)
    st._perturb(0, None, 5)                      # no seed: inputs untouched
    np.testing.assert_array_equal(device("x", x), x)


def test_a_reference_that_breaks_on_changed_inputs_skips_the_recheck_with_a_note(tmp_path, monkeypatch):
    """When the original's own outputs on the perturbed inputs hold NaN, no candidate can be judged there: the
    re-check is skipped with a note rather than rejecting every candidate."""
    install(monkeypatch)
    mep = make_mep(tmp_path)
    (mep / "kernel.cu").write_text((mep / "kernel.cu").read_text() + "\n// MODE: nan_when_perturbed\n")
    e = Evaluator(load_spec(mep / "mep.yaml"), mep, Options(reps=10, rounds=2, run_timeout=10.0))
    try:
        e.prepare()
        (res,) = evaluate_many(e, [("good", variant(mep, "good"))])
    finally:
        e.close()
    assert res.status == "ok", res.feedback()
    assert any("perturbation re-check skipped" in n for n in res.notes)


def test_a_recheck_the_gpu_found_matching_is_a_note_and_a_partial_one_is_done_again_on_the_host():
    from mepgen.evaluate.recheck import recheck
    from types import SimpleNamespace
    spec = SimpleNamespace(outputs=[SimpleNamespace(name="y", role="out")])
    t = SimpleNamespace(perturbed_buffers=2, perturbed_summary={"followed": 5, "outputs": ["y"]}, perturbed={},
                        perturbed_ref={}, notes=[])
    wrong, notes = recheck(spec, {}, t, 0)
    assert wrong is None and "followed the original's (5 element(s) changed)" in notes[0] and "on the GPU" in notes[0]
    t.perturbed_summary = {"followed": 5, "outputs": []}       # not every output: the host's comparison decides
    wrong, notes = recheck(spec, {}, t, 0)
    assert "on the GPU" not in " ".join(notes)
