"""`extract --profile` takes Nsight reports (.nsys-rep, .ncu-rep) through the tools' own exporters. The tools are
fake scripts on PATH here that print what the real ones print (and record how they were called)."""
from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner

from mepgen.cli import main
from mepgen.errors import MepgenError
from mepgen.exitcodes import NO_GPU
from mepgen.extract.profile import load_profile

NSYS_OUT = """Generating SQLite file report.sqlite from report.nsys-rep
Processing [report.sqlite] with [/opt/nvidia/nsight-systems/reports/cuda_gpu_kern_sum.py]...
Time (%),Total Time (ns),Instances,Avg (ns),Med (ns),Min (ns),Max (ns),StdDev (ns),Name
80.0,8000000,200,40000.0,40000.0,39000,41000,100.0,"void heat::diffuse_step(const float *, float *, heat::Grid, float, float)"
20.0,2000000,10,200000.0,200000.0,199000,201000,10.0,"void analysis::histogram(const float *, int, unsigned int *)"
"""

# the raw page: a column per metric, the units in the row under the header, a row per launch
NCU_OUT = """==PROF== Connected to process
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","gpu__time_duration.sum","launch__grid_size"
"","","","","","","","","","","","usecond",""
"0","1","heatcg","h","void heat::diffuse_step(const float *, float *, heat::Grid, float, float)","1","7","(32, 8, 1)","(64, 256, 1)","0","9.0","35.5","16384"
"1","1","heatcg","h","void heat::diffuse_step(const float *, float *, heat::Grid, float, float)","1","7","(32, 8, 1)","(64, 256, 1)","0","9.0","34.5","16384"
"2","1","heatcg","h","void analysis::histogram(const float *, int, unsigned int *)","1","7","(256, 1, 1)","(4096, 1, 1)","0","9.0","1500","4096"
"""


def fake_tool(bin_dir: Path, name: str, stdout: str, code: int = 0, stderr: str = "") -> Path:
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / f"{name}.out").write_text(stdout)
    script = bin_dir / name
    script.write_text(f"""#!/bin/sh
printf '%s\\n' "$@" > "{bin_dir}/{name}.args"
cat "{bin_dir}/{name}.out"
printf '%s' '{stderr}' >&2
exit {code}
""")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


@pytest.fixture
def bin_dir(tmp_path, monkeypatch):
    d = tmp_path / "bin"
    d.mkdir()
    monkeypatch.setenv("PATH", f"{d}{os.pathsep}{os.environ['PATH']}")
    return d


def test_nsys_report_through_nsys_stats(tmp_path, bin_dir):
    fake_tool(bin_dir, "nsys", NSYS_OUT)
    rep = tmp_path / "report.nsys-rep"
    rep.write_bytes(b"\0binary")
    fmt, times = load_profile(rep)
    assert fmt == "nsys"
    assert times["heat::diffuse_step"]["time_ns"] == 8e6 and times["heat::diffuse_step"]["launches"] == 200
    assert times["analysis::histogram"]["time_ns"] == 2e6
    args = (bin_dir / "nsys.args").read_text().split("\n")
    assert args[:5] == ["stats", "--report", "cuda_gpu_kern_sum", "--format", "csv"] and args[5] == str(rep)


def test_ncu_report_through_ncu_import_raw_page(tmp_path, bin_dir):
    fake_tool(bin_dir, "ncu", NCU_OUT)
    rep = tmp_path / "report.ncu-rep"
    rep.write_bytes(b"\0binary")
    fmt, times = load_profile(rep)
    assert fmt == "ncu"
    assert times["heat::diffuse_step"] == {"time_ns": pytest.approx(70000.0), "launches": 2,
                                           "names": ["void heat::diffuse_step(const float *, float *, heat::Grid, "
                                                     "float, float)"]}
    assert times["analysis::histogram"]["time_ns"] == pytest.approx(1.5e6)
    assert (bin_dir / "ncu.args").read_text().split("\n")[:5] == ["--import", str(rep), "--csv", "--page", "raw"]


def test_missing_tool_is_exit_4_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "nothing-here"))
    rep = tmp_path / "report.nsys-rep"
    rep.write_bytes(b"\0")
    with pytest.raises(MepgenError) as e:
        load_profile(rep)
    assert e.value.exit_code == NO_GPU and "needs `nsys` on PATH" in str(e.value) and "\n" not in str(e.value)


def test_tool_failure_says_what_the_tool_said(tmp_path, bin_dir):
    fake_tool(bin_dir, "ncu", "", code=1, stderr="==ERROR== Failed to open report file")
    rep = tmp_path / "broken.ncu-rep"
    rep.write_bytes(b"\0")
    with pytest.raises(MepgenError, match=r"`ncu` could not read .*broken.ncu-rep \(exit 1\): ==ERROR== Failed"):
        load_profile(rep)


def test_extract_ranks_from_an_nsys_report(heatcg_copy, tmp_path, bin_dir):
    fake_tool(bin_dir, "nsys", NSYS_OUT)
    rep = tmp_path / "report.nsys-rep"
    rep.write_bytes(b"\0binary")
    r = CliRunner().invoke(main, ["extract", "-C", str(heatcg_copy), "--profile", str(rep), "--json", "-j", "1"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["ranking_basis"] == f"profile (nsys): {rep}"
    inv = json.loads((heatcg_copy / ".mepgen" / "inventory.json").read_text())
    assert inv["kernels"][0]["qualified_name"] == "heat::diffuse_step"


def test_ready_ranks_from_a_report_too(heatcg_copy, tmp_path, bin_dir):
    fake_tool(bin_dir, "nsys", NSYS_OUT)
    rep = tmp_path / "report.nsys-rep"
    rep.write_bytes(b"\0binary")
    r = CliRunner().invoke(main, ["ready", "-C", str(heatcg_copy), "--profile", str(rep), "--json"])
    assert r.exit_code == 3, r.output                  # the CG kernels still need a person
    inv = json.loads((heatcg_copy / ".mepgen" / "inventory.json").read_text())
    assert inv["ranking_basis"] == f"profile (nsys): {rep}"
