"""Shared fixtures. Markers: `gpu` tests need an NVIDIA GPU, `nvcc` tests need nvcc; both skip with a reason."""
from __future__ import annotations

import functools
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# the tests stand in for the GPU driver's answers: none is remembered between runs (evaluate/probe_memo.py), in
# this process or in the mepgen commands the tests start
os.environ["MEPGEN_PROBE_MEMO"] = "0"
EXAMPLES = ROOT / "examples"


@functools.lru_cache(maxsize=1)
def have_gpu() -> bool:
    exe = shutil.which("nvidia-smi")
    if not exe:
        return False
    try:
        return subprocess.run([exe, "-L"], capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def pytest_collection_modifyitems(config, items):
    no_gpu = pytest.mark.skip(reason="needs an NVIDIA GPU (nvidia-smi -L failed or is missing)")
    no_nvcc = pytest.mark.skip(reason="needs nvcc on PATH")
    one_gpu_worker = pytest.mark.xdist_group("gpu")    # under `-n N --dist loadgroup`: GPU tests one at a time,
    for item in items:                                   # so no timing verdict shares the card with another test
        if "gpu" in item.keywords:
            item.add_marker(one_gpu_worker)
        if "gpu" in item.keywords and not have_gpu():
            item.add_marker(no_gpu)
        if "nvcc" in item.keywords and shutil.which("nvcc") is None:
            item.add_marker(no_nvcc)


def copy_example(name: str, dest: Path) -> Path:
    """A fresh copy of examples/NAME without build outputs or a workspace."""
    target = dest / name
    shutil.copytree(EXAMPLES / name, target,
                    ignore=shutil.ignore_patterns(".mepgen", "build", "build-cmake", "compile_commands.json"))
    return target


@pytest.fixture(scope="session")
def heatcg_extracted(tmp_path_factory) -> tuple[Path, dict]:
    """examples/heatcg copied once per session and extracted (scan mode, static ranking)."""
    from mepgen.extract import ExtractOptions, extract

    app = copy_example("heatcg", tmp_path_factory.mktemp("heatcg"))
    inv = extract(app, ExtractOptions(jobs=2))
    return app, inv


@pytest.fixture
def heatcg_copy(tmp_path) -> Path:
    return copy_example("heatcg", tmp_path)


@pytest.fixture(scope="session")
def heatcg_meps(tmp_path_factory):
    """examples/heatcg copied, extracted and cut into MEPs (`mepgen mep --all`), once per session.
    Returns (app folder, click result of the mep command)."""
    from click.testing import CliRunner

    from mepgen.cli import main
    from mepgen.extract import ExtractOptions, extract

    app = copy_example("heatcg", tmp_path_factory.mktemp("mep"))
    extract(app, ExtractOptions(jobs=2))
    result = CliRunner().invoke(main, ["mep", "--all", "-C", str(app)])
    return app, result


@pytest.fixture(scope="session")
def library_meps(tmp_path_factory):
    """MEPs of heatcg (sizes set) and examples/kernels, built once per session for the library's tests (which read
    them and write only under their own tmp_path). By id."""
    from library_fixtures import build_meps

    return build_meps(tmp_path_factory.mktemp("library-apps"))


@pytest.fixture(scope="session")
def tiling_meps(tmp_path_factory):
    """MEPs of every dense kernel and heatcg's heat::diffuse_step, built once per session (read-only, as above)."""
    from library_fixtures import build_tiling_meps

    return build_tiling_meps(tmp_path_factory.mktemp("tiling-apps"))


@pytest.fixture(scope="session")
def capture_injector(tmp_path_factory):
    """The capture injector built once per session (a build takes tens of seconds), and the cache folder
    (XDG_CACHE_HOME) it was built into: point XDG_CACHE_HOME there and `mepgen capture` finds it built."""
    from mepgen.capture.build import build_injector

    xdg = tmp_path_factory.mktemp("xdg")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_CACHE_HOME", str(xdg))
        return build_injector(), xdg


def run_mepgen(*args, cwd=None, timeout=900) -> subprocess.CompletedProcess:
    """`python -m mepgen.cli ARGS` as a user runs it (this checkout's mepgen), stdout and stderr apart: what a
    command prints for scripts (--json) must be alone on stdout."""
    import os
    import sys
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, "-m", "mepgen.cli", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture(autouse=True)
def _no_llm_from_the_environment(monkeypatch):
    """The LLM settings read the environment first (OPENAI_BASE_URL, ...): a developer's or CI's own must not turn
    the LLM proposer on in a test, nor send a test's request anywhere off this machine."""
    for name in ("OPENAI_BASE_URL", "OPENAI_MODEL", "MEPGEN_LLM_MODEL"):
        monkeypatch.delenv(name, raising=False)
