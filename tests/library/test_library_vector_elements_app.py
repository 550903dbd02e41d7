"""vector_elements on an application cut into MEPs as a user would (tests/library_idioms/element_vectors: planes of
one array without a guard, rows of a 2D launch, an update in place behind an early return): the dry run offers it for
each kernel, every candidate compiles with its MEP's flags, and on a GPU each candidate is verified by the evaluator
against the original, with the MEP's buffers 16-byte aligned (the vector path) and 4 or 8 bytes off (the run-time
test must send every chunk down the lane-by-lane path), memcheck clean where compute-sanitizer is installed.
On the GPU machine: python3 -m pytest -q tests/library/test_library_vector_elements_app.py"""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import ROOT
from library_fixtures import assert_structural_rewrites_compile, dry_run_plans, planned

APP = Path(__file__).parent.parent / "library_idioms" / "element_vectors"
KERNELS = {"relax_planes": "lanes=4", "scale_rows": "lanes=2", "clamp_inplace": "lanes=4"}


def cut(folder: Path) -> Path:
    shutil.copytree(APP, folder)
    for args in (["extract", "."], ["mep", "--all"]):
        done = subprocess.run([sys.executable, "-m", "mepgen.cli", *args], cwd=folder, capture_output=True, text=True)
        assert done.returncode == 0, done.stdout + done.stderr
    return folder


@pytest.fixture(scope="module")
def plans(tmp_path_factory):
    return dry_run_plans(APP, tmp_path_factory.mktemp("vectors"))


def test_the_dry_run_offers_vectors_for_every_kernel(plans):
    assert set(plans) == set(KERNELS)
    for name, (mep, spec, p) in plans.items():
        assert "vector_elements" in p.structural, (name, p.refusals.get("vector_elements"))
        cand, text = planned(p, "vector_elements")
        assert cand["params"] == {"lanes": int(KERNELS[name].split("=")[1])}
        assert "mepgen vector_elements" in text
    # the row factor is one value per row: read where it was, not through a vector
    _, text = planned(plans["scale_rows"][2], "vector_elements")
    assert "factor[row]" in text and "mepgen_factor" not in text


def test_the_candidates_compile(plans, tmp_path):
    assert_structural_rewrites_compile(plans, tmp_path)


#: placements past a 2 MiB boundary: 0 (the vector path), 4 and 8 (off 16 bytes: the lane-by-lane path; doubles only
#: at 8, where the original's own 8-byte accesses stay aligned)
PLACED = [("relax_planes", 0), ("relax_planes", 4), ("relax_planes", 8), ("scale_rows", 0), ("scale_rows", 8),
          ("clamp_inplace", 0), ("clamp_inplace", 4)]


@pytest.mark.gpu
@pytest.mark.parametrize("kernel, offset", PLACED)
def test_vectors_verified_on_the_gpu(tmp_path, kernel, offset):
    sys.path.insert(0, str(ROOT / "bench"))
    import chain_sweep
    from mepgen.evaluate import Evaluator, Options
    from mepgen.optimize import candidates
    from mepgen.spec import load_spec

    app = cut(tmp_path / "element_vectors")
    mep = app / ".mepgen" / "meps" / kernel
    if offset:
        doc = yaml.safe_load((mep / "mep.yaml").read_text())
        for p in doc["params"]:
            if p["role"] != "scalar":
                p["placement"] = offset
        (mep / "mep.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
        subprocess.run([sys.executable, "-m", "mepgen.cli", "mep", kernel, "--refresh"], cwd=app, check=True,
                       capture_output=True)
    spec = load_spec(mep / "mep.yaml")
    ev = Evaluator(spec, mep, Options(backend="native", rounds=1, reps=3, use_cache=False))
    props = chain_sweep.proposals([f"vector_elements:{KERNELS[kernel]}"], ev.original_text, spec)
    ev.prepare()
    [res] = candidates.evaluate(ev, mep, spec, props, mep / "gpu-test")
    assert res.status == "ok", f"{kernel} at +{offset}: {res.status} {getattr(res, 'message', '')}"
    if shutil.which("compute-sanitizer"):
        assert chain_sweep.memcheck(ev, spec, props[0], mep / "memcheck") == "clean"
