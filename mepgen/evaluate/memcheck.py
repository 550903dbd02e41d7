"""compute-sanitizer's memcheck on a candidate: out-of-bounds reads (and writes) are verdicts before a winner is named.

Guard zones (guards.py) find writes out of bounds on every run; a read changes nothing there, so the candidate
about to be named best (`optimize`, `patch` of a variant not checked yet) runs once more, under
`compute-sanitizer --tool memcheck`, in the native harness built with its launch and flags and started with
`--exact-alloc`: each buffer its own allocation of its own size, no guards and no placement, and the sanitizer's
padding (PADDING bytes) after every allocation, so that an access past the end, before the start or toward a
neighbouring buffer lands outside any allocation. The harness prints `MEPGEN_BUFFER name address bytes` for each
buffer, and each error the sanitizer reports is told as the buffer it was meant for, the side and the distance.

What it cannot tell: an access that computes another buffer's address from two parameters (`x + (y - x)`) is a
valid address. The run is the sanitizer's (tens of times slower than a plain run): `seconds` is recorded.
"""
from __future__ import annotations

import hashlib
import json
import re
import shutil
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .. import mepbuild
from ..spec import load_spec
from . import confined, confinement, landlock_level, process, sandbox
from .backend import InputSet
from .devices import list_gpus
from .guards import GUARD_BYTES
from .native import NativeBackend
from .results import CompileFailed
from .store import Store

#: compute-sanitizer's exit status when it found an error
ERROR_EXIT = 86
#: the host compiler's optimization for a harness built only to run under memcheck, the last of its nvcc flags
#: (nvcc takes the last -O, warning "incompatible redefinition for option 'optimize'"). Safe: nvcc's -O is the host
#: compiler's level only (device code follows -dopt and ptxas's own -O): the cubin and PTX are those of mep.yaml's
#: flags, byte for byte (nvcc 13.0; tests/evaluate/test_evaluate_memcheck_build.py). The harness builds in 1.8 s
#: instead of 2.4 s (an H200 host); -O1, not -O0 (1.6 s), keeps its host loops over large buffers quick.
HOST_OPT = "-O1"
#: the sanitizer's padding after each allocation (as the guards: a read up to this far out is outside any buffer)
PADDING = GUARD_BYTES
_PREFIX = re.compile(r"^=+ ?")
_BUFFER = re.compile(r"^MEPGEN_BUFFER (\S+) (0x[0-9a-fA-F]+|\(nil\)) (\d+)\s*$")
_NEAREST = re.compile(r"(\d[\d,]*) bytes? (after|before) the nearest allocation at (0x[0-9a-fA-F]+)")
_ADDRESS = re.compile(r"Address (0x[0-9a-fA-F]+)")
_ACCESS = re.compile(r"(Invalid|Misaligned|Out-of-range|Illegal)\b")
_SKIP = ("COMPUTE-SANITIZER", "ERROR SUMMARY", "Program hit", "Saved host backtrace", "Target application returned",
         "LEAK SUMMARY", "Host Frame", "Device Frame")


@dataclass
class Report:
    clean: bool | None                 # None: no verdict (no sanitizer, or its run failed for another reason)
    seconds: float = 0.0
    errors: list[dict] = field(default_factory=list)
    message: str = ""                  # one line: the first error, told with its buffer; or why there is no verdict
    tool: str = ""
    how: str = ""                      # optimize's check: "cubin" (the timed cubin, memcheck_worker.py) or "harness"
    fallback: str = ""                 # why the harness was checked where the cubin was meant to be

    def to_dict(self) -> dict:
        return asdict(self)


def executable() -> Path | None:
    """compute-sanitizer: the program itself, in the toolkit nvcc belongs to or beside the one on PATH. The
    toolkit's bin/compute-sanitizer is a shell script that runs ../compute-sanitizer/compute-sanitizer: under
    landlock only the programs given may run, and the script's shell is not one of them (exit 126, "Permission
    denied", seen on an H200 host), so the script is never what runs when the program it wraps is there."""
    found = shutil.which("compute-sanitizer")
    root = confined.toolkit_root(mepbuild.nvcc_executable())
    places = []
    if found:
        places += [Path(found).resolve().parent.parent / "compute-sanitizer" / "compute-sanitizer", Path(found)]
    if root:
        places += [root / "compute-sanitizer" / "compute-sanitizer", root / "bin" / "compute-sanitizer"]
    for p in places:
        if p.is_file() and not _script(p):
            return p
    return next((p for p in places if p.is_file()), None)


