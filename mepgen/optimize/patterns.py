"""Performance-pattern inheritance: every verified win, stored per user and shared across kernels and apps.

One SQLite file per user (`$MEPGEN_PATTERNS_DB`, else `$XDG_DATA_HOME/mepgen/patterns.sqlite`, else
`~/.local/share/mepgen/patterns.sqlite`). Each row is one win: the kernel's features (features.py), what was
done (the library's transformations and parameters, or the LLM's edit and stated strategy, and the launch
change) and the speedup the evaluator measured. For a new kernel, `similar()` returns the wins of kernels
whose features are close, best first: the library proposer tries their transformations first, the LLM
prompt quotes them. The schema is versioned; a newer file than this mepgen knows is refused, not guessed.
"""
from __future__ import annotations

import json
import os
import sqlite3
import time
from pathlib import Path

from ..errors import MepgenError
from .features import similarity

SCHEMA_VERSION = 1
MIN_SIMILARITY = 0.7

_TABLES = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS wins (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    created REAL NOT NULL,
    kernel TEXT NOT NULL,
    app TEXT NOT NULL,
    gpu TEXT NOT NULL,
    features TEXT NOT NULL,
    source TEXT NOT NULL,
    change TEXT NOT NULL,
    transformations TEXT NOT NULL,
    launch TEXT,
    strategy TEXT NOT NULL,
    edit TEXT NOT NULL,
    speedup REAL NOT NULL,
    run TEXT NOT NULL,
    UNIQUE (kernel, app, gpu, change, transformations)
);
"""


def default_path() -> Path:
    if os.environ.get("MEPGEN_PATTERNS_DB"):
        return Path(os.environ["MEPGEN_PATTERNS_DB"])
    base = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return base / "mepgen" / "patterns.sqlite"


class PatternStore:
    def __init__(self, path: Path | None = None):
        self.path = Path(path) if path else default_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self.db = sqlite3.connect(self.path, timeout=30)
            self.db.executescript(_TABLES)
            row = self.db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        except sqlite3.DatabaseError as e:
            raise MepgenError(f"{self.path}: not a mepgen patterns database ({e}); move it away or set "
                              f"MEPGEN_PATTERNS_DB") from None
        if row is None:
            with self.db:
                self.db.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
        elif int(row[0]) > SCHEMA_VERSION:
            raise MepgenError(f"{self.path}: patterns schema version {row[0]} is newer than this mepgen knows "
                              f"({SCHEMA_VERSION}); upgrade mepgen or set MEPGEN_PATTERNS_DB")

    def close(self) -> None:
        self.db.close()

    def record(self, *, kernel: str, app: str, features: dict, source: str, change: str, speedup: float,
               transformations: list | None = None, launch: dict | None = None, strategy: str = "",
               edit: str = "", run: str = "") -> bool:
        """Store one verified win; the same change on the same kernel keeps its best speedup. True: stored."""
        row = (time.time(), kernel, app, features.get("gpu", ""), json.dumps(features, sort_keys=True), source,
               change, json.dumps(transformations or [], sort_keys=True),
               json.dumps(launch, sort_keys=True) if launch else None, strategy, edit, float(speedup), run)
        with self.db:
            cur = self.db.execute(
                "INSERT INTO wins (created, kernel, app, gpu, features, source, change, transformations, launch, "
                "strategy, edit, speedup, run) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (kernel, app, gpu, change, transformations) DO UPDATE SET "
                "speedup = excluded.speedup, run = excluded.run, created = excluded.created "
                "WHERE excluded.speedup > wins.speedup", row)
        return cur.rowcount > 0

    def all(self) -> list[dict]:
        cols = ("id", "kernel", "app", "gpu", "features", "source", "change", "transformations", "launch",
                "strategy", "edit", "speedup", "run")
        out = []
        for r in self.db.execute(f"SELECT {', '.join(cols)} FROM wins ORDER BY id"):
            d = dict(zip(cols, r))
            d["features"] = json.loads(d["features"])
            d["transformations"] = json.loads(d["transformations"])
            d["launch"] = json.loads(d["launch"]) if d["launch"] else None
            out.append(d)
        return out

    def similar(self, features: dict, limit: int = 8, min_similarity: float = MIN_SIMILARITY,
                exclude_kernel: tuple[str, str] | None = None) -> list[dict]:
        """Wins of similar kernels, most similar and fastest first; one entry per distinct change."""
        scored = []
        for d in self.all():
            if exclude_kernel and (d["kernel"], d["app"]) == exclude_kernel:
                continue
            s = similarity(features, d["features"])
            if s >= min_similarity:
                d["similarity"] = s
                scored.append(d)
        scored.sort(key=lambda d: (-d["similarity"], -d["speedup"]))
        seen, out = set(), []
        for d in scored:
            sig = (d["change"], json.dumps(d["transformations"], sort_keys=True))
            if sig in seen:
                continue
            seen.add(sig)
            out.append(d)
            if len(out) >= limit:
                break
        return out
