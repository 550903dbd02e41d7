"""Progress on long work shows on stderr when it is a terminal (forced here with MEPGEN_PROGRESS=1), and never under
--json or when stderr is not a terminal: --json output stays one clean JSON document."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mepgen import progress

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    dst = tmp_path_factory.mktemp("progress") / "heatcg"
    shutil.copytree(ROOT / "examples" / "heatcg", dst, ignore=shutil.ignore_patterns(".mepgen", "build"))
    return dst


def mepgen(*args, progress_env: str | None, cwd: Path):
    env = {k: v for k, v in __import__("os").environ.items() if k != "MEPGEN_PROGRESS"}
    if progress_env is not None:
        env["MEPGEN_PROGRESS"] = progress_env
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run([sys.executable, "-m", "mepgen.cli", *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=300)


def test_json_output_stays_clean_with_progress_forced_on(app):
    r = mepgen("extract", "-C", str(app), "--json", "--no-cache", progress_env="1", cwd=app.parent)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["kernels"] == 9
    assert "\x1b[" not in r.stdout + r.stderr and "parsing" not in r.stderr
    r = mepgen("--json", "mep", "--all", "-C", str(app), progress_env="1", cwd=app.parent)
    assert r.returncode == 3, r.stderr
    assert len(json.loads(r.stdout)) == 9 and "completing" not in r.stderr and "\x1b[" not in r.stderr


def test_a_terminal_sees_the_bars(app):
    r = mepgen("extract", "-C", str(app), "--no-cache", progress_env="1", cwd=app.parent)
    assert r.returncode == 0, r.stderr
    assert "parsing" in r.stderr and "\x1b[" in r.stderr          # drawn by rich, on stderr only
    assert "\x1b[" not in r.stdout
    r = mepgen("mep", "--all", "-C", str(app), progress_env="1", cwd=app.parent)
    assert "completing" in r.stderr


def test_not_a_terminal_no_bars(app):
    r = mepgen("extract", "-C", str(app), "--no-cache", progress_env=None, cwd=app.parent)
    assert r.returncode == 0 and "parsing" not in r.stderr and "\x1b[" not in r.stderr


def test_the_quiet_switch(monkeypatch):
    monkeypatch.setenv("MEPGEN_PROGRESS", "1")
    progress.set_quiet(True)
    try:
        assert not progress.enabled()
        with progress.progress("x", total=2) as bar:
            bar.advance()                 # a no-op task: nothing drawn, nothing raised
    finally:
        progress.set_quiet(False)
    assert progress.enabled()
    monkeypatch.setenv("MEPGEN_PROGRESS", "0")
    assert not progress.enabled()
