"""Reading source text at libclang extents: the bytes of a file, sliced exactly."""
from __future__ import annotations

import os
from pathlib import Path

from ..cexpr import split_top_level  # noqa: F401  (the extract modules use it from here)


class SourceFiles:
    """Caches file bytes so that extents can be turned into the text as written."""

    def __init__(self, app_root: Path):
        self.app_root = Path(app_root).resolve()
        self._bytes: dict[str, bytes] = {}
        self._in_app: dict[str, bool] = {}
        self._rel: dict[str, str] = {}

    def data(self, path: str) -> bytes:
        if path not in self._bytes:
            self._bytes[path] = Path(path).read_bytes()
        return self._bytes[path]

    def text(self, path: str, start: int, end: int) -> str:
        return self.data(path)[start:end].decode("utf-8", errors="replace")

    def span(self, cursor) -> tuple[str, int, int] | None:
        """(file, start, end) of a cursor as written. Inside a macro argument (CUDA_CHECK(launch(...)))
        libclang reports the expansion point as an empty extent; the tokens still carry where the text is."""
        ext = cursor.extent
        if ext.start.file is None:
            return None
        if ext.end.offset > ext.start.offset:
            return ext.start.file.name, ext.start.offset, ext.end.offset
        tokens = list(cursor.get_tokens())
        if not tokens or tokens[0].extent.start.file is None:
            return None
        return tokens[0].extent.start.file.name, tokens[0].extent.start.offset, tokens[-1].extent.end.offset

    def cursor_text(self, cursor) -> str:
        span = self.span(cursor)
        return self.text(*span) if span else ""

    def in_app(self, path: str | None) -> bool:
        """Whether a file belongs to the application (not a system, toolkit or shim header); cached."""
        if not path:
            return False
        hit = self._in_app.get(path)
        if hit is None:
            hit = self._in_app[path] = self._relative(path) is not None
        return hit

    def _relative(self, path: str) -> str | None:
        """The path relative to the application's root: as written (a file inside the app may be a symlink to
        elsewhere, e.g. under the system's include folder), else resolved; None when it lies outside."""
        for p in (Path(os.path.abspath(path)), None):
            try:
                p = p if p is not None else Path(path).resolve()
            except OSError:
                return None
            if p.is_relative_to(self.app_root):
                return str(p.relative_to(self.app_root))
        return None

    def rel(self, path: str) -> str:
        """Relative to the app's root; a file outside it keeps its absolute path (never an exception)."""
        hit = self._rel.get(path)
        if hit is None:
            hit = self._rel[path] = self._relative(path) or str(Path(os.path.abspath(path)))
        return hit


def extent_json(cursor, src: SourceFiles) -> dict:
    ext = cursor.extent
    return {
        "file": src.rel(ext.start.file.name),
        "start_byte": ext.start.offset, "end_byte": ext.end.offset,
        "start_line": ext.start.line, "end_line": ext.end.line,
    }


def qualified_name(cursor) -> str:
    """heat::diffuse_step, Outer::Inner::f, (anonymous namespace)::g"""
    parts = []
    c = cursor
    ci_kinds = ("NAMESPACE", "STRUCT_DECL", "CLASS_DECL", "CLASS_TEMPLATE", "UNION_DECL")
    while c is not None and c.kind.name != "TRANSLATION_UNIT":
        if c is cursor or c.kind.name in ci_kinds:
            parts.append(c.spelling or "(anonymous)")
        c = c.semantic_parent
    return "::".join(reversed(parts))
