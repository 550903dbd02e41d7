"""On a GPU: the judge itself (not the source rules) catches results reused across timed launches, on both
backends with the same verdict. The rules are bypassed on purpose: whatever they refuse, the judge must hold."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from conftest import ROOT

pytestmark = pytest.mark.gpu
sys.path.insert(0, str(ROOT / "bench"))

SUITE = ROOT / "tests" / "adversarial" / "analysis.dense_matvec"


@pytest.fixture(scope="module")
def app():
    import adversarial
    return adversarial.prepare_app(None, ["analysis.dense_matvec"])


def judge(app: Path, backend: str, variants: list[Path]) -> list:
    from mepgen.evaluate import Evaluator, Options
    from mepgen.spec import load_spec

    mep = Path(app) / ".mepgen" / "meps" / "analysis.dense_matvec"
    ev = Evaluator(load_spec(mep / "mep.yaml"), mep, Options(backend=backend, use_cache=False))
    out = []
    try:
        ev.prepare()
        for f in variants:
            res = ev.new_result(f.stem, f)
            res.rules, res.status, res.stage = [], "ok", "lint"      # as if the rules had missed it
            built = ev.compile(res, f)
            assert built is not None, res.feedback()
            out.append(ev.check(res, built, ev.workers[0]))
    finally:
        ev.close()
    return out


@pytest.mark.parametrize("backend", ["native", "pycuda"])
def test_reuse_across_timed_launches_is_wrong_on_both_backends(app, backend):
    if backend == "pycuda":
        pytest.importorskip("pycuda", reason="the pycuda backend needs mepgen[gpu]")
    cheat, honest = judge(app, backend, [SUITE / "reuse_heap_table.cu", SUITE / "honest_register_accumulator.cu"])
    assert cheat.status == "wrong_result", cheat.feedback()
    assert any(m.phase == "perturbed" for m in cheat.wrong.mismatches), cheat.feedback()
    assert honest.status == "ok", honest.feedback()
    assert any("followed the original's" in n for n in honest.notes), honest.notes
