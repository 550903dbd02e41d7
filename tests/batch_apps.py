"""A workspace of ready MEPs (copies of evaluate_fixtures/axpy under other ids) and the fake worker the batch
tests run instead of `mepgen optimize` (shared by the batch and SLURM tests)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from mepgen.inventory import SCHEMA, VERSION

HERE = Path(__file__).resolve().parent
FAKE_WORKER = HERE / "optimize_fake_worker.py"
AXPY = HERE / "evaluate_fixtures" / "axpy"


def make_app(tmp: Path, ids: list[str]) -> Path:
    app = tmp / "app"
    for i, kid in enumerate(ids):
        mep = app / ".mepgen" / "meps" / kid
        mep.mkdir(parents=True)
        text = (AXPY / "mep.yaml").read_text().replace("name: cg::axpy, id: cg.axpy", f"name: app::{kid}, id: {kid}")
        (mep / "mep.yaml").write_text(text)
        shutil.copy(AXPY / "kernel.cu", mep / "kernel.cu")
        if "todo" in kid:
            (mep / "mep.yaml").write_text(text + "todo:\n  - {field: sizes.N, reason: not derived}\n")
    inventory = {"schema": SCHEMA, "version": VERSION,
                 "kernels": [{"id": kid, "rank": r + 1} for r, kid in enumerate(reversed(ids))]}
    (app / ".mepgen" / "inventory.json").write_text(json.dumps(inventory))
    return app


def seen(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.is_file() else []
