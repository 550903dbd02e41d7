"""On a GPU: stencil_rows' rewrites on small and awkward domains, verified by the evaluator against the original
(every output element) and, where compute-sanitizer is installed, run once under memcheck. The domains put
border threads in every warp (x's bounds masked inside the vec=4 fast path), rows that do not divide the outer
extent, and a width that is not a multiple of 4 (the 16-byte test fails: the per-point path runs)."""
from __future__ import annotations

import shutil
import sys

import pytest

from conftest import ROOT
from library_fixtures import example_meps

pytestmark = pytest.mark.gpu
sys.path.insert(0, str(ROOT / "bench"))

DOMAINS = {
    "smooth9 36x37": ("smooth9", {"IMG_NX": 36, "IMG_NY": 37}),
    "smooth9 30x19": ("smooth9", {"IMG_NX": 30, "IMG_NY": 19}),
    "diffuse7 20x9x11": ("diffuse7", {"VOL_NX": 20, "VOL_NY": 9, "VOL_NZ": 11}),
}
CHAINS = ["stencil_rows:rows=2,vec=4", "stencil_rows:rows=4,vec=4", "stencil_rows:rows=8,vec=4",
          "stencil_rows:rows=4,vec=1"]


@pytest.fixture(scope="module")
def meps(tmp_path_factory):
    out = {}
    for label, (kernel, sizes) in DOMAINS.items():
        folder = tmp_path_factory.mktemp(label.replace(" ", "-")) / "dense"
        args = [a for k, v in sizes.items() for a in ("--size", f"{k}={v}")]
        out[label] = example_meps(folder, "dense", kernel, *args)[kernel]
    return out


@pytest.mark.parametrize("label", sorted(DOMAINS))
def test_stencil_rows_verified_on_awkward_domains(meps, label):
    import chain_sweep
    from mepgen.evaluate import Evaluator, Options
    from mepgen.optimize import candidates
    from mepgen.spec import load_spec

    mep = meps[label]
    spec = load_spec(mep / "mep.yaml")
    assert all(spec.sizes[k] == v for k, v in DOMAINS[label][1].items())
    ev = Evaluator(spec, mep, Options(backend="native", rounds=1, reps=3, use_cache=False))
    props = chain_sweep.proposals(CHAINS, ev.original_text, spec)
    ev.prepare()
    results = candidates.evaluate(ev, mep, spec, props, mep / "gpu-test")
    wrong = [f"{c}: {r.status}" for c, r in zip(CHAINS, results) if r.status != "ok"]
    assert not wrong, "\n".join(wrong)
    if shutil.which("compute-sanitizer"):
        checks = {c: chain_sweep.memcheck(ev, spec, p, mep / "memcheck" / str(n))
                  for n, (c, p) in enumerate(zip(CHAINS, props))}
        assert all(v == "clean" for v in checks.values()), checks
