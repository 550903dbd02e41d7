"""Reading source text at libclang extents: the bytes of a file, sliced exactly."""
from __future__ import annotations

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
            try:
                hit = Path(path).resolve().is_relative_to(self.app_root)
            except OSError:
                hit = False
            self._in_app[path] = hit
        return hit

    def rel(self, path: str) -> str:
        hit = self._rel.get(path)
        if hit is None:
            hit = self._rel[path] = str(Path(path).resolve().relative_to(self.app_root))
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
