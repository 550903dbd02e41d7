"""compute-sanitizer's memcheck on a winner (memcheck.py): its report is read into errors told with the buffer
they were meant for; the command runs the harness with --exact-alloc and the padding. CPU: sanitizer output as
text, and a stand-in sanitizer script for the run itself."""
from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from mepgen.evaluate import memcheck, sandbox
from mepgen.evaluate.backend import Built, InputSet
from mepgen.evaluate.results import CompileInfo

BUFFERS = "MEPGEN_BUFFER x 0x7f0000000000 4096\nMEPGEN_BUFFER y 0x7f0000200000 4096\n"
REPORT = """========= COMPUTE-SANITIZER
========= Invalid __global__ read of size 4 bytes
=========     at axpy(int, float, const float *, float *)+0x90 in /tmp/v/kernel.cu:9
=========     by thread (0,0,0) in block (4,0,0)
=========     Address 0x7f0000001400 is out of bounds
=========     and is 1,024 bytes after the nearest allocation at 0x7f0000000000 of size 4,096 bytes
=========     Saved host backtrace up to driver entry point at kernel launch time
=========         Host Frame: main [0x1234] in mep
=========
========= Invalid __global__ write of size 4 bytes
=========     at axpy(int, float, const float *, float *)+0xb0 in /tmp/v/kernel.cu:9
=========     by thread (1,0,0) in block (0,0,0)
=========     Address 0x7f00001ffffc is out of bounds
=========
========= Program hit cudaErrorLaunchFailure (error 719) due to "unspecified launch failure" on CUDA API call to cudaStreamSynchronize.
=========
========= ERROR SUMMARY: 3 errors
"""


def test_errors_are_told_with_their_buffer_side_and_distance():
    errors = memcheck.parse(REPORT, memcheck.buffers_of(BUFFERS))
    assert len(errors) == 2
    read, write = errors
    assert (read["buffer"], read["side"], read["distance"], read["address"]) == ("x", "after", 1024, 0x7f0000001400)
    assert read["what"] == "Invalid __global__ read of size 4 bytes" and read["at"].startswith("axpy(")
    # no `nearest allocation` line: placed by the address, 4 bytes before y's start
    assert (write["buffer"], write["side"], write["distance"]) == ("y", "before", 4)
    line = memcheck.describe(read)
    assert "read of size 4" in line and "1024 byte(s) past the end of x" in line and "0x7f0000001400" in line


def test_a_clean_report_has_no_errors_and_the_command_asks_for_exact_allocations():
    assert memcheck.parse("========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n", {}) == []
    cmd = memcheck.command(Path("/cs"), Path("/b/mep"), Path("/d"), Path("/o"))
    assert cmd[:3] == ["/cs", "--tool", "memcheck"] and cmd[-1] == "--exact-alloc"
    assert cmd[cmd.index("--padding") + 1] == str(memcheck.PADDING) and memcheck.PADDING % 256 == 0


class _Native:
    runtime_read: list = []

    def _env(self):
        return dict(os.environ)


def _fake_tool(tmp_path: Path, body: str) -> Path:
    tool = tmp_path / "bin" / "compute-sanitizer"
    tool.parent.mkdir()
    tool.write_text("#!/bin/sh\n" + body)
    tool.chmod(tool.stat().st_mode | stat.S_IEXEC)
    return tool


def test_a_run_with_errors_rejects_and_records_its_cost(tmp_path, monkeypatch):
    report = (BUFFERS + REPORT).replace("\n", "\\n").replace('"', '\\"')
    tool = _fake_tool(tmp_path, f'printf "{report}"\nexit {memcheck.ERROR_EXIT}\n')
    monkeypatch.setattr(memcheck, "executable", lambda: tool)
    built = Built(tmp_path / "k.cu", tmp_path / "mep", "k", CompileInfo(), "")
    r = memcheck.check(_Native(), built, InputSet(0, tmp_path), tmp_path / "out", "off", 30)
    assert r.clean is False and r.seconds > 0 and "past the end of x" in r.message and len(r.errors) == 2
    assert r.to_dict()["tool"] == str(tool)


