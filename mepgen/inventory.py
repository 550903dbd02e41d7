"""The inventory (`.mepgen/inventory.json`): what `mepgen extract` found, read by every later stage.

Schema `mepgen.inventory`, version 1 (documented in docs/inventory.md). Readers call :func:`load` and get
a clear error for a missing, malformed or newer-versioned file.
"""
from __future__ import annotations

import json
from pathlib import Path

from .errors import MepgenError

SCHEMA = "mepgen.inventory"
VERSION = 1


def load(path: Path) -> dict:
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise MepgenError(f"{path} not found: run `mepgen extract APP/` first") from None
    except IsADirectoryError:
        raise MepgenError(f"{path} is a folder where mepgen keeps its inventory file: move it away, then rerun "
                          f"`mepgen extract`") from None
    except (OSError, json.JSONDecodeError) as e:
        raise MepgenError(f"{path} is unreadable or not JSON ({e}); rerun `mepgen extract`") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise MepgenError(f"{path} is not a mepgen inventory")
    if data.get("version") != VERSION:
        raise MepgenError(f"{path} has inventory version {data.get('version')}, this mepgen reads version "
                          f"{VERSION}; rerun `mepgen extract`")
    path = Path(path).resolve()
    here = str(path.parent.parent)
    if path.parent.name == ".mepgen" and data.get("app_root") and data["app_root"] != here:
        # moved, or copied with its .mepgen/: every path of the old place is read at the new one (never
        # the old application's files, which may be gone or be another copy)
        old = data["app_root"]
        data = relocate(data, old, here)
        data["moved_from"] = old
    return data


def one_definition(name: str, same: list[dict]) -> dict:
    """Of the kernels one name matches, the definition the application's build compiles (extract/definitions.py
    marks the others `not_built`); definitions mepgen cannot tell apart are refused with the candidates listed,
    never picked. Overloads (other parameter types) keep the first, as before."""
    built = [k for k in same if not k.get("not_built")]
    if len(built) == 1 or not built:
        return (built or same)[0]
    twins = [k for k in built if k.get("definition", {}).get("ambiguous")]
    if len(twins) > 1:
        shown = ", ".join(f"{k['id']} ({k['file']}:{k['start_line']})" for k in twins)
        raise MepgenError(f"kernel '{name}' has {len(twins)} definitions and mepgen cannot tell which one the "
                          f"application runs ({twins[0]['definition'].get('reason', '')}): {shown}; name one by its "
                          "id, or let `mepgen capture` tell them apart by the application's binary")
    return built[0]


def relocate(value, old: str, new: str):
    """`value` with every path string under `old` (the folder itself or below it) moved under `new`."""
    if isinstance(value, str):
        return new + value[len(old):] if value == old or value.startswith(old + "/") else value
    if isinstance(value, list):
        return [relocate(v, old, new) for v in value]
    if isinstance(value, dict):
        return {k: relocate(v, old, new) for k, v in value.items()}
    return value


def kernel_key(kernel: dict) -> str:
    """The name a user types for a kernel: its qualified name (unique within an inventory)."""
    return kernel["qualified_name"]
