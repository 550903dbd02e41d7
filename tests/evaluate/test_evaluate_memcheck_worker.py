"""memcheck on the timed cubin (evaluate/memcheck_worker.py): the pycuda worker itself runs under the sanitizer,
with exact allocations, confined as any worker. On CPU the real worker runs with the stand-in pycuda
(tests/fake_pycuda) under a stand-in sanitizer: a script that starts its target, passes its output through,
reads the worker's `MEPGEN_BUFFER` lines and, where it is told to, reports a read past the end of a buffer as
compute-sanitizer does (then exits with the error status). The real sanitizer on a GPU:
tests/test_memory_errors_gpu.py."""
from __future__ import annotations

import json
import shutil
import stat
import sys
from pathlib import Path

import pytest

from evaluate_fakes import FIXTURES, axpy_desc, axpy_workspace
from mepgen.evaluate import l2_flush, memcheck, memcheck_worker, sandbox
from mepgen.evaluate.backend import Built, InputSet
from mepgen.evaluate.pycuda_backend import PycudaBackend
from mepgen.evaluate.results import CompileInfo
from mepgen.evaluate.store import Store
from mepgen.spec import load_spec

HERE = Path(__file__).resolve().parent.parent

_SANITIZER = '''#!{python}
import re, subprocess, sys
OOB = {oob!r}
args = sys.argv[1:]
valued = {{"--tool", "--padding", "--error-exitcode", "--print-limit", "--show-backtrace"}}
i = 0
while args[i].startswith("--"):
    i += 2 if args[i] in valued else 1
status = int(args[args.index("--error-exitcode") + 1])
print("FAKE-SANITIZER " + " ".join(args), flush=True)
child = subprocess.Popen(args[i:], stdout=subprocess.PIPE, close_fds=False, text=True)
buffers = {{}}
for line in child.stdout:
    sys.stdout.write(line)
    sys.stdout.flush()
    m = re.match(r"MEPGEN_BUFFER (\\S+) (0x[0-9a-f]+) (\\d+)", line)
    if m:
        buffers[m.group(1)] = (int(m.group(2), 16), int(m.group(3)))
code = child.wait()
if OOB in buffers:
    at, size = buffers[OOB]
    print("========= Invalid __global__ read of size 4 bytes")
    print("=========     at axpy(int, float, const float *, float *)+0x70")
    print(f"=========     Address {{at + size + 16:#x}} is out of bounds")
    print(f"=========     and is 16 bytes after the nearest allocation at {{at:#x}} of size {{size}} bytes")
    print("========= ERROR SUMMARY: 1 error")
    sys.exit(status)
print("========= ERROR SUMMARY: 0 errors")
sys.exit(code)
'''


def fake_sanitizer(tmp_path: Path, oob: str = "") -> Path:
    """A stand-in compute-sanitizer (in a folder of its own, as the toolkit's is); reports a read past `oob`."""
    tool = tmp_path / f"sanitizer-{oob or 'clean'}" / "compute-sanitizer"
    tool.parent.mkdir(parents=True)
    tool.write_text(_SANITIZER.format(python=sys.executable, oob=oob))
    tool.chmod(tool.stat().st_mode | stat.S_IEXEC | stat.S_IXGRP | stat.S_IXOTH)
    return tool


