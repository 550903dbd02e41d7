"""The inventory (`.mepgen/inventory.json`): what `mepgen extract` found, read by every later stage.

Schema `mepgen.inventory`, version 1 (documented in docs/inventory.md). Readers call :func:`load` and get
a clear error for a missing, malformed or newer-versioned file.
"""
from __future__ import annotations

import difflib
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


def find_kernel(inventory: dict, name: str) -> dict:
    """A kernel by qualified name, or by plain name when that is unambiguous; else a helpful error."""
    kernels = inventory["kernels"]
    exact = [k for k in kernels if k["qualified_name"] == name]
    if exact:
        return exact[0]
    plain = [k for k in kernels if k["name"] == name or k["id"] == name]
    if len(plain) == 1:
        return plain[0]
    if len(plain) > 1:
        names = ", ".join(k["qualified_name"] for k in plain)
        raise MepgenError(f"kernel '{name}' is ambiguous: {names}")
    spellings = {}
    for k in kernels:
        for s in (k["qualified_name"], k["name"], k["id"]):
            spellings.setdefault(s, k["qualified_name"])
    close = difflib.get_close_matches(name, list(spellings), n=5, cutoff=0.5)
    hint = f"; closest: {', '.join(list(dict.fromkeys(spellings[c] for c in close))[:3])}" if close else ""
    raise MepgenError(f"no kernel named '{name}' in the inventory{hint}")
