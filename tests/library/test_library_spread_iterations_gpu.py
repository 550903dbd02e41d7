"""On a GPU: spread_iterations' rewrite of a face fill on a launch of a few hundred threads writes what the original
writes on every input set, as the evaluator verifies any candidate (its launch with the copies' grid), and is timed
against it."""
from __future__ import annotations

import pytest

from library_fixtures import FACES
from test_library_spread_iterations import make

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("parts, levels", [(32, 2), (128, 3)])
def test_spread_faces_verify_and_are_timed(tmp_path, parts, levels):
    from mepgen.optimize.library.spread_iterations import SpreadIterations
    from library_fixtures import evaluate_rewrite
    mep = tmp_path / "mep"
    mep.mkdir()
    (mep / "kernel.cu").write_text(FACES)
    src, spec, launch = make(mep, FACES, ne=30, na=33)
    rw = SpreadIterations().apply(src, spec, launch, {"parts": parts, "levels": levels})
    result = evaluate_rewrite(tmp_path, mep, spec, rw)
    assert result.status == "ok", result.feedback()
    assert result.timed.speedup > 1.0, result.timed.why
    print(f"spread_iterations {parts} parts over {levels} loop(s): {result.timed.decision} "
          f"{result.timed.speedup:.2f}x")