def test_no_sanitizer_or_a_failing_run_is_no_verdict(tmp_path, monkeypatch):
    monkeypatch.setattr(memcheck, "executable", lambda: None)
    built = Built(tmp_path / "k.cu", tmp_path / "mep", "k", CompileInfo(), "")
    r = memcheck.check(_Native(), built, InputSet(0, tmp_path), tmp_path / "out", "off", 30)
    assert r.clean is None and "not found" in r.message
    tool = _fake_tool(tmp_path, 'echo "========= Error: Target application terminated before first instrumented API call"\nexit 1\n')
    monkeypatch.setattr(memcheck, "executable", lambda: tool)
    r = memcheck.check(_Native(), built, InputSet(0, tmp_path), tmp_path / "out", "off", 30)
    assert r.clean is None and "exit 1" in r.message
    (tmp_path / "c").mkdir()
    clean = _fake_tool(tmp_path / "c", "echo '========= ERROR SUMMARY: 0 errors'\n")
    monkeypatch.setattr(memcheck, "executable", lambda: clean)
    assert memcheck.check(_Native(), built, InputSet(0, tmp_path), tmp_path / "out", "off", 30).clean is True


def test_patch_skips_a_variant_optimize_found_clean_and_only_that_text(tmp_path, monkeypatch):
    best = tmp_path / "best" / "kernel.cu"
    best.parent.mkdir()
    best.write_text("__global__ void k() {}\n")
    memcheck.write_marker(best, memcheck.Report(True, 12.5).to_dict())
    assert memcheck.checked_clean(best)
    assert memcheck.check_variant(tmp_path, best).clean is True          # no sanitizer, no GPU needed
    best.write_text("__global__ void k() { /* edited */ }\n")
    assert not memcheck.checked_clean(best)
    monkeypatch.setattr(memcheck, "executable", lambda: None)
    r = memcheck.check_variant(tmp_path, best)
    assert r.clean is None and "not found" in r.message


def test_a_read_before_a_start_is_told_by_the_address_not_the_padding_owner():
    # 256 bytes before y: the sanitizer's nearest allocation is x, whose padding lies there
    text = ("========= Invalid __global__ read of size 4 bytes\n"
            "=========     at axpy+0x10\n"
            "=========     Address 0x7f00001fff00 is out of bounds\n"
            "=========     and is 2,093,824 bytes after the nearest allocation at 0x7f0000000000 of size 4,096 bytes\n")
    e = memcheck.parse(text, memcheck.buffers_of(BUFFERS))[0]
    assert (e["buffer"], e["side"], e["distance"]) == ("y", "before", 256)


def test_an_old_harness_without_exact_allocations_is_no_verdict(tmp_path, monkeypatch):
    monkeypatch.setattr(memcheck, "executable", lambda: tmp_path / "cs")
    old = _Native()
    old.harness_text = "// a harness rendered before guards.h"
    built = Built(tmp_path / "k.cu", tmp_path / "mep", "k", CompileInfo(), "")
    r = memcheck.check(old, built, InputSet(0, tmp_path), tmp_path / "out", "off", 30)
    assert r.clean is None and "--refresh" in r.message


def test_the_program_runs_not_the_toolkit_s_wrapper_script(tmp_path, monkeypatch):
    """The toolkit's bin/compute-sanitizer is a shell script around compute-sanitizer/compute-sanitizer; under
    landlock the shell may not run, so the program itself is what memcheck starts."""
    kit = tmp_path / "cuda"
    (kit / "bin").mkdir(parents=True)
    (kit / "compute-sanitizer").mkdir()
    wrapper = kit / "bin" / "compute-sanitizer"
    wrapper.write_text('#!/bin/sh\nexec "$(dirname "$0")/../compute-sanitizer/compute-sanitizer" "$@"\n')
    program = kit / "compute-sanitizer" / "compute-sanitizer"
    program.write_bytes(b"\x7fELF" + bytes(60))
    for p in (wrapper, program):
        p.chmod(0o755)
    monkeypatch.setenv("PATH", f"{kit / 'bin'}:{os.environ['PATH']}")
    monkeypatch.setattr(memcheck.confined, "toolkit_root", lambda exe: None)    # not the toolkit of a GPU host
    assert memcheck.executable() == program
    program.unlink()                    # a toolkit without the program: the script is all there is
    assert memcheck.executable() == wrapper


