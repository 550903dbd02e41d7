"""A thread's loop whose iterations never meet gets a thread per iteration (spread_loop), proven on the access model
with Fourier-Motzkin elimination (dependence.py); loops whose iterations depend on each other are refused.
tests/library_idioms/loop_spread holds the kernels, written here; the app is extracted and cut into MEPs as a user
would, every structural rewrite compiles with the MEP's flags, and the in-place turn is run on the CPU (each thread
of the rewrite called in reverse order) against the original to show the spread kernel computes the same.
"""
from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest

from library_fixtures import assert_same_on_cpu, assert_structural_rewrites_compile, dry_run_plans, planned
from mepgen.optimize.library.dependence import feasible, linear

APP = Path(__file__).parent.parent / "library_idioms" / "loop_spread"


@pytest.fixture(scope="module")
def plans(tmp_path_factory):
    return dry_run_plans(APP, tmp_path_factory.mktemp("spread"))


def _cand(p):
    return planned(p, "spread_loop")


def test_fourier_motzkin_decides_small_integer_systems():
    f = lambda **k: {("" if n == "c" else n): Fraction(v) for n, v in k.items()}
    assert feasible([f(x=-1), f(x=1, c=-5)])                       # 0 <= x <= 5
    assert not feasible([f(x=-1, c=3), f(x=1, c=-2)])              # 3 <= x <= 2
    assert not feasible([f(x=2, c=-1), f(x=-2, c=1)])              # 2x = 1 has no integer solution
    assert not feasible([f(x=1, y=-1)], [f(x=1, y=-1, c=-1)])      # x = y + 1 and x <= y
    assert linear({("i", "n"): 1}) is None and linear({("i",): 2, (): -1}) == {"i": 2, "": -1}


def test_in_place_turn_by_rings_gets_a_thread_per_step(plans):
    _, _, p = plans["quarter_turn"]
    assert "spread_loop" in p.structural, p.refusals
    cand, text = _cand(p)
    assert "48 access pair(s) never meet" in cand["change"]
    body = " ".join(text[text.index("__global__"):].split())
    assert "int ring = blockIdx.y * blockDim.y + threadIdx.y;" in body
    assert "{ int k = (lo) + (int)(blockIdx.x * blockDim.x + threadIdx.x); if (k < hi) {" in body
    assert cand["launch"]["grid"] == ["((W) - 1 + 128 - 1) / 128", "((W / 2 + 127) / 128) * ((128) / 2)"]
    assert cand["launch"]["block"] == ["128", "2"]


def test_out_of_place_transpose_by_rows_is_spread(plans):
    _, _, p = plans["flip_rows"]
    assert "spread_loop" in p.structural, p.refusals
    cand, _ = _cand(p)
    assert cand["launch"]["grid"][0] == "((W) + 128 - 1) / 128"


def test_a_block_macro_and_a_launch_of_dim3_objects_are_read_as_the_plain_spelling(plans):
    """`r = threadIdx.x + TB * blockIdx.x` launched `<<<dim3(H / TB), dim3(TB)>>>` (mep.yaml keeps the dim3 objects):
    the macro is the launch's block size, so the index is the global index, and the y grid keeps its threads."""
    _, spec, p = plans["flip_rows_tb"]
    assert spec.launch.block == ["(dim3(TB))"]
    assert "spread_loop" in p.structural, p.refusals
    cand, _ = _cand(p)
    assert cand["launch"]["grid"] == ["((W) + 128 - 1) / 128", "(H / TB) * ((TB) / 2)"]


def test_dependent_iterations_are_refused(plans):
    for kernel in ("running_rows", "shift_row"):
        why = plans[kernel][2].refusals["spread_loop"]
        assert "two iterations may touch the same element of a" in why, (kernel, why)
    assert "carries a value from one iteration" in plans["row_decay"][2].refusals["spread_loop"]


@pytest.mark.nvcc
def test_spread_rewrites_compile(plans, tmp_path):
    assert_structural_rewrites_compile(plans, tmp_path)


SIM_MAIN = """    for (int n : {1, 2, 3, 8, 37, 64}) {
        std::vector<float> a(n * n), b;
        for (auto &v : a) v = rand();
        b = a;
        blockDim = {128, 1, 1};
        for (unsigned g = 0; g < (n / 2 + 127) / 128; g++)
            for (unsigned t = 0; t < 128; t++) { blockIdx = {g, 0, 0}; threadIdx = {t, 0, 0}; before::quarter_turn(a.data(), n); }
        blockDim = {128, 2, 1};
        unsigned gx = (n - 1 + 127) / 128, gy = ((n / 2 + 127) / 128) * (128 / 2);
        for (unsigned y = gy; y-- > 0;)
            for (unsigned x = gx; x-- > 0;)
                for (unsigned ty = 2; ty-- > 0;)
                    for (unsigned tx = 128; tx-- > 0;) {
                        blockIdx = {x, y, 0}; threadIdx = {tx, ty, 0}; after::quarter_turn(b.data(), n);
                    }
        if (a != b) { printf("differ at n=%d\\n", n); return 1; }
    }
    return 0;
"""


def test_spread_turn_computes_what_the_original_does(plans, tmp_path):
    """Every thread of the rewrite run once, in reverse order, on the CPU: the same grid as the original's threads."""
    mep, _, p = plans["quarter_turn"]
    _, text = _cand(p)
    kernel = lambda t: t[t.index("__global__"):]
    assert_same_on_cpu(tmp_path, kernel((mep / "kernel.cu").read_text()), kernel(text), SIM_MAIN)
