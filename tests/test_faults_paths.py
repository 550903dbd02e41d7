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


def test_an_application_copied_with_its_workspace_is_told_to_extract_again(heatcg_copy, tmp_path):
    extract(heatcg_copy, ExtractOptions(jobs=2))
    copy = tmp_path / "copied"
    shutil.copytree(heatcg_copy, copy)
    rc, out = cli(["list", "-C", str(copy)])
    assert rc == 2 and "copied with its .mepgen" in out and f"mepgen extract {copy}" in out, out
    # `ready` extracts again by itself
    from mepgen.ready import _inventory
    ws, inv, extracted = _inventory(copy, ExtractOptions(jobs=2), lambda m: None)
    assert extracted and inv["app_root"] == str(copy)
    rc, out = cli(["list", "-C", str(copy)])
    assert rc == 0, out
