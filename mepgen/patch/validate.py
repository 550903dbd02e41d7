"""Checks after a patch: the changed translation units compile with their own flags, a re-extraction finds
the kernel with the same signature and launch sites, and the user's validation command passes."""
from __future__ import annotations

import json
import re
import shlex
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import MepgenError
from ..extract import ExtractOptions, extract
from ..extract.flags import find_compile_commands
from ..mepbuild import nvcc_executable


@dataclass
class Check:
    name: str
    ok: bool
    detail: str = ""
    errors: list[str] = field(default_factory=list)   # the compiler's error messages, line numbers dropped
    pre_existing: bool = False     # failed the same way on the original, before the patch


@dataclass
class Validation:
    checks: list[Check] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """No check failed because of the patch (a failure the original already had is reported, not counted)."""
        return all(c.ok or c.pre_existing for c in self.checks)


_ERROR_LINE = re.compile(r"\berror\b", re.I)


def _errors(stderr: str) -> list[str]:
    """nvcc's error messages without their file and line (a patch moves lines): comparable before and after."""
    out = []
    for line in stderr.splitlines():
        if _ERROR_LINE.search(line):
            out.append(re.sub(r"^.*?\(\d+\):\s*|^[^:\s]+:\d+(:\d+)?:\s*", "", line.strip()))
    return out


def against_original(before: list[Check], after: list[Check]) -> list[Check]:
    """Mark each failing compile check whose errors the original already had (a call removed from the
    toolkit, a header missing here): the patch did not cause it. A failure with any new error stays the
    patch's."""
    was = {c.name: c for c in before}
    for c in after:
        old = was.get(c.name)
        if c.ok or old is None or old.ok:
            continue
        new = [e for e in c.errors if e not in old.errors]
        if not new:
            c.pre_existing = True
            c.detail = f"already failed before the patch, the same way ({c.detail}); the patch is not the cause"
        else:
            c.detail = f"{len(new)} error(s) the original did not have, first: {new[0]}"
    return after


def own_commands(app: Path, inventory: dict) -> dict[str, tuple[list[str], Path]]:
    """The application's own compile command of each source (relative path -> arguments, folder), from the
    compile_commands.json the extraction used (given with -p, else found where extract looks)."""
    given = (inventory.get("extract_options") or {}).get("compile_commands")
    try:
        path = find_compile_commands(app, Path(given) if given else None)
        data = json.loads(path.read_text()) if path else []
    except (MepgenError, OSError, ValueError):
        return {}
    out = {}
    for item in data if isinstance(data, list) else []:
        try:
            folder = Path(item["directory"])
            args = item["arguments"] if "arguments" in item else shlex.split(item["command"])
            rel = str((folder / item["file"]).resolve().relative_to(app))
        except (KeyError, TypeError, ValueError):
            continue
        out.setdefault(rel, ([str(a) for a in args], folder))
    return out


def with_output(args: list[str], output: str) -> list[str]:
    """The compile command writing its object to `output` (and compiling only: -c)."""
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
            continue
        if a in ("-o", "--output-file"):
            skip = True
            continue
        if a.startswith(("-o", "--output-file=")) and a not in ("-odir",):
            continue
        out.append(a)
    return out + ([] if "-c" in out or "--compile" in out else ["-c"]) + ["-o", output]


def compile_units(app: Path, inventory: dict, file: str, timeout: float = 600) -> list[Check]:
    """Compile every translation unit that is or includes the patched file the way the application does:
    with its compile_commands.json command when there is one, else nvcc with the flags extract recorded."""
    checks = []
    units = [t for t in inventory["translation_units"] if t["file"] == file]
    if not units:  # a header: every unit whose parse read it
        units = list(inventory["translation_units"])
    own = own_commands(app, inventory)
    with tempfile.TemporaryDirectory(prefix="mepgen-patch-") as tmp:
        for i, tu in enumerate(units):
            cwd = app
            if tu["file"] in own:
                args, cwd = own[tu["file"]]
                cmd = with_output(args, str(Path(tmp) / f"{i}.o"))
            else:
                cmd = [nvcc_executable(), f"-std={tu.get('std', 'c++17')}", *tu.get("nvcc_args", []),
                       *[f"-I{d}" for d in tu.get("include_dirs", [])],
                       *[f"-D{d}" for d in tu.get("defines", []) if f"-D{d}" not in tu.get("nvcc_args", [])],
                       "-c", str(app / tu["file"]), "-o", str(Path(tmp) / f"{i}.o")]
            try:
                r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)
                ok, detail = r.returncode == 0, (r.stderr.strip().splitlines() or [""])[0] if r.returncode else ""
                errors = _errors(r.stderr) if r.returncode else []
            except OSError as e:
                ok, detail, errors = False, f"{cmd[0]}: {e.strerror or e}", [f"{cmd[0]}: {e.strerror or e}"]
            except subprocess.TimeoutExpired:
                ok, detail, errors = False, f"timed out after {timeout:.0f} s", ["timed out"]
            checks.append(Check(f"compile {tu['file']}", ok, detail, errors))
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
             launch_changed: bool = False, original: list[Check] | None = None, also=()) -> Validation:
    """`original`: the same compile checks run before the patch (compile_units on the unpatched sources);
    a failure it already had is told apart from one the patch caused. `also`: other files the patch changed
    (launches of the kernel), compiled too."""
    compiled = [c for f in [file, *also] for c in compile_units(app, inventory, f)]
    v = Validation(against_original(original, compiled) if original is not None else compiled)
    v.checks.append(reextract(app, inventory, kernel, launch_changed))
    if command:
        v.checks.append(run_command(app, command))
    return v
