"""One kernel-name resolver for every command: ids, qualified names and unique plain names; ambiguous and unknown
names are one-line usage errors (exit 2) that list the candidates."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from mepgen.cli import main
from mepgen.errors import MepgenError
from mepgen.kernelname import UnknownKernel, find_kernel, mep_folder, mep_record, resolve
from mepgen.workspace import Workspace


def rec(qualified, kid=None):
    return {"qualified_name": qualified, "name": qualified.split("::")[-1],
            "id": kid or qualified.replace("::", ".")}


KERNELS = [rec("cg::axpy"), rec("dense::axpy"), rec("cg::dot"), rec("scale"),
           rec("over::load", "over.load@a.3"), rec("over::load", "over.load@a.9")]


def test_every_spelling_of_a_unique_kernel():
    for name in ("cg::dot", "cg.dot", "dot", " dot "):
        assert resolve(KERNELS, name)["id"] == "cg.dot"
    assert resolve(KERNELS, "scale")["qualified_name"] == "scale"
    assert resolve(KERNELS, "over.load@a.9")["id"] == "over.load@a.9"


def test_an_ambiguous_name_lists_its_candidates_and_is_a_usage_error():
    with pytest.raises(MepgenError) as e:
        resolve(KERNELS, "axpy")
    assert str(e.value) == "kernel 'axpy' is ambiguous: cg::axpy, dense::axpy" and e.value.exit_code == 2
    with pytest.raises(MepgenError) as e:                     # overloads share the qualified name: their ids
        resolve(KERNELS, "over::load")
    assert str(e.value) == "kernel 'over::load' is ambiguous: over.load@a.3, over.load@a.9"
    assert resolve(KERNELS, "cg::axpy")["id"] == "cg.axpy"     # the qualified name picks one


def test_an_unknown_name_names_the_closest():
    with pytest.raises(UnknownKernel) as e:
        resolve(KERNELS, "cg::dott")
    assert "no kernel named 'cg::dott' in the inventory; closest: cg::dot" in str(e.value)
    assert e.value.closest[0] == "cg::dot" and e.value.exit_code == 2
    assert find_kernel({"kernels": KERNELS}, "cg.axpy")["qualified_name"] == "cg::axpy"


def test_mep_records_from_folder_names():
    assert mep_record("cg.axpy") == {"id": "cg.axpy", "qualified_name": "cg::axpy", "name": "axpy"}
    assert mep_record("k@f.3")["qualified_name"] == "k"
    assert mep_record("anon.k", "(anonymous)::k")["name"] == "k"


def _workspace(tmp_path, meps, inventory=None):
    root = tmp_path / ".mepgen"
    for m in meps:
        (root / "meps" / m).mkdir(parents=True)
        (root / "meps" / m / "mep.yaml").write_text("{}\n")
    if inventory is not None:
        (root / "inventory.json").write_text(json.dumps({"schema": "mepgen.inventory", "version": 1,
                                                          "kernels": inventory}))
    return Workspace(tmp_path)


def test_mep_folder_resolves_like_the_inventory(tmp_path):
    ws = _workspace(tmp_path, ["cg.axpy", "cg.dot"], KERNELS)
    assert mep_folder(ws, "dot") == ws.mep_dir("cg.dot")
    assert mep_folder(ws, "cg::axpy") == ws.mep_dir("cg.axpy")
    with pytest.raises(MepgenError, match="ambiguous: cg::axpy, dense::axpy"):
        mep_folder(ws, "axpy")
    with pytest.raises(MepgenError, match=r"no MEP for 'scale' \(scale\).*run `mepgen mep scale` first"):
        mep_folder(ws, "scale")
    with pytest.raises(MepgenError, match="no MEP for 'nope'"):
        mep_folder(ws, "nope")


def test_mep_folder_without_an_inventory_reads_the_meps(tmp_path):
    ws = _workspace(tmp_path, ["cg.axpy", "heat.step"])
    assert mep_folder(ws, "axpy") == ws.mep_dir("cg.axpy")
    assert mep_folder(ws, "heat::step") == ws.mep_dir("heat.step")


@pytest.mark.nvcc
def test_the_commands_agree_on_a_short_name(heatcg_meps, monkeypatch, tmp_path):
    """`mepgen mep axpy` finds cg::axpy; `mepgen optimize axpy` must find the same MEP (it said 'no MEP')."""
    app, _ = heatcg_meps
    monkeypatch.setenv("MEPGEN_CONFIG", str(tmp_path / "none.yaml"))
    (tmp_path / "none.yaml").write_text("llm: {base_url: null}\n")
    r = CliRunner().invoke(main, ["optimize", "axpy", "-C", str(app), "--dry-run"])
    assert "no MEP" not in r.output and "ambiguous" not in r.output, r.output
    r = CliRunner().invoke(main, ["optimize", "ax", "-C", str(app), "--dry-run"])
    assert r.exit_code == 2 and "no MEP for 'ax'" in r.output
