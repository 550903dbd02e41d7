"""What a variant `kernel.cu` holds: the kernel's new definition and the device helpers beside it.

The variant is parsed with libclang (it is self-contained: system includes and copies of the closure),
so the kernel is found by its qualified name, not by text search, and its text is taken exactly as written.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..errors import MepgenError
from ..parsing import clang

_SCOPES = ("NAMESPACE", "LINKAGE_SPEC")
_DEFS = ("FUNCTION_DECL", "FUNCTION_TEMPLATE")


@dataclass
class Definition:
    qualified_name: str
    namespaces: list[str]
    text: str
    is_kernel: bool


def _qualified(cursor) -> tuple[str, list[str]]:
    parts, c = [], cursor.semantic_parent
    while c is not None and c.kind.name != "TRANSLATION_UNIT":
        if c.kind.name == "NAMESPACE":
            parts.append(c.spelling)
        c = c.semantic_parent
    ns = list(reversed(parts))
    return "::".join([*ns, cursor.spelling]), ns


def read_variant(path: Path, include_dirs: list[str]) -> list[Definition]:
    """Function definitions in the variant file itself (not its includes), in order."""
    path = Path(path).resolve()
    if not path.is_file():
        raise MepgenError(f"variant {path} not found")
    tu = clang.parse(path, [f"-I{d}" for d in include_dirs])
    errors = [d for d in tu.diagnostics if d.severity >= 3]
    if errors:
        d = errors[0]
        where = f"{d.location.file.name}:" if d.location.file is not None and \
            Path(d.location.file.name).resolve() != path else "line "
        raise MepgenError(f"variant {path} does not parse: {where}{d.location.line}: {d.spelling}")
    data = path.read_bytes()
    out: list[Definition] = []

    mine: dict[str, bool] = {}   # file name -> is the variant (resolved once per name, not per cursor)

    def visit(cursors):
        for c in cursors:
            f = c.location.file
            if f is None:
                continue
            if f.name not in mine:
                mine[f.name] = Path(f.name).resolve() == path
            if not mine[f.name]:
                continue
            if c.kind.name in _SCOPES:
                visit(c.get_children())
            elif c.kind.name in _DEFS and c.is_definition():
                kids = [k.kind.name for k in c.get_children()]
                if "CUDAGLOBAL_ATTR" not in kids and "CUDADEVICE_ATTR" not in kids:
                    continue
                name, ns = _qualified(c)
                text = data[c.extent.start.offset:c.extent.end.offset].decode()
                out.append(Definition(name, ns, text, "CUDAGLOBAL_ATTR" in kids))

    visit(tu.cursor.get_children())
    return out
