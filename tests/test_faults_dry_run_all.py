"""`mepgen optimize --all --dry-run` keeps --dry-run (issue 40): it plans every ready MEP without a GPU, where it
used to start the batch (exit 4 without a GPU, the whole batch run with one)."""
from __future__ import annotations

import json

from click.testing import CliRunner

from mepgen.cli import main


def test_dry_run_of_a_batch_needs_no_gpu_and_runs_nothing(heatcg_meps, monkeypatch):
    import mepgen.optimize.many as many

    app, _ = heatcg_meps
    started = []
    monkeypatch.setattr(many, "optimize_many", lambda *a, **k: started.append(a))
    monkeypatch.setattr(many, "list_gpus", lambda: (_ for _ in ()).throw(AssertionError("asked for a GPU")),
                        raising=False)
    r = CliRunner().invoke(main, ["optimize", "--all", "--dry-run", "--json", "-C", str(app)])
    assert r.exit_code == 0, r.output
    assert started == []
    doc = json.loads(r.output[r.output.index("["):])
    ready = sorted(m["id"] for m in many.ready_meps(__import__("mepgen.workspace").workspace.Workspace(app))
                   if m["ready"])
    assert sorted(d["kernel"] for d in doc) == ready and ready
    assert not (app / ".mepgen/batches").exists()
    r = CliRunner().invoke(main, ["optimize", "--top", "1", "--dry-run", "-C", str(app)])
    assert r.exit_code == 0 and r.output.count("== ") == 1, r.output
