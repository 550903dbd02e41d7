"""The patched source: the variant's kernel spliced in at the kernel's exact extent, new helpers beside it.

Every other byte of the file stays as it was. A variant may add device helpers (inserted just before the
kernel, in the kernel's namespace); a helper it changed that the rest of the application shares gets a copy of its
own that the new kernel calls (clones.py). It may not add kernels (that would need new launch sites): refused with
the reason.
"""
from __future__ import annotations

import difflib
import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..errors import MepgenError
from .clones import clone_changed
from .launch_sites import LaunchChange
from .variant import Definition


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass
class Plan:
    kernel: str                 # qualified name
    kernel_id: str
    file: str                   # relative to the application root
    recorded_sha: str           # the file as `mepgen extract` saw it
    original: bytes
    patched: bytes              # `original` with `edits`
    edits: list[tuple[int, int, bytes]] = field(default_factory=list)   # of `original`: start, end, new bytes
    new_helpers: list[str] = field(default_factory=list)
    launch_notes: list[str] = field(default_factory=list)
    helper_notes: list[str] = field(default_factory=list)    # shared helpers the variant changed: copied or left out
    unchanged: bool = False     # the variant's kernel is the original, byte for byte

    @property
    def patched_sha(self) -> str:
        return sha256(self.patched)


def _line_end(data: bytes) -> str:
    """The line end most of the file's lines have: "\r\n" (a file written on Windows) or "\n"."""
    crlf = data.count(b"\r\n")
    return "\r\n" if crlf > data.count(b"\n") - crlf else "\n"


def _with_line_end(text: str, eol: str) -> str:
    """`text` (the variant's lines end in "\n": mepgen writes the MEP so) with the file's own line end."""
    return text if eol == "\n" else text.replace("\r\n", "\n").replace("\n", eol)


def plan(app: Path, inventory: dict, kernel: dict, defs: list[Definition], original: bytes,
         launch: LaunchChange | None = None, source: Callable[[str], bytes] | None = None) -> Plan:
    """The patch for `kernel` from the variant's definitions, applied to `original` (the recorded file),
    with the launch-site edits of a new block size when the winner has one. `source(file)`: a file as
    extracted (other kernels of a file may be patched already: the inventory's offsets are the original's)."""
    def _member_text(app: Path, member: dict) -> str:
        if member["file"] == kernel["file"]:
            data = original
        else:
            data = source(member["file"]) if source else (app / member["file"]).read_bytes()
        return data[member["start_byte"]:member["end_byte"]].decode()

    name = kernel["qualified_name"]
    found = [d for d in defs if d.qualified_name == name and d.is_kernel]
    if not found:
        raise MepgenError(f"the variant defines no kernel named {name}")
    new_kernel = found[0]
    shared = {m["qualified_name"]: m for m in kernel["closure"]["device_functions"]}
    # a chained MEP's kernel.cu also holds the kernels its chain runs first: the application's own, unchanged
    app_kernels = {k["qualified_name"]: k for k in inventory.get("kernels", []) if k["qualified_name"] != name}
    chain = set()
    for d in defs:
        k = app_kernels.get(d.qualified_name)
        if d.is_kernel and k is not None:
            if d.text.split() != _member_text(app, k).split():
                raise MepgenError(f"the variant changes {d.qualified_name} ({k['file']}:{k.get('start_line', '?')}), "
                                  f"a kernel its MEP's chain runs before {name}; patch changes only {name}")
            chain.add(d.qualified_name)
            for m in k["closure"]["device_functions"]:
                shared.setdefault(m["qualified_name"], m)
    helpers: list[Definition] = []
    changed, unchanged = {}, {}
    for d in defs:
        if d is new_kernel or d.qualified_name in chain:
            continue
        if d.qualified_name in shared:
            same = d.text.split() == _member_text(app, shared[d.qualified_name]).split()   # spacing is no change
            (unchanged if same else changed)[d.qualified_name] = d
            continue
        if d.is_kernel:
            raise MepgenError(f"the variant adds the kernel {d.qualified_name}: a rewrite into several kernels "
                              f"needs new launch sites, which patch does not write")
        if d.namespaces != kernel_namespaces(kernel):
            raise MepgenError(f"the variant's new helper {d.qualified_name} is not in the kernel's namespace "
                              f"({'::'.join(kernel_namespaces(kernel)) or 'global'})")
        helpers.append(d)
    kernel_text, copies, copy_notes = new_kernel.text, [], []
    if changed:
        where = {q: f"{m['file']}:{m.get('start_line', '?')}" for q, m in shared.items()}
        taken = set(re.findall(r"[A-Za-z_]\w*", original.decode(errors="replace")))
        kernel_text, copies, copy_notes = clone_changed(kernel["name"], kernel_namespaces(kernel), new_kernel,
                                                        changed, unchanged, where, taken)
        helpers = copies + helpers
    start, end = kernel["start_byte"], kernel["end_byte"]
    old_kernel = original[start:end].decode()
    launch = launch or LaunchChange()
    at = _before_leading_comment(original, start) if helpers or launch.prelude else start
    eol = _line_end(original)       # a file of CRLF lines gets CRLF lines: only what changed shows in the diff
    kernel_text = _with_line_end(kernel_text, eol)
    inserted = _with_line_end(launch.prelude + "".join(h.text + "\n\n" for h in helpers), eol).encode()
    edits = [(at, at, inserted), (start, end, kernel_text.encode()), *launch.edits]
    spans = sorted((lo, hi) for lo, hi, _ in launch.edits)
    if any(b[0] < a[1] for a, b in zip(spans, spans[1:])):
        raise MepgenError("two launch-site edits overlap: patch cannot write this launch configuration; edit the "
                          "launches by hand")
    patched = original
    for lo, hi, new in sorted(edits, key=lambda e: (e[0], e[1]), reverse=True):
        if lo < end and hi > start and (lo, hi) != (start, end):
            raise MepgenError("a launch-site edit overlaps the kernel: patch cannot apply both")
        patched = patched[:lo] + new + patched[hi:]
    return Plan(kernel=name, kernel_id=kernel["id"], file=kernel["file"],
                recorded_sha=inventory["files"][kernel["file"]], original=original, patched=patched,
                edits=[e for e in edits if e[0] != e[1] or e[2]],
                new_helpers=[h.qualified_name for h in helpers], launch_notes=launch.notes, helper_notes=copy_notes,
                unchanged=not helpers and not launch.edits and not launch.others and kernel_text == old_kernel)


