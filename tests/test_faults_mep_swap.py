"""A kill while `mepgen mep` replaces an MEP folder never loses a person's edited mep.yaml or added files
(issue 40): the next command puts the old folder back when the new one never arrived."""
from __future__ import annotations

import time

from mepgen.evaluate.command import mep_folder
from mepgen.extract import ExtractOptions, extract
from mepgen.mep.writer import restore_interrupted
from mepgen.workspace import Workspace
from fault_tools import KILLED, cli


def test_a_kill_between_the_renames_of_the_swap_loses_nothing(heatcg_copy):
    app = heatcg_copy
    extract(app, ExtractOptions(jobs=2))
    rc, out = cli(["mep", "analysis::histogram", "-C", str(app)])
    assert rc == 0, out
    mep = app / ".mepgen/meps/analysis.histogram"
    edited = (mep / "mep.yaml").read_text() + "# checked by hand\n"
    (mep / "mep.yaml").write_text(edited)
    (mep / "notes.txt").write_text("mine")
    rc, out = cli(["mep", "analysis::histogram", "--force", "-C", str(app)],
                  env={"MEPGEN_KILL_AT": "mep-swap-between-renames"})
    assert rc == KILLED, out
    assert not mep.exists() and list(mep.parent.glob(".analysis.histogram.old-*"))   # the moment of the kill
    # the next run puts the person's folder back before deciding anything, and so refuses to overwrite it
    rc, out = cli(["mep", "analysis::histogram", "-C", str(app)])
    assert rc == 2 and "edited by hand" in out, out
    assert (mep / "mep.yaml").read_text() == edited and (mep / "notes.txt").read_text() == "mine"
    assert not list(mep.parent.glob(".analysis.histogram.*"))


def test_run_and_optimize_find_the_folder_a_kill_left_aside(tmp_path):
    ws = Workspace(tmp_path)
    meps = tmp_path / ".mepgen/meps"
    (meps / ".k1.old-abc").mkdir(parents=True)
    (meps / ".k1.old-abc/mep.yaml").write_text("edited")
    (meps / ".k1.tmp-xyz").mkdir()
    assert mep_folder(ws, "k1") == meps / "k1"
    assert (meps / "k1/mep.yaml").read_text() == "edited"
    assert [p.name for p in meps.iterdir()] in (["k1"], ["k1", ".k1.tmp-xyz"])   # a fresh tmp may be in use


def test_a_finished_swap_drops_the_old_folder(tmp_path):
    meps = tmp_path / "meps"
    (meps / "k1").mkdir(parents=True)
    (meps / "k1/mep.yaml").write_text("new, carrying the person's files over")
    (meps / ".k1.old-1").mkdir()
    (meps / ".k1.old-1/mep.yaml").write_text("old")
    old_tmp = meps / ".k1.tmp-2"
    old_tmp.mkdir()
    import os
    os.utime(old_tmp, (time.time() - 60, time.time() - 60))
    assert restore_interrupted(meps / "k1") is None
    assert sorted(p.name for p in meps.iterdir()) == ["k1"]
    assert (meps / "k1/mep.yaml").read_text().startswith("new")
