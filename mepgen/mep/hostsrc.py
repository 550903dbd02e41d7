"""The application's plain C/C++ sources, parsed on demand for value tracing.

`mepgen extract` lists the sources without CUDA code (`host_sources` of the inventory, extract/hostfiles.py);
they are where a launch's sizes often come from (`main.c`: `n = atoi(argv[1]); run_gpu(n);`). Parsing them all
would slow every application down for the few values that need them, so a file is parsed only when a value
leads to a name it spells: the callers of a function the CUDA sources define and nothing there calls, the
writes of a global variable. Each file is parsed in its own language (C or C++) with the application's include
folders and defines, then indexed into the :class:`~.project.Project` like a CUDA translation unit. A file that
libclang cannot load is remembered with the reason (`failed`) and said in the todo that needed it; a file that
parses with errors is used for what did parse (its first error is kept, `errors`).
"""
from __future__ import annotations

import re
from pathlib import Path

from ..errors import MepgenError
from ..parsing import clang

#: at most this many files are parsed for one name: a name spelled in more files is a common word, not a
#: caller to find (the lookup says it stopped there)
MAX_FILES_PER_NAME = 16


def tu_parse_args(tu: dict) -> list[str]:
    """libclang arguments of one inventory translation unit (what `mepgen extract` parsed it with)."""
    return ([f"-I{d}" for d in tu.get("include_dirs", [])] + [f"-D{d}" for d in tu.get("defines", [])]
            + [f"-std={tu.get('std', 'c++17')}"])


class HostSources:
    """The pending plain sources of one application and what became of those parsed."""

    def __init__(self, app_root: Path, entries: list[dict]):
        self.app_root = Path(app_root)
        self.pending: dict[str, dict] = {e["file"]: e for e in entries}
        self.parsed: list[str] = []
        self.failed: dict[str, str] = {}          # file -> why libclang could not load it
        self.errors: dict[str, str] = {}          # file -> its first parse error (the rest of it was used)
        self.capped: set[str] = set()             # names spelled in more files than MAX_FILES_PER_NAME
        self._looked: set[tuple[str, bool]] = set()
        self._text: dict[str, bytes] = {}
        self._named: dict[str, set[str]] = {}     # file -> the names it was parsed (or failed) for
        self._all = bool(entries)

    def _bytes(self, rel: str) -> bytes:
        if rel not in self._text:
            try:
                self._text[rel] = (self.app_root / rel).read_bytes()
            except OSError:
                self._text[rel] = b""
        return self._text[rel]

    def mentioning(self, name: str, writes: bool = False) -> list[dict]:
        """The pending files that spell `name` as a word, once per name (later calls: none); with `writes`, only
        those whose text may change it (`name = `, `name += `, `++name`, `&name`, `name.f = `: a global's
        writers, not every file that says `n`)."""
        if not name or (name, writes) in self._looked or not self.pending:
            return []
        self._looked.add((name, writes))
        n = re.escape(name.encode())
        word = re.compile(rb"\b" + n + rb"\b") if not writes else re.compile(
            rb"\b" + n + rb"\s*(?:(?:\.|->)\s*\w+\s*)?(?:[-+*/%&|^]|<<|>>)?=(?!=)|(?:\+\+|--|&)\s*" + n + rb"\b|\b"
            + n + rb"\s*(?:\+\+|--)|&[\w\s.\->\[\]]*?(?:\.|->)\s*" + n + rb"\b")     # `&net->n`
        hits = [e for rel, e in self.pending.items() if word.search(self._bytes(rel))]
        if len(hits) > MAX_FILES_PER_NAME:
            self.capped.add(name)
            hits = hits[:MAX_FILES_PER_NAME]
        for e in hits:
            self._named.setdefault(e["file"], set()).add(name)
        return hits

    def parse(self, entry: dict):
        """The translation unit of one pending file, or None (the reason kept in `failed`)."""
        rel = entry["file"]
        self.pending.pop(rel, None)
        try:
            unit = clang.parse(self.app_root / rel, tu_parse_args(entry), language=entry.get("language", "c++"))
        except MepgenError as e:
            self.failed[rel] = str(e)
            return None
        first = next((d for d in unit.diagnostics if d.severity >= 3), None)
        if first is not None:
            loc = first.location
            where = f"{Path(loc.file.name).name}:{loc.line}" if loc.file is not None else rel
            self.errors[rel] = f"{where}: {first.spelling}"
        self.parsed.append(rel)
        return unit

    def why_not_found(self, name: str) -> str:
        """Why a lookup of `name` (its callers) found nothing in these files, for a todo's reason."""
        failed = [f for f in sorted(self.failed) if name in self._named.get(f, ())]
        if failed:
            return f" (the sources without CUDA code that name it did not parse: " + "; ".join(
                f"{f}: {self.failed[f]}" for f in failed) + ")"
        if name in self.capped:
            return f" (more than {MAX_FILES_PER_NAME} sources without CUDA code name it; mepgen read the first " \
                   f"{MAX_FILES_PER_NAME})"
        return " (nor any of the application's sources without CUDA code)" if self._all else ""

    def summary(self) -> dict:
        """What was read, for `mepgen ready --json`: the files parsed, those with parse errors (first error; the
        rest of the file was used) and those libclang could not load."""
        return {"read": sorted(self.parsed), "with_errors": dict(sorted(self.errors.items())),
                "not_parsed": dict(sorted(self.failed.items()))}