def companion_plan(kernel: dict, patch_id: str, file: str, recorded_sha: str, original: bytes,
                   edits: list[tuple[int, int, bytes]]) -> Plan:
    """The launch-site edits of `file`, another file than the kernel's that launches it."""
    spans = sorted((lo, hi) for lo, hi, _ in edits)
    if any(b[0] < a[1] for a, b in zip(spans, spans[1:]) if a != b):
        raise MepgenError(f"two launch-site edits of {file} overlap: edit the launches by hand")
    patched = original
    for lo, hi, new in sorted(edits, key=lambda e: (e[0], e[1]), reverse=True):
        patched = patched[:lo] + new + patched[hi:]
    return Plan(kernel=kernel["qualified_name"], kernel_id=patch_id, file=file, recorded_sha=recorded_sha,
                original=original, patched=patched, edits=list(edits), unchanged=not edits)


def _before_leading_comment(data: bytes, start: int) -> int:
    """Where the `//` comment lines right above the kernel begin, so new helpers go above its comment."""
    line_start = data.rfind(b"\n", 0, start) + 1
    at = line_start
    while at > 0:
        prev_start = data.rfind(b"\n", 0, at - 1) + 1
        if not data[prev_start:at].lstrip().startswith(b"//"):
            break
        at = prev_start
    return at


def kernel_namespaces(kernel: dict) -> list[str]:
    return kernel["qualified_name"].split("::")[:-1]


def unified_diff(rel: str, before: bytes, after: bytes) -> str:
    """A diff `git apply` and `patch -p1` accept from the application's root."""
    a = before.decode().splitlines(keepends=True)
    b = after.decode().splitlines(keepends=True)
    out = []
    for line in difflib.unified_diff(a, b, f"a/{rel}", f"b/{rel}", n=3):
        out.append(line)
        if not line.endswith("\n"):
            out.append("\n\\ No newline at end of file\n")
    return "".join(out)