def _script(p: Path) -> bool:
    """Whether `p` is a script (`#!`), not a program."""
    try:
        with open(p, "rb") as f:
            return f.read(2) == b"#!"
    except OSError:
        return False


def buffers_of(text: str) -> dict[str, tuple[int, int]]:
    """name -> (address, bytes) from the harness's `MEPGEN_BUFFER` lines."""
    out = {}
    for line in text.splitlines():
        m = _BUFFER.match(line.strip())
        if m and m.group(2).startswith("0x"):
            out[m.group(1)] = (int(m.group(2), 16), int(m.group(3)))
    return out


def parse(text: str, buffers: dict[str, tuple[int, int]]) -> list[dict]:
    """The errors in compute-sanitizer's output: {what, address, buffer, side, distance, at}."""
    errors: list[dict] = []
    current = None
    for raw in text.splitlines():
        if not raw.startswith("="):
            continue
        line = _PREFIX.sub("", raw)
        body = line.strip()
        if not body or any(body.startswith(s) for s in _SKIP):
            if not line.startswith(" "):                   # a line of its own (a summary, an API error): not an
                current = None                             # access error's detail
            continue
        if not line.startswith(" "):                       # a new error's first line
            current = {"what": body, "address": None, "buffer": None, "side": None, "distance": None, "at": ""}
            errors.append(current)
            continue
        if current is None:
            continue
        if body.startswith("at ") and not current["at"]:
            current["at"] = body[3:]
        m = _ADDRESS.search(body)
        if m:
            current["address"] = int(m.group(1), 16)
        m = _NEAREST.search(body)
        if m:
            base = int(m.group(3), 16)
            name = next((n for n, (a, _) in buffers.items() if a == base), None)
            current.update(buffer=name, side=m.group(2), distance=int(m.group(1).replace(",", "")))
    errors = [e for e in errors if e["address"] is not None or _ACCESS.match(e["what"])]   # not the tool's own
    for e in errors:            # the buffer nearest to the address (the sanitizer's `nearest allocation` may be
        if e["address"] is not None:    # the padding's owner, another buffer, for an access before a start)
            _place(e, buffers)
    return errors


def _place(e: dict, buffers: dict[str, tuple[int, int]]) -> None:
    """Name the buffer an address is nearest to (within PADDING), with the side and the distance."""
    best = None
    for name, (start, size) in buffers.items():
        a = e["address"]
        if a < start:
            side, dist = "before", start - a
        elif a >= start + size:
            side, dist = "after", a - (start + size)
        else:
            side, dist = "inside", 0
        if dist <= PADDING and (best is None or dist < best[2]):
            best = (name, side, dist)
    if best is not None:
        e["buffer"], e["side"], e["distance"] = best


def describe(e: dict) -> str:
    where = {"after": "past the end of", "before": "before the start of", "inside": "inside"}.get(e.get("side") or "")
    told = f"{e['distance']} byte(s) {where} {e['buffer']}" if e.get("buffer") and where else "outside every buffer"
    addr = f" at address {e['address']:#x}" if e.get("address") is not None else ""
    at = f", in {e['at']}" if e.get("at") else ""
    return f"memcheck: {e['what']}{addr}: {told}{at}"


def host_flags(flags=()) -> tuple[str, ...]:
    """nvcc flags of a harness built for memcheck alone (not the timed build): `flags`, then HOST_OPT."""
    return (*flags, HOST_OPT)


def tool_args(tool: Path) -> list[str]:
    """compute-sanitizer's command line before its target's."""
    return [str(tool), "--tool", "memcheck", "--padding", str(PADDING), "--error-exitcode", str(ERROR_EXIT),
            "--print-limit", "20", "--show-backtrace", "device"]


