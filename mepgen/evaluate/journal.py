"""The append-only results file (JSON lines) a restarted run resumes from, and the per-MEP result cache.

The first line is a header naming the schema, its version, the kernel and the hash of the spec the
results were measured against; opening a file whose header does not match is an error naming the file
(results of another kernel or an edited mep.yaml must not be mixed in). Each later line is one
EvalResult. A line cut short by a crash is ignored on resume; everything before it is kept.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from ..errors import MepgenError
from ..workspace import write_json
from .results import EvalResult

SCHEMA = "mepgen.evaluate.results"
VERSION = 1


class Journal:
    def __init__(self, path: Path, kernel: str, spec_hash: str):
        self.path = Path(path)
        self.header = {"schema": SCHEMA, "version": VERSION, "kernel": kernel, "spec_sha256": spec_hash}
        self.results: dict[str, EvalResult] = {}
        self.skipped_lines = 0
        if self.path.is_file() and self.path.stat().st_size > 0:
            self._load()
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "w") as fh:
                fh.write(json.dumps(self.header) + "\n")

    def _load(self) -> None:
        with open(self.path) as fh:
            lines = fh.read().splitlines()
        try:
            found = json.loads(lines[0])
        except (json.JSONDecodeError, IndexError):
            raise MepgenError(f"{self.path}: not a mepgen results file (its first line is no JSON header)")
        if not isinstance(found, dict) or found.get("schema") != SCHEMA:
            raise MepgenError(f"{self.path}: not a mepgen results file (schema {found.get('schema')!r})"
                              if isinstance(found, dict) else f"{self.path}: not a mepgen results file")
        for key in ("version", "kernel", "spec_sha256"):
            if found.get(key) != self.header[key]:
                raise MepgenError(f"{self.path}: results for {key} {found.get(key)!r}, not {self.header[key]!r}: "
                                  "use another results file or remove this one")
        for line in lines[1:]:
            try:
                r = EvalResult.from_dict(json.loads(line))
            except (json.JSONDecodeError, TypeError, KeyError):
                self.skipped_lines += 1      # a line cut short by a crash
                continue
            self.results[r.key] = r

    def get(self, key: str) -> EvalResult | None:
        return self.results.get(key)

    def append(self, result: EvalResult) -> None:
        """Add one line and flush it to disk before returning: a crash later loses nothing."""
        with open(self.path, "rb+") as fh:   # a torn last line gets its newline first
            fh.seek(0, os.SEEK_END)
            if fh.tell() > 0:
                fh.seek(-1, os.SEEK_END)
                if fh.read(1) != b"\n":
                    fh.write(b"\n")
            fh.write((json.dumps(result.to_dict()) + "\n").encode())
            fh.flush()
            os.fsync(fh.fileno())
        self.results[result.key] = result


class ResultCache:
    """One JSON file per result key under the MEP's eval/results/: a candidate seen before is not rerun."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)

    def get(self, key: str) -> EvalResult | None:
        f = self.folder / f"{key}.json"
        if not f.is_file():
            return None
        try:
            return EvalResult.from_dict(json.loads(f.read_text()))
        except (json.JSONDecodeError, TypeError, KeyError):
            return None

    def put(self, result: EvalResult) -> None:
        write_json(self.folder / f"{result.key}.json", result.to_dict())
