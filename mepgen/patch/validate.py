"""Checks after a patch: the changed translation units compile with their own flags, a re-extraction finds
the kernel with the same signature and launch sites, and the user's validation command passes."""
from __future__ import annotations

import re
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ..extract import ExtractOptions, extract
from ..mepbuild import nvcc_executable


@dataclass
class Check:
    name: str
    ok: bool
    detail: str = ""


@dataclass
class Validation:
    checks: list[Check] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)


def compile_units(app: Path, inventory: dict, file: str, timeout: float = 600) -> list[Check]:
    """nvcc -c every translation unit that is or includes the patched file, with its recorded flags."""
    checks = []
    units = [t for t in inventory["translation_units"] if t["file"] == file]
    if not units:  # a header: every unit whose parse read it
        units = list(inventory["translation_units"])
    with tempfile.TemporaryDirectory(prefix="mepgen-patch-") as tmp:
        for i, tu in enumerate(units):
            cmd = [nvcc_executable(), f"-std={tu.get('std', 'c++17')}", *tu.get("nvcc_args", []),
                   *[f"-I{d}" for d in tu.get("include_dirs", [])],
                   *[f"-D{d}" for d in tu.get("defines", []) if f"-D{d}" not in tu.get("nvcc_args", [])],
                   "-c", str(app / tu["file"]), "-o", str(Path(tmp) / f"{i}.o")]
            try:
                r = subprocess.run(cmd, cwd=app, capture_output=True, text=True, timeout=timeout)
                ok, detail = r.returncode == 0, (r.stderr.strip().splitlines() or [""])[0] if r.returncode else ""
            except FileNotFoundError:
                ok, detail = False, f"{cmd[0]} not found"
            except subprocess.TimeoutExpired:
                ok, detail = False, f"timed out after {timeout:.0f} s"
            checks.append(Check(f"compile {tu['file']}", ok, detail))
    return checks


def _sites(k: dict, with_config: bool) -> list[tuple]:
    return [(s["kind"], s["shared_mem"], s["stream"], tuple(s["args"]))
            + ((s["grid"], s["block"]) if with_config else ()) for s in k["launch_sites"]]


def as_callers_see(ctype: str) -> str:
    """A parameter type without its top-level qualifiers, which are no part of the function's type:
    `const float *__restrict` and `const float *` are the same parameter to a launch site, `const int` is `int`."""
    t = " ".join(ctype.split())
    cut = max(t.rfind("*"), t.rfind("&")) + 1
    head, tail = t[:cut], re.sub(r"\b(const|volatile|__restrict__|__restrict|restrict)\b", " ", t[cut:])
    return " ".join((head + tail).split()).replace(" *", "*").replace(" &", "&")


def reextract(app: Path, before: dict, kernel: dict, launch_changed: bool = False) -> Check:
    """The kernel is still there, with the same parameters, template parameters and launch sites (whose
    grid and block may differ only when the patch changed the launch configuration on purpose)."""
    o = before.get("extract_options", {})
    after = extract(app, ExtractOptions(
        compile_commands=Path(o["compile_commands"]) if o.get("compile_commands") else None,
        include_dirs=o.get("include_dirs", []), defines=o.get("defines", []), use_cache=False, write=False, jobs=2))
    match = [k for k in after["kernels"] if k["qualified_name"] == kernel["qualified_name"]]
    if not match:
        return Check("re-extract", False, f"{kernel['qualified_name']} is no longer found")
    k = match[0]
    if [as_callers_see(p["type"]) for p in k["params"]] != [as_callers_see(p["type"]) for p in kernel["params"]]:
        return Check("re-extract", False, "the kernel's parameters changed: "
                     + ", ".join(p["type"] for p in k["params"]))
    if k["template_params"] != kernel["template_params"]:
        return Check("re-extract", False, "the kernel's template parameters changed")
    if _sites(k, not launch_changed) != _sites(kernel, not launch_changed):
        return Check("re-extract", False, "the kernel's launch sites changed")
    return Check("re-extract", True, f"signature and {len(k['launch_sites'])} launch site(s) unchanged")


def run_command(app: Path, command: str, timeout: float = 3600) -> Check:
    try:
        r = subprocess.run(command, shell=True, cwd=app, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return Check(f"`{command}`", False, f"timed out after {timeout:.0f} s")
    tail = (r.stdout + r.stderr).strip().splitlines()[-1:] or [""]
    return Check(f"`{command}`", r.returncode == 0, f"exit {r.returncode}: {tail[0][:200]}")


def validate(app: Path, inventory: dict, kernel: dict, file: str, command: str | None,
             launch_changed: bool = False) -> Validation:
    v = Validation(compile_units(app, inventory, file))
    v.checks.append(reextract(app, inventory, kernel, launch_changed))
    if command:
        v.checks.append(run_command(app, command))
    return v
