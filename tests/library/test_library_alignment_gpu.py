"""On a GPU: every rewrite that moves 128 bits at a time stays correct when the application hands the kernel buffers
that are not 16-byte aligned (`x + 1` at a call site). The MEP's buffers are placed 4, 8 or 12 bytes past a 2 MiB
boundary (mep.yaml `placement`, as the harness and the pycuda worker honour it), so each rewrite's run-time alignment
test must send it down its scalar path; the evaluator verifies every output against the original on the same
placement, and compute-sanitizer's memcheck (where installed) sees no misaligned access."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import ROOT
from library_fixtures import example_meps

pytestmark = pytest.mark.gpu
sys.path.insert(0, str(ROOT / "bench"))

# (application, MEP id, mepgen mep arguments, chain, {buffer: bytes past the boundary})
CASES = {
    "axpy vector_loads": ("heatcg", "cg.axpy", ["cg::axpy", "--size", "N=1048576"], "vector_loads",
                          {"x": 4, "y": 8}),
    "histogram privatize vec4": ("heatcg", "analysis.histogram", ["analysis::histogram", "--size", "N=1048576"],
                                 "privatize_histogram:vec=4", {"data": 4}),
    "label_counts privatize vec4": ("kernels", "label_counts", ["label_counts"], "privatize_histogram:vec=4",
                                    {"labels": 12}),
    "matvec_rows warp_per_row vec4": ("kernels", "matvec_rows", ["matvec_rows"],
                                      "warp_per_row:tpr=32,block=256,vec=4", {"A": 4, "x": 8}),
    "conv1d tile_window vector": ("kernels", "conv1d", ["conv1d"], "tile_window:block=128,per_thread=4,reuse=vector",
                                  {"in": 4, "out": 8}),
    "smooth9 stencil_rows vec4": ("dense", "smooth9", ["smooth9"], "stencil_rows:rows=2,vec=4", {"in": 4, "out": 12}),
}


def placed_mep(root: Path, app: str, mep_id: str, args: list[str], placement: dict[str, int]) -> Path:
    folder = root / app
    mep = example_meps(folder, app, *args)[mep_id]
    doc = yaml.safe_load((mep / "mep.yaml").read_text())
    params = {p["name"]: p for p in doc["params"]}
    assert set(placement) <= set(params), f"{mep_id}: no buffer {set(placement) - set(params)}"
    for name, offset in placement.items():
        params[name]["placement"] = offset
    (mep / "mep.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    # the harness bakes each buffer's placement in: render it again from the edited mep.yaml
    subprocess.run([sys.executable, "-m", "mepgen.cli", "mep", args[0], "--refresh"], cwd=folder, check=True,
                   capture_output=True)
    assert f", {next(iter(placement.values()))}," in (mep / "harness.cu").read_text()
    return mep


@pytest.mark.parametrize("label", sorted(CASES))
def test_vector_rewrites_on_misaligned_buffers(tmp_path, label):
    import chain_sweep
    from mepgen.evaluate import Evaluator, Options
    from mepgen.optimize import candidates
    from mepgen.spec import load_spec

    app, mep_id, args, chain, placement = CASES[label]
    mep = placed_mep(tmp_path, app, mep_id, args, placement)
    spec = load_spec(mep / "mep.yaml")
    assert {p.name: p.placement for p in spec.params if p.name in placement} == placement
    ev = Evaluator(spec, mep, Options(backend="native", rounds=1, reps=3, use_cache=False))
    props = chain_sweep.proposals([chain], ev.original_text, spec)
    ev.prepare()
    [res] = candidates.evaluate(ev, mep, spec, props, mep / "gpu-test")
    assert res.status == "ok", f"{chain} on {placement}: {res.status} {getattr(res, 'message', '')}"
    if shutil.which("compute-sanitizer"):
        assert chain_sweep.memcheck(ev, spec, props[0], mep / "memcheck") == "clean"
