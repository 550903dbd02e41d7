"""Incremental extraction: a translation unit is reparsed only when it, a file it includes, or its flags
changed. The cache is one JSON file in `.mepgen/cache/`, keyed by translation unit."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from .. import __version__
from ..workspace import write_json

CACHE_NAME = "extract-v1.json"


def file_hash(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


class FileHashes:
    """sha256 of application files, each read once per run."""

    def __init__(self, app_root: Path):
        self.app_root = app_root
        self._h: dict[str, str | None] = {}

    def __call__(self, rel: str) -> str | None:
        if rel not in self._h:
            try:
                self._h[rel] = file_hash(self.app_root / rel)
            except OSError:
                self._h[rel] = None
        return self._h[rel]


def _extractor_fingerprint() -> str:
    """Hash of the extractor's own code and shim: facts cached by another version are not reused."""
    h = hashlib.sha256(__version__.encode())
    here = Path(__file__).parent
    for p in sorted([*here.glob("*.py"), *(here.parent / "parsing").rglob("*.py"), *(here.parent / "parsing").rglob("*.h")]):
        h.update(p.read_bytes())
    return h.hexdigest()


_FINGERPRINT = _extractor_fingerprint()


def flags_key(parse_args: list[str]) -> str:
    return hashlib.sha256(json.dumps([_FINGERPRINT, parse_args]).encode()).hexdigest()[:16]


class ExtractCache:
    def __init__(self, cache_dir: Path):
        self.path = Path(cache_dir) / CACHE_NAME
        try:
            self.entries: dict = json.loads(self.path.read_text())
            if not isinstance(self.entries, dict):
                self.entries = {}
        except (OSError, json.JSONDecodeError):
            self.entries = {}

    def get(self, tu: str, key: str, hashes: FileHashes) -> dict | None:
        e = self.entries.get(tu)
        if not e or e.get("flags") != key:
            return None
        if any(hashes(f) != h for f, h in e["deps"].items()):
            return None
        return e["facts"]

    def put(self, tu: str, key: str, facts: dict, hashes: FileHashes) -> None:
        self.entries[tu] = {"flags": key, "deps": {f: hashes(f) for f in facts["files"]}, "facts": facts}

    def save(self, keep: set[str]) -> None:
        write_json(self.path, {k: v for k, v in self.entries.items() if k in keep})
