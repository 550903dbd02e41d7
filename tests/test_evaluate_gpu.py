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
        ev = Evaluator(spec, mep, Options(backend=backend))
        try:
            ev.prepare()
            w = ev.workers[0]
            outs[backend] = w.backend.run(w.baseline, ev.sets[1], ev.store.work_dir / backend).outputs
        finally:
            ev.close()
    for name in outs["native"]:
        np.testing.assert_array_equal(outs["native"][name], outs["pycuda"][name])
