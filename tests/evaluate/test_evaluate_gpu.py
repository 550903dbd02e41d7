"""On a GPU: the adversarial suite on both backends, and the pycuda worker against the native harness."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import ROOT

pytestmark = pytest.mark.gpu
sys.path.insert(0, str(ROOT / "bench"))


@pytest.fixture(scope="module")
def app():
    import adversarial
    return adversarial.prepare_app(None, sorted(p.name for p in adversarial.SUITE.iterdir() if p.is_dir()))


@pytest.mark.parametrize("backend", ["native", "pycuda"])
def test_adversarial_suite_rejects_every_cheat(app, backend):
    import adversarial
    if backend == "pycuda":
        pytest.importorskip("pycuda", reason="the pycuda backend needs mepgen[gpu]")
    rows = adversarial.run_suite(app, backend, sorted(p.name for p in adversarial.SUITE.iterdir() if p.is_dir()))
    failed = [f"{r['kernel']}/{r['variant']}: {r['got']} ({r['evidence']})" for r in rows if not r["passed"]]
    assert not failed, "\n".join(failed)


def test_backends_agree_on_outputs(app):
    pytest.importorskip("pycuda", reason="the pycuda backend needs mepgen[gpu]")
    from mepgen.evaluate import Evaluator, Options
    from mepgen.spec import load_spec

    mep = Path(app) / ".mepgen" / "meps" / "cg.axpy"
    spec = load_spec(mep / "mep.yaml")
    outs = {}
    for backend in ("native", "pycuda"):
        ev = Evaluator(spec, mep, Options(backend=backend, verify_on_device=False))   # every output comes back
        try:
            ev.prepare()
            w = ev.workers[0]
            outs[backend] = w.backend.run(w.baseline, ev.sets[1], ev.store.work_dir / backend).outputs
        finally:
            ev.close()
    for name in outs["native"]:
        np.testing.assert_array_equal(outs["native"][name], outs["pycuda"][name])


def test_the_judge_of_old_and_the_fast_one_give_every_variant_the_same_verdict(app):
    """Outputs compared on the GPU and candidates timed against the original's stored timing (the defaults) against
    the judge of old (outputs compared in the parent, every candidate interleaved with the original): the same
    verdict for every cheat and every honest variant of the adversarial suite, on the pycuda backend."""
    import adversarial
    pytest.importorskip("pycuda", reason="the pycuda backend needs mepgen[gpu]")
    kernels = sorted(p.name for p in adversarial.SUITE.iterdir() if p.is_dir())
    fast = adversarial.run_suite(app, "pycuda", kernels)
    old = adversarial.run_suite(app, "pycuda", kernels, verify_on_device=False, baseline_once=False)
    # a racy variant may fail on another check from run to run: what must agree is whether each got its due
    assert [(r["kernel"], r["variant"], r["passed"]) for r in fast] == [(r["kernel"], r["variant"], True) for r in old]
    assert [r["got"] for r in fast if "rac" not in r["variant"]] == [r["got"] for r in old if "rac" not in r["variant"]]


def test_a_run_compared_on_the_gpu_sends_back_no_output_that_matches(app):
    pytest.importorskip("pycuda", reason="the pycuda backend needs mepgen[gpu]")
    from mepgen.evaluate import Evaluator, Options
    from mepgen.spec import load_spec

    mep = Path(app) / ".mepgen" / "meps" / "cg.axpy"
    ev = Evaluator(load_spec(mep / "mep.yaml"), mep, Options(backend="pycuda"))
    try:
        ev.prepare()
        w = ev.workers[0]
        out = w.backend.run(w.baseline, ev.sets[1], ev.store.work_dir / "device")
        assert sorted(out.matched) == sorted(p.name for p in ev.spec.outputs) and out.outputs == {}
    finally:
        ev.close()
