"""A register cap written in the kernel's text (`__maxnreg__`, tune_params' form of it) is carried by patch into the
application like any other text change: the file compiles, re-extracts, and reverts byte for byte."""
from __future__ import annotations

import json

import pytest

from test_patch import app, mepgen  # noqa: F401  (app is a fixture)


@pytest.mark.nvcc
def test_a_register_cap_in_the_kernel_s_text_lands_builds_and_reverts(app, tmp_path):
    """tune_params writes a register cap as `__maxnreg__(N)` in the kernel (a build flag would not reach the
    application): patch carries it with the text, the application's file compiles and re-extracts, revert restores
    it byte for byte."""
    from mepgen.optimize.library.base import current_launch
    from mepgen.optimize.library.source import KernelSource
    from mepgen.optimize.library.tunables import TuneParams
    from mepgen.spec import load_spec
    assert mepgen("mep", "analysis::dense_matvec", cwd=app).returncode == 0
    mep = app / ".mepgen/meps/analysis.dense_matvec"
    spec = load_spec(mep / "mep.yaml")
    rw = TuneParams().apply(KernelSource((mep / "kernel.cu").read_text(), spec), spec, current_launch(spec, None),
                            {"regs": 64})
    assert rw.nvcc_flags == [] and "__maxnreg__(64)" in rw.text
    variant = tmp_path / "kernel.cu"
    variant.write_text(rw.text)
    before = (app / "src/analysis.cu").read_bytes()
    r = mepgen("patch", "dense_matvec", "--from", str(variant), "--apply", "--json", cwd=app)
    assert r.returncode == 0, r.stderr + r.stdout
    out = json.loads(r.stdout)
    assert out["nvcc_flags"] == [] and [c["check"] for c in out["validation"] if c["ok"]] == \
        ["compile src/analysis.cu", "re-extract"]
    assert "__maxnreg__(64)" in (app / "src/analysis.cu").read_text()
    assert mepgen("patch", "dense_matvec", "--revert", cwd=app).returncode == 0
    assert (app / "src/analysis.cu").read_bytes() == before