@pytest.fixture
def like(tmp_path, monkeypatch):
    """The evaluator's pycuda backend on the axpy MEP (workspace, input set), the stand-in pycuda on its path."""
    site = tmp_path / "site"
    shutil.copytree(HERE / "fake_pycuda", site)
    monkeypatch.syspath_prepend(str(site))
    for name in [m for m in sys.modules if m == "pycuda" or m.startswith("pycuda.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setattr(l2_flush, "build_cubin", lambda arch, folder, timeout: FIXTURES / "axpy" / "kernel.cu")
    mep = axpy_workspace(tmp_path)
    spec = load_spec(mep / "mep.yaml")
    store = Store(mep, spec)
    be = PycudaBackend(spec, mep, store.build_dir, run_timeout=30.0, start_timeout=60.0)
    kernel = mep / "kernel.cu"
    yield be, Built(kernel, kernel, "k", CompileInfo(), "", axpy_desc()), InputSet(0, store.input_set(0))
    be.close()


LEVELS = ["off", *(["landlock"] if sandbox.landlock_works()[0] else [])]


@pytest.mark.parametrize("level", LEVELS)
def test_a_clean_cubin_is_clean_and_a_read_past_a_buffer_is_told_by_its_name(like, tmp_path, level):
    """The worker starts under the sanitizer (its command line: memcheck, the padding, the error status, then the
    worker), allocates each buffer exactly and tells its address; a clean run is a clean verdict, the sanitizer's
    report of a read past x's end rejects, naming x, its side and distance."""
    be, built, inputs = like
    be.sandbox_level = level
    clean_tool = fake_sanitizer(tmp_path)
    worker = memcheck_worker.SanitizedWorker(be, clean_tool, 60.0)
    report, launched = worker.check(built, inputs)
    assert launched and report.clean is True, report.message
    assert worker.proc is None                           # the check ends its process
    told = memcheck.buffers_of(worker.output)
    sizes = {p.name: be.spec.count(p) * 4 for p in be.spec.params if p.is_buffer}
    sizes["y~input"] = sizes["y"]           # the input set's copy of the in/out y, which resets the kernel's y
    assert {n: size for n, (_, size) in told.items()} == sizes         # exact sizes, no guard zones
    lines = [ln.split()[1] for ln in worker.output.splitlines() if ln.startswith("MEPGEN_BUFFER ")]
    assert lines.index("y") < lines.index("y~input")                  # the kernel's own y (setup's) is told as y
    line = next(ln for ln in worker.output.splitlines() if ln.startswith("FAKE-SANITIZER ")).split()[1:]
    assert line[:2] == ["--tool", "memcheck"] and "--padding" in line and str(memcheck.ERROR_EXIT) in line
    assert "mepgen.evaluate.pycuda_worker" in line and memcheck_worker.EXACT_ENTRY in line

    for name in ("x", "y"):                 # an input, and the output the kernel writes (not the set's copy)
        oob_tool = fake_sanitizer(tmp_path, name)
        report, launched = memcheck_worker.SanitizedWorker(be, oob_tool, 60.0).check(built, inputs)
        assert launched and report.clean is False
        e = report.errors[0]
        assert (e["buffer"], e["side"], e["distance"]) == (name, "after", 16)
        assert f"16 byte(s) past the end of {name}" in report.message


def test_a_worker_started_ahead_serves_the_check(like, tmp_path):
    """warm_up starts the process and loads the input set while the search runs; the check then loads the
    module and launches once in that same process."""
    be, built, inputs = like
    be.sandbox_level = "off"
    tool = fake_sanitizer(tmp_path)
    worker = memcheck_worker.SanitizedWorker(be, tool, 60.0)
    worker.warm_up(inputs)
    proc = worker.proc
    assert proc is not None and proc.poll() is None and worker.sets_loaded == {0} and worker.warm_s > 0
    report, launched = memcheck_worker.check(be, built, inputs, 60.0, warm=worker)
    assert launched and report.clean is True and proc.poll() is not None
    assert json.dumps(report.to_dict())


def test_a_worker_that_cannot_start_under_the_sanitizer_is_no_launch(like, tmp_path):
    """A sanitizer that fails before its target starts: no verdict, and the caller learns that nothing was
    launched (optimize then checks the native harness)."""
    be, built, inputs = like
    be.sandbox_level = "off"
    tool = tmp_path / "broken" / "compute-sanitizer"
    tool.parent.mkdir()
    tool.write_text("#!/bin/sh\necho 'sanitizer: cannot start' >&2\nexit 1\n")
    tool.chmod(0o755)
    report, launched = memcheck_worker.SanitizedWorker(be, tool, 20.0).check(built, inputs)
    assert not launched and report.clean is None and "memcheck run failed" in report.message


def test_a_worker_that_cannot_import_its_packages_is_no_launch_not_an_error(like, tmp_path):
    """The worker says it cannot start (no pycuda where it runs): the check says no launch, and optimize falls back
    to the native harness instead of failing after its search."""
    be, built, inputs = like
    be.sandbox_level = "off"
    worker = memcheck_worker.SanitizedWorker(be, fake_sanitizer(tmp_path), 20.0)
    worker.entry = "evaluate_fakes:unstartable_worker_main"
    report, launched = worker.check(built, inputs)
    assert not launched and report.clean is None and "cannot start the pycuda worker" in report.message
