"""Which of several definitions of one kernel the application's binary runs, told by the binary itself.

When the inventory holds two definitions of a kernel (same qualified name and parameter types, different files)
and the build files did not settle which one is compiled (extract/definitions.py marks them `ambiguous`), the
capture asks the binary it is about to run: the executable embeds the device code of each kernel it launches
(cubins in its fat binary, CUDA ELF files). Each candidate's file is compiled alone with the application's flags
for the architecture the binary holds (`nvcc -cubin`), and the kernel's machine code (`.text.<mangled>`) is
compared byte for byte with the binary's. Exactly one candidate equal: that is the definition. None or several
(a compressed fat binary, PTX only, flags mepgen does not know, identical bodies): no pick; every candidate is
refused with the others listed.
"""
from __future__ import annotations

import shutil
import struct
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..evaluate.cubin import STO_CUDA_ENTRY, STT_FUNC, Cubin
from .names import mangled_prefix
from ..mep.buildcfg import kept_flags

EM_CUDA = 190


@dataclass
class Resolution:
    chosen: dict | None          # the inventory's kernel the binary runs; None: not told apart
    reason: str


def _matches(mangled: str, qualified: str) -> bool:
    prefix = mangled_prefix(qualified)
    stem = prefix[:-1] if prefix.startswith("_ZN") else prefix
    return mangled.startswith(prefix) or mangled.startswith(stem + "I")


def _sm(data: bytes, at: int) -> int:
    flags = struct.unpack_from("<I", data, at + 48)[0]
    return (flags >> 8) & 0xFF if data[at + 8] >= 8 else flags & 0xFF


def device_code(data: bytes, qualified: str) -> dict[tuple[int, str], bytes]:
    """(sm, mangled name) -> machine code of each entry of kernel `qualified` in the CUDA ELF files inside
    `data` (an executable, a library or a cubin); compressed fat binary entries are not read."""
    out: dict[tuple[int, str], bytes] = {}
    at = data.find(b"\x7fELF")
    while at >= 0:
        if at + 64 <= len(data) and struct.unpack_from("<H", data, at + 18)[0] == EM_CUDA and data[at + 4] == 2:
            try:
                cubin = Cubin(data[at:])
                for s in cubin.symbols:
                    if s.kind == STT_FUNC and s.other & STO_CUDA_ENTRY and _matches(s.name, qualified):
                        sec = cubin.sections[s.shndx]
                        out[(_sm(data, at), s.name)] = cubin.data[sec["offset"]:sec["offset"] + sec["size"]]
            except (ValueError, struct.error, IndexError):
                pass    # a section this reader cannot parse holds no comparable code: the match is decided by the rest
        at = data.find(b"\x7fELF", at + 4)
    return out


def find_binary(command: list[str], cwd: Path) -> Path | None:
    """The executable the application's command runs (the first word that is a file: `./app`, or a launcher's
    argument such as `python run.py` is not followed)."""
    if not command:
        return None
    first = command[0]
    path = Path(first) if "/" in first else (Path(shutil.which(first)) if shutil.which(first) else None)
    if path is not None and not path.is_absolute():
        path = Path(cwd) / path
    return path if path is not None and path.is_file() else None


def _compile_flags(inv: dict, kernel: dict) -> list[str] | None:
    tu = next((t for t in inv.get("translation_units", []) if t["file"] == kernel["file"]), None)
    if tu is None:
        return None
    return ([f"-I{d}" for d in tu.get("include_dirs", [])] + [f"-D{d}" for d in tu.get("defines", [])]
            + [f"-std={tu.get('std', 'c++17')}"] + kept_flags(tu.get("nvcc_args", [])))


def candidate_code(app_root: Path, inv: dict, kernel: dict, sm: int, nvcc: str = "nvcc") -> tuple[dict, str]:
    """The machine code of `kernel` compiled alone from its file for sm_<sm>, with its translation unit's flags;
    ({}, why) when it cannot be compiled."""
    flags = _compile_flags(inv, kernel)
    if flags is None:
        return {}, f"{kernel['file']} is not a translation unit of the inventory"
    with tempfile.TemporaryDirectory(prefix="mepgen-definition-") as tmp:
        out = Path(tmp) / "k.cubin"
        cmd = [nvcc, "-cubin", f"-arch=sm_{sm}", *flags, str(Path(app_root) / kernel["file"]), "-o", str(out)]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=app_root)
        except (OSError, subprocess.TimeoutExpired) as e:
            return {}, f"nvcc could not compile {kernel['file']}: {e}"
        if r.returncode != 0 or not out.is_file():
            first = next((ln for ln in r.stderr.splitlines() if "error" in ln), r.stderr.strip()[:200])
            return {}, f"{kernel['file']} does not compile alone ({first})"
        return device_code(out.read_bytes(), kernel["qualified_name"]), ""


def resolve(binary: Path | None, app_root: Path, inv: dict, candidates: list[dict], nvcc: str = "nvcc") -> Resolution:
    """The candidate whose compiled code the binary holds, or None with the reason (never a guess)."""
    where = ", ".join(f"{k['id']} ({k['file']}:{k['start_line']})" for k in candidates)
    q = candidates[0]["qualified_name"]
    if binary is None:
        return Resolution(None, f"{q} has {len(candidates)} definitions ({where}) and the application's command "
                                "names no executable to compare them with")
    try:
        held = device_code(Path(binary).read_bytes(), q)
    except OSError as e:
        return Resolution(None, f"cannot read {binary}: {e.strerror}")
    if not held:
        return Resolution(None, f"{q} has {len(candidates)} definitions ({where}) and {binary} holds no readable "
                                "machine code of it (PTX only, a compressed fat binary, or a library launches it)")
    sms = sorted({sm for sm, _ in held}, reverse=True)
    equal, notes = [], []
    for k in candidates:
        code, why = candidate_code(app_root, inv, k, sms[0], nvcc)
        if why:
            notes.append(why)
            continue
        if any(held.get((sm, name)) == text for (sm, name), text in code.items()):
            equal.append(k)
    if len(equal) == 1:
        return Resolution(equal[0], f"{binary} holds the machine code of {equal[0]['file']}:{equal[0]['start_line']} "
                                    f"(each definition compiled alone for sm_{sms[0]} and compared)")
    state = "none of them compiled" if not equal and notes else \
        "none compiles to the code it holds (other flags?)" if not equal else "several compile to the same code"
    return Resolution(None, f"{q} has {len(candidates)} definitions ({where}); compared with {binary}: {state}"
                            + (f" ({'; '.join(notes)})" if notes else ""))
