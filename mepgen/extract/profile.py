"""Measured kernel times from a profiler: Nsight Systems `cuda_gpu_kern_sum` or Nsight Compute, as a report
(`.nsys-rep`, `.ncu-rep`: exported through the tool's own command line, which must be on PATH) or as its CSV.

    nsys stats --report cuda_gpu_kern_sum --format csv report.nsys-rep    (what a .nsys-rep is read with)
    ncu --import report.ncu-rep --csv --page raw                        (what a .ncu-rep is read with)
    ncu --csv --metrics gpu__time_duration.sum ./app > prof.csv          (a CSV: one row per launch and metric)

Kernel names in these files are demangled (`void heat::diffuse_step(const float *, ...)`,
`void cg::axpy<float>(int, T1, const T1 *, T1 *)`); they are reduced to the qualified name without
return type, template arguments or parameters, so they match the inventory's `qualified_name`.
"""
from __future__ import annotations

import csv
import io
from collections import defaultdict
from pathlib import Path

import shutil
import subprocess

from ..demangled import split_demangled
from ..errors import MepgenError
from ..exitcodes import NO_GPU

_NSYS_TIME = "Total Time (ns)"
_NSYS_NAME = "Name"
_NCU_NAME = "Kernel Name"
_NCU_METRIC = "gpu__time_duration.sum"


def base_name(demangled: str) -> str:
    """'void ns::k<float, 4>(const float *, int)' -> 'ns::k'"""
    return split_demangled(demangled)[0]


#: report suffix -> (tool, what it is, the export command's arguments before/after the report)
_REPORTS = {
    ".nsys-rep": ("nsys", "an Nsight Systems report", ["stats", "--report", "cuda_gpu_kern_sum", "--format", "csv"], []),
    ".qdrep": ("nsys", "an Nsight Systems report", ["stats", "--report", "cuda_gpu_kern_sum", "--format", "csv"], []),
    ".ncu-rep": ("ncu", "an Nsight Compute report", ["--import"], ["--csv", "--page", "raw"]),
}


def export_report(path: Path, timeout: float = 600) -> str:
    """The CSV text of an Nsight report, through `nsys stats` / `ncu --import`; a one-line error when the tool is
    missing (exit 4) or fails."""
    tool, what, before, after = _REPORTS[path.suffix]
    exe = shutil.which(tool)
    if exe is None:
        raise MepgenError(f"{path} is {what}: reading it needs `{tool}` on PATH (install Nsight "
                          f"{'Systems' if tool == 'nsys' else 'Compute'}, or give its CSV: "
                          f"{tool} {' '.join(before)} {path} {' '.join(after)} > prof.csv)".replace("  ", " "),
                          exit_code=NO_GPU)
    if not path.is_file():
        raise MepgenError(f"cannot read profile {path}: no such file")
    cmd = [exe, *before, str(path), *after]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, errors="replace", timeout=timeout)
    except subprocess.TimeoutExpired:
        raise MepgenError(f"`{' '.join(cmd)}` did not finish within {timeout:.0f} s") from None
    if done.returncode != 0:
        last = (done.stderr.strip() or done.stdout.strip() or f"exit {done.returncode}").splitlines()[-1]
        raise MepgenError(f"`{tool}` could not read {path} (exit {done.returncode}): {last[:200]}")
    return done.stdout


def _rows(path: Path) -> list[list[str]]:
    if path.suffix in _REPORTS:
        text = export_report(path)
    else:
        try:
            text = path.read_text(errors="replace")
        except OSError as e:
            raise MepgenError(f"cannot read profile {path}: {e.strerror}") from None
    # ncu prints '==PROF==' lines before the CSV when its output is captured with the program's
    lines = [ln for ln in text.splitlines() if not ln.startswith("==")]
    return list(csv.reader(io.StringIO("\n".join(lines))))


def _number(s: str) -> float:
    return float(s.replace(",", "").strip())


def load_profile(path: Path) -> tuple[str, dict[str, dict]]:
    """(format, {qualified name: {"time_ns": total, "launches": count, "names": [as profiled]}})."""
    rows = _rows(Path(path))
    header_at = next((i for i, r in enumerate(rows) if _NSYS_NAME in r and _NSYS_TIME in r
                      or _NCU_NAME in r), None)
    if header_at is None:
        first = next((" ".join(r) for r in rows if any(c.strip() for c in r)), "empty")
        raise MepgenError(f"{path}: not an Nsight Systems cuda_gpu_kern_sum or Nsight Compute CSV "
                          f"(no '{_NSYS_NAME}'/'{_NSYS_TIME}' or '{_NCU_NAME}' column; it begins: {first[:120]})")
    header = rows[header_at]
    out: dict[str, dict] = defaultdict(lambda: {"time_ns": 0.0, "launches": 0, "names": []})
    try:
        if _NCU_NAME in header and _NCU_METRIC in header:
            fmt = "ncu"      # the raw page: a column per metric, a row per launch, units in the row after the header
            name_i, value_i = header.index(_NCU_NAME), header.index(_NCU_METRIC)
            scale = {"ns": 1, "nsecond": 1, "us": 1e3, "usecond": 1e3, "ms": 1e6, "msecond": 1e6, "s": 1e9,
                     "second": 1e9}
            body = rows[header_at + 1:]
            unit = "ns"
            if body and len(body[0]) > value_i and not body[0][name_i].strip():
                unit, body = body[0][value_i].strip() or "ns", body[1:]
            for r in body:
                if len(r) <= max(name_i, value_i) or not r[name_i].strip() or not r[value_i].strip():
                    continue
                entry = out[base_name(r[name_i])]
                entry["time_ns"] += _number(r[value_i]) * scale.get(unit, 1)
                entry["launches"] += 1
                if r[name_i] not in entry["names"]:
                    entry["names"].append(r[name_i])
        elif _NCU_NAME in header:
            fmt = "ncu"
            name_i = header.index(_NCU_NAME)
            metric_i, value_i = header.index("Metric Name"), header.index("Metric Value")
            unit_i = header.index("Metric Unit") if "Metric Unit" in header else None
            scale = {"ns": 1, "nsecond": 1, "us": 1e3, "usecond": 1e3, "ms": 1e6, "msecond": 1e6, "s": 1e9,
                     "second": 1e9}
            for r in rows[header_at + 1:]:
                if len(r) <= max(name_i, metric_i, value_i) or r[metric_i] != _NCU_METRIC:
                    continue
                unit = r[unit_i].strip() if unit_i is not None else "ns"
                entry = out[base_name(r[name_i])]
                entry["time_ns"] += _number(r[value_i]) * scale.get(unit, 1)
                entry["launches"] += 1
                if r[name_i] not in entry["names"]:
                    entry["names"].append(r[name_i])
        else:
            fmt = "nsys"
            name_i, time_i = header.index(_NSYS_NAME), header.index(_NSYS_TIME)
            inst_i = header.index("Instances") if "Instances" in header else None
            for r in rows[header_at + 1:]:
                if len(r) <= max(name_i, time_i):
                    continue
                entry = out[base_name(r[name_i])]
                entry["time_ns"] += _number(r[time_i])
                entry["launches"] += int(_number(r[inst_i])) if inst_i is not None else 1
                entry["names"].append(r[name_i])
    except ValueError as e:
        raise MepgenError(f"{path}: malformed profile row ({e})") from None
    if not out:
        raise MepgenError(f"{path}: the profile lists no kernel times")
    return fmt, dict(out)