def tool_root(tool: Path) -> Path:
    """The folder of the sanitizer's files (its libraries beside it): what its confinement reads and runs."""
    real = Path(tool).resolve()
    return real.parent.parent if real.parent.name in ("bin", "compute-sanitizer") else real.parent


def command(tool: Path, binary: Path, data_dir: Path, out_dir: Path) -> list[str]:
    return [*tool_args(tool), str(binary), "--data", str(data_dir), "--out", str(out_dir), "--exact-alloc"]


def verdict(text: str, code: int | None, seconds: float, tool: str, timed_out: bool, timeout: float,
            failed: str = "") -> Report:
    """The Report of a run under memcheck: `text` its output (the sanitizer's and its target's), `code` the
    sanitizer's exit status, `failed` why the target stopped when it did not end as it should."""
    errors = parse(text, buffers_of(text))
    if errors:
        return Report(False, seconds, errors, describe(errors[0]), tool)
    if timed_out:
        return Report(None, seconds, message=f"memcheck did not finish within {timeout:g} s: no verdict", tool=tool)
    if code == ERROR_EXIT:
        return Report(False, seconds, [], "memcheck found errors it did not describe: "
                      + (text.strip().splitlines() or ["?"])[-1][:300], tool)
    if code != 0 or failed:
        tail = failed or ([ln for ln in text.splitlines() if ln.strip()][-1:] or ["no output"])[0]
        return Report(None, seconds, message=f"memcheck run failed (exit {code}): {tail[:300]}", tool=tool)
    return Report(True, seconds, tool=tool)


def check(native, built, inputs, out_dir: Path, level: str, timeout: float) -> Report:
    """Run the native harness `built` once on input set `inputs` under memcheck (NativeBackend `native` gives the
    environment and the sandbox level's rules); a Report with the verdict and what it cost."""
    tool = executable()
    if tool is None:
        return Report(None, message="compute-sanitizer not found (it ships with the CUDA toolkit): reads out of "
                                    "bounds not checked")
    if "--exact-alloc" not in getattr(native, "harness_text", "--exact-alloc"):
        return Report(None, message="the MEP's harness.cu has no --exact-alloc (rendered by an older mepgen): "
                                    "`mepgen mep ID --refresh` renders it again, with guard zones")
    out_dir = Path(out_dir)
    if out_dir.exists():
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True)
    args = command(tool, Path(built.artifact), Path(inputs.data_dir), out_dir)
    args, confine = confine_run(level, args, args.index(str(built.artifact)), tool_root(tool), native, out_dir)
    start = time.monotonic()
    done = process.run(args, timeout=timeout, cwd=out_dir, env=native._env(), confine=confine)
    return verdict(done.stdout + "\n" + done.stderr, done.returncode, time.monotonic() - start, str(tool),
                   done.timed_out, timeout)


#: the harness under the sanitizer gets the seccomp filter of a GPU process (its program passes through the
#: sanitizer to the launcher as an open descriptor)
TARGET_SECCOMP = True