_SANITIZER = r"""
#include <stdio.h>
#include <unistd.h>
#include <sys/wait.h>
int main(int argc, char **argv) {          /* a stand-in: reads /proc as compute-sanitizer does, runs its target */
    int i = 1;
    while (i < argc && argv[i][0] == '-') i += 2;
    printf("sanitizer proc %s\n", fopen("/proc/self/status", "r") ? "yes" : "no");
    pid_t p = fork();
    if (p == 0) { execv(argv[i], argv + i); _exit(127); }
    int st = 0;
    waitpid(p, &st, 0);
    return WEXITSTATUS(st);
}
"""
_TARGET = r"""
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>
int main(void) {                            /* the harness: what it may and may not do under the sanitizer */
    char p[512];
    snprintf(p, sizeof p, "%s/x", getenv("TMPDIR"));
    printf("own maps %s\n", fopen("/proc/self/maps", "r") ? "yes" : "no");
    printf("other process %s\n", fopen("/proc/1/environ", "r") ? "yes" : "no");
    printf("scratch %s\n", fopen(p, "w") ? "yes" : "no");
    printf("inet %s\n", socket(AF_INET, SOCK_DGRAM, 0) >= 0 ? "yes" : "no");
    snprintf(p, sizeof p, "/proc/self/task/%d/comm", (int)getpid());    /* as the CUDA driver names its threads */
    FILE *comm = fopen(p, "w");
    printf("thread name %s\n", comm && fputs("mep", comm) >= 0 && fclose(comm) == 0 ? "yes" : "no");
    return 0;
}
"""


@pytest.mark.skipif(shutil.which("gcc") is None or sandbox.landlock_works()[0] is False,
                    reason="needs gcc and Landlock")
def test_under_landlock_the_sanitizer_s_target_is_confined_on_its_own(tmp_path):
    """compute-sanitizer reads its target's /proc files, which the launcher gives a process only for itself: the
    sanitizer gets /proc, and its target is the launcher, which confines the harness as any run (its own /proc,
    its scratch, the seccomp filter passed through as a descriptor)."""
    import types
    from mepgen.evaluate import process
    for name, text in (("san", _SANITIZER), ("target", _TARGET)):
        (tmp_path / f"{name}.c").write_text(text)
        subprocess.run(["gcc", "-O1", "-o", str(tmp_path / name), str(tmp_path / f"{name}.c")], check=True)
    out = tmp_path / "out"
    out.mkdir()
    native = types.SimpleNamespace(runtime_read=[], runtime_programs=[])
    args = [str(tmp_path / "san"), "--tool", "memcheck", str(tmp_path / "target"), "--data", str(tmp_path)]
    argv, c = memcheck.confine_run("landlock", args, 3, tmp_path, native, out)
    done = process.run(argv, 60, cwd=out, confine=c)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:6] == ["own maps yes", "other process no", "scratch yes", "inet no",
                                           "thread name yes", "sanitizer proc yes"], done.stdout


def test_patch_builds_the_variant_and_the_original_for_memcheck_with_the_host_s_quicker_level(tmp_path, monkeypatch):
    """check_variant builds harnesses only to run them under memcheck: each takes HOST_OPT after its own flags
    (nvcc's -O is the host's: the device code is the timed build's), the original's comparison build too."""
    from evaluate_fakes import FIXTURES
    mep = tmp_path / "cg.axpy"
    shutil.copytree(FIXTURES / "axpy", mep)
    variant = tmp_path / "best" / "kernel.cu"
    variant.parent.mkdir()
    variant.write_text("__global__ void k() { /* variant */ }\n")
    asked = []

    class Recording:
        def __init__(self, spec, mep_dir, build_dir, device):
            self.device = device

        def compile(self, kernel, launch=None, flags=()):
            asked.append((Path(kernel).name, Path(kernel).parent.name, tuple(flags)))
            return Built(kernel, tmp_path / "mep", "k", CompileInfo(), "")
    monkeypatch.setattr(memcheck, "executable", lambda: tmp_path / "compute-sanitizer")
    monkeypatch.setattr(memcheck, "list_gpus", lambda: ([0], ""))
    monkeypatch.setattr(memcheck, "NativeBackend", Recording)
    monkeypatch.setattr(memcheck.Store, "input_set", lambda self, k: tmp_path / "set0")
    verdicts = iter([memcheck.Report(False, 1.0, [{}], "memcheck: read past the end of x"), memcheck.Report(True, 1.0)])
    monkeypatch.setattr(memcheck, "check", lambda *a, **k: next(verdicts))
    r = memcheck.check_variant(mep, variant, flags=["-use_fast_math"], level_mode="off")
    assert r.clean is False and "past the end of x" in r.message
    assert asked == [("kernel.cu", "best", ("-use_fast_math", memcheck.HOST_OPT)),
                     ("kernel.cu", "cg.axpy", (memcheck.HOST_OPT,))]
