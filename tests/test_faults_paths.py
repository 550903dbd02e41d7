"""Paths (issue 40): a kernel id or an MEP path never leads into another application's .mepgen/, and an
application moved or copied with its .mepgen/ is detected (the user told to extract again; `ready` does it)."""
from __future__ import annotations

import shutil

import pytest

from mepgen.errors import MepgenError
from mepgen.extract import ExtractOptions, extract
from mepgen.workspace import Workspace
from fault_tools import cli


def test_an_mep_path_of_another_application_is_refused(tmp_path):
    from conftest import copy_example

    a = copy_example("heatcg", tmp_path / "a")
    b = copy_example("heatcg", tmp_path / "b")
    for app in (a, b):
        extract(app, ExtractOptions(jobs=2))
    other = b / ".mepgen/meps/cg.axpy"
    other.mkdir(parents=True)
    (other / "mep.yaml").write_text("kernel: {}\n")
    before = sorted(p.name for p in other.iterdir())
    for command in (["run"], ["optimize"]):
        rc, out = cli([*command, "../../b/heatcg/.mepgen/meps/cg.axpy"], cwd=a / "src")
        assert rc == 2 and "is not an MEP folder of" in out and "-C APP" in out, out
        rc, out = cli([*command, str(other), "-C", str(a)])
        assert rc == 2 and "is not an MEP folder of" in out, out
    assert sorted(p.name for p in other.iterdir()) == before
    with pytest.raises(MepgenError, match="not a kernel id"):
        Workspace(a).mep_dir("../../b/heatcg/.mepgen/meps/cg.axpy")
    with pytest.raises(MepgenError, match="not a kernel id"):
        Workspace(a).mep_dir("..")


def test_an_application_copied_with_its_workspace_reads_its_own_files(heatcg_copy, tmp_path):
    """The inventory of a copied application names the first copy's folder: its paths are read at the new
    place (they pointed at the other copy: `ready` said complete kernels needed a person), and a patch in
    the copy never touches the first application."""
    from fault_tools import variants
    from mepgen.inventory import load

    extract(heatcg_copy, ExtractOptions(jobs=2))
    first = (heatcg_copy / "src/cg.cu").read_bytes()
    copy = tmp_path / "copied"
    shutil.copytree(heatcg_copy, copy)
    shutil.rmtree(heatcg_copy / "include")          # the first copy's headers are no help any more
    inv = load(copy / ".mepgen/inventory.json")
    assert inv["app_root"] == str(copy) and inv["moved_from"] == str(heatcg_copy)
    assert all(d.startswith(str(copy)) for t in inv["translation_units"] for d in t["include_dirs"])
    from mepgen.ready import _inventory
    ws, inv, extracted = _inventory(copy, ExtractOptions(jobs=2), lambda m: None)
    assert not extracted and inv["app_root"] == str(copy)
    rc, out = cli(["mep", "analysis::histogram", "-C", str(copy)])   # reads include/config.h
    assert rc == 0, out
    rc, out = cli(["patch", "cg::axpy", "--from", str(variants(tmp_path / "v")["axpy"]), "--apply", "--no-validate",
                   "-C", str(copy)])
    assert rc == 0, out
    assert b"// the variant" in (copy / "src/cg.cu").read_bytes()
    assert (heatcg_copy / "src/cg.cu").read_bytes() == first
