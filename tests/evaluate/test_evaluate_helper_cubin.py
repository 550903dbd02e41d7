"""mepgen's own kernels (L2 flush, output comparisons) are built once per machine, not once per MEP: the user's
cubin cache keyed by source, flags, arch and nvcc; the MEP's build folder where that cache cannot be written."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from mepgen.evaluate import helper_cubin


@pytest.fixture
def nvcc_runs(monkeypatch, tmp_path):
    """nvcc stood in: each run is recorded and writes its -o file."""
    runs = []

    def run(cmd, timeout=None):
        runs.append(cmd)
        Path(cmd[cmd.index("-o") + 1]).write_bytes(b"cubin of " + Path(cmd[cmd.index("-cubin") + 1]).read_bytes())
        return SimpleNamespace(returncode=0, timed_out=False, stdout="", stderr="")
    monkeypatch.setattr(helper_cubin.process, "run", run)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return runs


def test_two_meps_share_one_build_and_another_source_or_flag_builds_again(nvcc_runs, tmp_path):
    a = helper_cubin.cached_cubin("__global__ void k() {}", "flush", "the flush", "sm_90", tmp_path / "mep1")
    b = helper_cubin.cached_cubin("__global__ void k() {}", "flush", "the flush", "sm_90", tmp_path / "mep2")
    assert a == b and len(nvcc_runs) == 1 and a.parent == tmp_path / "cache" / "mepgen" / "cubins"
    assert a.read_bytes() == b"cubin of __global__ void k() {}"
    assert not list(a.parent.glob("*.cu")) and not list(a.parent.glob("*.tmp"))     # only the cubin stays
    helper_cubin.cached_cubin("__global__ void k2() {}", "flush", "the flush", "sm_90", tmp_path / "mep1")
    helper_cubin.cached_cubin("__global__ void k() {}", "flush", "the flush", "sm_90", tmp_path / "mep1",
                              ("-fmad=false",))
    helper_cubin.cached_cubin("__global__ void k() {}", "flush", "the flush", "sm_80", tmp_path / "mep1")
    assert len(nvcc_runs) == 4


def test_another_nvcc_builds_again(nvcc_runs, tmp_path, monkeypatch):
    helper_cubin.cached_cubin("__global__ void k() {}", "flush", "the flush", "sm_90", tmp_path / "mep")
    monkeypatch.setattr(helper_cubin, "_nvcc_identity", lambda nvcc: "another toolkit")
    helper_cubin.cached_cubin("__global__ void k() {}", "flush", "the flush", "sm_90", tmp_path / "mep")
    assert len(nvcc_runs) == 2


def test_a_cache_that_cannot_be_written_leaves_the_build_in_the_mep_s_folder(nvcc_runs, tmp_path, monkeypatch):
    monkeypatch.setattr(helper_cubin.os, "access", lambda path, mode: False)      # a read-only home
    out = helper_cubin.cached_cubin("__global__ void k() {}", "flush", "the flush", "sm_90", tmp_path / "mep")
    assert out.parent == tmp_path / "mep" and out.is_file() and len(nvcc_runs) == 1


def test_a_cache_folder_that_cannot_be_made_leaves_the_build_in_the_mep_s_folder(nvcc_runs, tmp_path, monkeypatch):
    (tmp_path / "file").write_text("not a folder")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "file"))          # mkdir under a file fails
    out = helper_cubin.cached_cubin("__global__ void k() {}", "flush", "the flush", "sm_90", tmp_path / "mep")
    assert out.parent == tmp_path / "mep" and out.is_file()
