"""Which kernel a user means: one resolver for every command that takes a kernel's name.

A kernel answers to its id (`cg.axpy`, `k@file.12` for an overload), its qualified name (`cg::axpy`) and its plain
name (`axpy`) when that plain name is unique. `mepgen mep`, `run`, `optimize`, `capture`, `patch` and the batch
chooser (`optimize --only`) all resolve a name here, so one name means the same kernel everywhere. An ambiguous
name lists the candidates; an unknown one names the closest spellings; both are usage errors (exit code 2).
"""
from __future__ import annotations

import difflib
from pathlib import Path

from .errors import MepgenError
from .inventory import load, one_definition
from .workspace import Workspace, mep_of_path, restore_interrupted


class UnknownKernel(MepgenError):
    """No kernel answers to the name; `closest` holds the qualified names of the nearest spellings."""

    def __init__(self, message: str, closest: list[str]):
        super().__init__(message)
        self.closest = closest


def resolve(kernels: list[dict], name: str, where: str = "the inventory") -> dict:
    """The record (with `id`, `qualified_name`, `name`) that `name` means among `kernels`."""
    name = name.strip()
    by_id = [k for k in kernels if k["id"] == name]
    if by_id:
        return by_id[0]
    for field in ("qualified_name", "name"):
        found = [k for k in kernels if k[field] == name]
        if len(found) > 1:      # several definitions: the one the build compiles (extract/definitions.py), if known
            built = [k for k in found if not k.get("not_built")]
            if len({k["qualified_name"] for k in built}) == 1 and any(k.get("definition") for k in found):
                return one_definition(name, found)
            found = built or found
        if len(found) == 1:
            return found[0]
        if found:
            shown = ", ".join(_distinct(k) for k in found)
            raise MepgenError(f"kernel '{name}' is ambiguous: {shown}")
    spellings: dict[str, str] = {}
    for k in kernels:
        for s in (k["qualified_name"], k["name"], k["id"]):
            spellings.setdefault(s, k["qualified_name"])
    close = difflib.get_close_matches(name, list(spellings), n=5, cutoff=0.5)
    closest = list(dict.fromkeys(spellings[c] for c in close))[:3]
    hint = f"; closest: {', '.join(closest)}" if closest else ""
    raise UnknownKernel(f"no kernel named '{name}' in {where}{hint}", closest)


def find_kernel(inventory: dict, name: str) -> dict:
    """The inventory's kernel record that `name` means."""
    return resolve(inventory["kernels"], name)


def _distinct(k: dict) -> str:
    """How to name one of several candidates so the user can pick it: the id where the qualified name is shared."""
    return k["qualified_name"] if k["id"].replace(".", "::") == k["qualified_name"] else k["id"]


def mep_record(mep_id: str, qualified: str | None = None) -> dict:
    """A resolver record for an MEP folder (its name is the kernel's id), with its qualified name when known."""
    qualified = qualified or mep_id.split("@")[0].replace(".", "::")
    return {"id": mep_id, "qualified_name": qualified, "name": qualified.split("::")[-1]}


def mep_folder(ws: Workspace, kernel: str) -> Path:
    """The MEP folder of the kernel that `kernel` names (id, qualified or unique plain name), resolved against
    the inventory when there is a readable one, else against the MEPs on disk."""
    if "/" in kernel:     # a path to an MEP folder: only one of this application's
        kernel = mep_of_path(ws, Path(kernel))
    exact = ws.mep_dir(kernel.replace("::", "."))
    restore_interrupted(exact)      # a swap a kill left half-done (mep/writer.py) is finished first
    if (exact / "mep.yaml").is_file():
        return exact
    missing = MepgenError(f"no MEP for '{kernel}' in {ws.root / 'meps'}: run `mepgen mep {kernel}` first")
    try:
        records = load(ws.inventory_path)["kernels"]
    except MepgenError:  # no (readable) inventory: the MEPs on disk are what there is to name
        records = [mep_record(f.parent.name) for f in sorted((ws.root / "meps").glob("*/mep.yaml"))]
    try:
        found = resolve(records, kernel)
    except UnknownKernel:
        raise missing from None
    folder = ws.mep_dir(found["id"])
    restore_interrupted(folder)
    if not (folder / "mep.yaml").is_file():
        raise MepgenError(f"no MEP for '{kernel}' ({found['qualified_name']}) in {ws.root / 'meps'}: run "
                          f"`mepgen mep {found['qualified_name']}` first")
    return folder
