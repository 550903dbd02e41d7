"""The harness built for memcheck alone takes the host's -O1 (memcheck.HOST_OPT): nvcc's -O is the host
compiler's, so the device code it carries is the timed build's, byte for byte; and optimize's check at the end finds
the harness Prebuild built during the search in the build cache. Real nvcc, no GPU."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from evaluate_fakes import FIXTURES
from mepgen.evaluate.native import NativeBackend
from mepgen.evaluate.results import CompileFailed
from mepgen.harness import render_harness
from mepgen.optimize import winner_check
from mepgen.optimize.candidates import write_candidate
from mepgen.optimize.proposer import Attempt, Proposal
from mepgen.spec import load_spec

pytestmark = [pytest.mark.nvcc,
              pytest.mark.skipif(shutil.which("objcopy") is None, reason="needs objcopy (binutils)")]


def device_code(binary: Path, out: Path) -> bytes:
    """The executable's embedded fatbin (every cubin and PTX nvcc put in it)."""
    subprocess.run(["objcopy", "-O", "binary", "--only-section=.nv_fatbin", str(binary), str(out)], check=True)
    return out.read_bytes()


def test_the_memcheck_harness_carries_the_timed_device_code_and_is_built_once(tmp_path):
    mep = tmp_path / "cg.axpy"
    shutil.copytree(FIXTURES / "axpy", mep)
    spec = load_spec(mep / "mep.yaml")
    assert "-O3" in spec.build.nvcc_flags                 # the MEP's own host level: HOST_OPT redefines it
    (mep / "harness.cu").write_text(render_harness(spec))  # the whole harness, as memcheck runs it
    native = NativeBackend(spec, mep, tmp_path / "build")
    best = Attempt("c0001", Proposal(text=(mep / "kernel.cu").read_text(), change="same", source="library",
                                     nvcc_flags=["-use_fast_math"]), None)
    work = tmp_path / "memcheck"
    timed = native.compile(write_candidate(best.proposal, work), flags=("-use_fast_math",))  # as the native backend
    ev = SimpleNamespace(backend_name="pycuda", spec=spec)
    ahead = winner_check.build_attempt(ev, native, best, work)                         # Prebuild, during the search
    assert not isinstance(timed, CompileFailed) and not isinstance(ahead, CompileFailed)
    assert ahead.key != timed.key and not ahead.info.cached
    assert "redefinition for option 'optimize'" in ahead.log          # nvcc took the last -O: HOST_OPT
    assert "redefinition" not in timed.log
    fatbin = device_code(timed.artifact, tmp_path / "timed.fatbin")
    assert len(fatbin) > 1000 and fatbin == device_code(ahead.artifact, tmp_path / "ahead.fatbin")
    at_check = winner_check.build_attempt(ev, native, best, work)                      # check_winner at the end
    assert at_check.info.cached and at_check.artifact == ahead.artifact
