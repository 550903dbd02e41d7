"""`mepgen mep --keep-edits` (what `make optimize` runs): a hand-edited mep.yaml is refreshed, not replaced."""
from __future__ import annotations

import subprocess
import sys

from mepgen.extract import ExtractOptions, extract


def mepgen(*args, cwd):
    return subprocess.run([sys.executable, "-m", "mepgen.cli", *args], cwd=cwd, capture_output=True, text=True)


def test_keep_edits_refreshes_an_edited_spec(heatcg_copy):
    extract(heatcg_copy, ExtractOptions(jobs=2))
    assert mepgen("mep", "dense_matvec", cwd=heatcg_copy).returncode == 0
    spec = heatcg_copy / ".mepgen/meps/analysis.dense_matvec/mep.yaml"
    spec.write_text(spec.read_text().replace("seed: 1,", "seed: 7,"))
    plain = mepgen("mep", "dense_matvec", cwd=heatcg_copy)
    assert plain.returncode != 0 and "was edited by hand" in plain.stderr
    kept = mepgen("mep", "dense_matvec", "--keep-edits", cwd=heatcg_copy)
    assert kept.returncode == 0, kept.stderr
    assert "seed: 7," in spec.read_text()
    # untouched MEPs are generated as usual
    assert mepgen("mep", "cg::axpy", "--keep-edits", "--size", "N=4096", cwd=heatcg_copy).returncode == 0
    assert (heatcg_copy / ".mepgen/meps/cg.axpy/harness.cu").is_file()
    bad = mepgen("mep", "dense_matvec", "--keep-edits", "--force", cwd=heatcg_copy)
    assert bad.returncode != 0 and "--keep-edits excludes" in bad.stderr
