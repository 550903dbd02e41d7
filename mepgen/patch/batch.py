"""The winners of an `mepgen optimize --all` batch (`.mepgen/batches/NAME/rows/`), for `mepgen patch --all`."""
from __future__ import annotations

import json
from pathlib import Path

from ..errors import MepgenError
from ..workspace import Workspace


def newest_batch(ws: Workspace) -> Path:
    root = ws.root / "batches"
    batches = sorted((d for d in root.iterdir() if (d / "rows").is_dir()), key=lambda d: d.stat().st_mtime) \
        if root.is_dir() else []
    if not batches:
        raise MepgenError(f"no batch in {root}: run `mepgen optimize --all` first, or patch one KERNEL")
    return batches[-1]


def winners(ws: Workspace, name: str | None) -> list[dict]:
    """Per kernel of the batch with a verified win: {"kernel": id, "variant": its best/kernel.cu}, by the
    batch's row order (kernel id). A row without a win (failed, no faster variant) is left out."""
    folder = ws.root / "batches" / name if name else newest_batch(ws)
    if not (folder / "rows").is_dir():
        raise MepgenError(f"{folder}: no such batch (its rows/ folder is missing); `ls {folder.parent}` lists them")
    out = []
    for f in sorted((folder / "rows").glob("*.json")):
        try:
            row = json.loads(f.read_text())
        except (OSError, ValueError):
            continue                          # a row cut short: that kernel did not finish
        if row.get("status") != "done" or not row.get("speedup"):
            continue
        best = ws.root / "runs" / row["kernel"] / row.get("name", folder.name) / "best" / "kernel.cu"
        if best.is_file():
            out.append({"kernel": row["kernel"], "variant": str(best), "speedup": row["speedup"]})
    if not out:
        raise MepgenError(f"the batch {folder.name} has no verified win to patch ({folder / 'table.md'})")
    return out
