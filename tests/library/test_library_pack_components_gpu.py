"""On a GPU: pack_components' rewrite of the interleaved-complex kernel (a pair read as one 8-byte load, a pixel's
four bytes written as one 32-bit store, a pair written as one 8-byte store) verifies on every input set, as the
evaluator verifies any candidate, and is timed against the original at 16 M elements."""
from __future__ import annotations

import pytest

from test_library_pack_components import CPLX, YAML

pytestmark = pytest.mark.gpu


def test_packed_components_verify_and_are_timed(tmp_path):
    from mepgen.optimize.library.pack_components import PackComponents
    from library_fixtures import evaluate_rewrite, written
    mep = tmp_path / "mep"
    mep.mkdir()
    (mep / "kernel.cu").write_text(CPLX)
    src, spec, launch = written(mep, YAML.replace("N: 4096", "N: 16777216"), CPLX)
    result = evaluate_rewrite(tmp_path, mep, spec, PackComponents().apply(src, spec, launch, {}), rounds=3)
    assert result.status == "ok", result.feedback()
    assert result.timed is not None and result.timed.speedup > 0, result.timed
    print(f"pack_components: {result.timed.decision} {result.timed.speedup:.3f}x ({result.timed.why})")