def confine_run(level: str, args: list[str], at: int, root: Path, native, out_dir: Path):
    """(argv, Confinement) of the sanitizer running the harness `args[at:]`. Under landlock the harness is its
    own confined process: the sanitizer's target is the launcher, which confines the harness as a candidate's run
    is (its own files, its scratch, no other program, the seccomp filter of a GPU process) before it starts it.
    The sanitizer itself (NVIDIA's program, not the candidate's) reads and writes /proc (the target's status and maps: the
    launcher grants a process only its own) and runs without the filter, which refuses what it does to its
    target. Other levels: one confinement for both, without the filter, as before."""
    tool_args, harness = list(args[:at]), list(args[at:])
    if level != "landlock":
        c = confined.for_run(level, args, out_dir, confinement.BUILD_FILE_LIMIT,
                             read=[*native.runtime_read, root], programs=[root, Path(harness[0])])
        c.seccomp = False
        return args, c
    inner = confined.for_run(level, harness, out_dir, confinement.BUILD_FILE_LIMIT,
                             read=[*native.runtime_read, root], programs=native.runtime_programs)
    inner.keep_root = True          # as the sanitizer runs: the launcher inside has no right to change user
    inner.seccomp = TARGET_SECCOMP
    inner.environment({})
    inner.prepare()
    inner_argv = landlock_level.prefix(inner, harness, inner.scratch) + harness
    head = Path(inner_argv[0])
    launcher = [head] if head.name != Path(sys.executable).name else [head, landlock_level.LAUNCHER,
                                                                       *confined.python_paths([])]
    outer = confined.for_run(level, [*tool_args, *inner_argv], out_dir, confinement.BUILD_FILE_LIMIT,
                             read=[*native.runtime_read, root, Path("/proc"), *launcher],
                             programs=[root, launcher[0], Path(harness[0])])
    outer.seccomp = False
    # Landlock layers stack: the harness under the sanitizer is bound by both, and the CUDA driver in it names its
    # threads (/proc/self/task/TID/comm; refused, its CUDA calls fail: "terminated before first instrumented API
    # call" on an H200). The sanitizer's layer lets /proc be written; the harness's own layer, inside it, still
    # allows only its own threads' files.
    outer.system_write = [Path("/proc")]
    outer.pass_fds += inner.pass_fds        # the harness's seccomp program, through the sanitizer to the launcher
    return [*tool_args, *inner_argv], outer


#: beside a winner's kernel.cu (optimize's best/): the memcheck verdict on exactly that text
MARKER = "memcheck.json"


def write_marker(kernel_file: Path, report: dict) -> None:
    data = dict(report, kernel_sha256=hashlib.sha256(Path(kernel_file).read_bytes()).hexdigest())
    (Path(kernel_file).parent / MARKER).write_text(json.dumps(data, indent=1) + "\n")


def checked_clean(kernel_file: Path) -> bool:
    """Whether memcheck found `kernel_file`, exactly this text, clean already (optimize's marker beside it)."""
    marker = Path(kernel_file).parent / MARKER
    try:
        data = json.loads(marker.read_text())
    except (OSError, ValueError):
        return False
    return (isinstance(data, dict) and data.get("clean") is True
            and data.get("kernel_sha256") == hashlib.sha256(Path(kernel_file).read_bytes()).hexdigest())


def check_variant(mep_dir: Path, variant: Path, launch=None, flags=(), level_mode: str = "auto",
                  timeout: float = 600.0) -> Report:
    """`patch` taking a variant: memcheck it on the MEP's first input set unless it was checked clean (its
    marker); no verdict without compute-sanitizer or a GPU. `launch`, `flags`: the winner's, when they differ."""
    if checked_clean(variant):
        return Report(True, message="checked clean by mepgen optimize")
    if executable() is None:
        return Report(None, message="compute-sanitizer not found: out-of-bounds reads not checked")
    gpus, why = list_gpus()
    if not gpus:
        return Report(None, message=f"no memory check: no GPU here ({why})")
    spec = load_spec(Path(mep_dir) / "mep.yaml")
    store = Store(mep_dir, spec)
    native = NativeBackend(spec, mep_dir, store.build_dir, gpus[0])
    native.sandbox_level = level = sandbox.resolve(level_mode)
    built = native.compile(Path(variant), launch=launch, flags=host_flags(flags))
    if isinstance(built, CompileFailed):
        return Report(None, message=f"the native harness did not build for memcheck: {built.message[:300]}")
    inputs = InputSet(0, store.input_set(0))
    report = check(native, built, inputs, store.work_dir / "memcheck", level, timeout)
    if report.clean is False:        # judged only where the MEP's own kernel is clean (its buffers' sizes)
        base = native.compile(Path(mep_dir) / "kernel.cu", flags=host_flags())
        original = Report(None, message="the original did not build") if isinstance(base, CompileFailed) else \
            check(native, base, inputs, store.work_dir / "memcheck-original", level, timeout)
        if original.clean is not True:
            return Report(None, report.seconds + original.seconds, report.errors,
                          f"no verdict: the original kernel is not clean under memcheck either ({original.message})",
                          report.tool)
    if report.clean is not None:
        try:
            write_marker(Path(variant), report.to_dict())
        except OSError:
            pass        # no marker: patch --apply checks the variant again (slower, same verdict)
    return report
