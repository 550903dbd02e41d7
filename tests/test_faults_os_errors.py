"""Ordinary file-system problems and invalid config values are one-line errors naming the path (or key) and
what to do, exit 2: never "internal error" (exit 70) and never a traceback (issue 40)."""
from __future__ import annotations

import errno
import os
import shutil
import subprocess

import pytest

from mepgen.config import load_config
from mepgen.errors import MepgenError
from fault_tools import cli, heatcg_template, read_only  # noqa: F401  (fixture)


def one_line_error(rc, out, *words):
    assert rc == 2, out
    lines = [ln for ln in out.splitlines() if ln.startswith("mepgen:")]
    assert len(lines) == 1 and "internal error" not in out and "Traceback" not in out, out
    for w in words:
        assert w in lines[0], out


def test_workspace_folders_that_are_files(heatcg_copy):
    app = heatcg_copy
    (app / ".mepgen").write_text("")
    rc, out = cli(["extract", str(app)])
    one_line_error(rc, out, str(app / ".mepgen"), "move it away")
    (app / ".mepgen").unlink()
    (app / ".mepgen").mkdir()
    (app / ".mepgen/cache").write_text("")
    rc, out = cli(["extract", str(app)])
    one_line_error(rc, out, str(app / ".mepgen/cache"), "move it away")
    (app / ".mepgen/cache").unlink()
    assert cli(["extract", str(app)])[0] == 0
    (app / ".mepgen/meps").write_text("")
    rc, out = cli(["mep", "cg::xpay", "-C", str(app)])
    one_line_error(rc, out, str(app / ".mepgen/meps"), "move it away")


def test_an_inventory_that_is_a_folder(heatcg_copy):
    app = heatcg_copy
    (app / ".mepgen/inventory.json").mkdir(parents=True)
    rc, out = cli(["list", "-C", str(app)])
    one_line_error(rc, out, "inventory.json is a folder", "move it away")
    rc, out = cli(["extract", str(app)])
    one_line_error(rc, out, "inventory.json", "move it away")


def test_a_read_only_application_folder(heatcg_copy):
    app = heatcg_copy
    with read_only(app):
        rc, out = cli(["extract", str(app)])
    one_line_error(rc, out, str(app))
    assert "permission denied" in out or "read-only file system" in out, out
    assert not (app / ".mepgen").exists()


def test_a_full_disk_while_writing_the_inventory(heatcg_copy, monkeypatch):
    import mepgen.workspace as workspace
    from mepgen.cli import main

    real = workspace.os.replace

    def full(src, dst):
        if str(dst).endswith("inventory.json"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(dst))
        return real(src, dst)

    monkeypatch.setattr(workspace.os, "replace", full)
    with pytest.raises(SystemExit) as e:
        main.main(["extract", str(heatcg_copy)])
    assert e.value.code == 2
    assert not (heatcg_copy / ".mepgen/inventory.json").exists()
    assert not [p for p in (heatcg_copy / ".mepgen").iterdir() if p.name.endswith(".tmp")]


@pytest.fixture
def small_disk(tmp_path):
    """A 160 KiB tmpfs (room for the sources, not for the workspace), where this machine lets us mount one."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    if os.getuid() != 0 or not shutil.which("mount") or subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=160k", "tmpfs", str(mnt)], capture_output=True).returncode:
        pytest.skip("cannot mount a small tmpfs here (needs root); the monkeypatched full disk covers it")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def test_a_really_full_disk(small_disk):
    from conftest import copy_example

    app = copy_example("heatcg", small_disk)
    before = {p: p.read_bytes() for p in app.rglob("*") if p.is_file()}
    rc, out = cli(["extract", str(app)])
    one_line_error(rc, out, "no space left", "free some space")
    assert {p: p.read_bytes() for p in before} == before


@pytest.mark.parametrize("text, key", [
    ("llm:\n  max_retries: -5\n", "llm.max_retries: must be between 0 and 100, not -5"),
    ("evaluate:\n  warmup: -1\n", "evaluate.warmup: must be at least 0, not -1"),
    ("evaluate:\n  min_gain: -0.5\n", "evaluate.min_gain: must be between 0.0 and 1.0, not -0.5"),
    ("evaluate:\n  min_gain: 3\n", "evaluate.min_gain: must be between 0.0 and 1.0, not 3.0"),
    ("llm:\n  temperature: 9\n", "llm.temperature: must be between 0.0 and 2.0"),
    ("evaluate:\n  reps: 0\n", "evaluate.reps: must be positive, not 0"),
    ("evaluate:\n  timeout_s: .nan\n", "evaluate.timeout_s: must be positive"),
])
def test_config_values_are_range_checked_at_load(tmp_path, text, key):
    path = tmp_path / "config.yaml"
    path.write_text(text)
    with pytest.raises(MepgenError) as e:
        load_config(files=[path])
    assert key in str(e.value) and f"{path}:2" in str(e.value)


def test_a_negative_retry_count_is_an_error_at_the_command_not_later(heatcg_copy, tmp_path):
    from fault_tools import variants

    app = heatcg_copy
    assert cli(["extract", str(app)])[0] == 0
    original = (app / "src/cg.cu").read_bytes()
    (app / ".mepgen/config.yaml").write_text("llm:\n  max_retries: -5\n")
    v = variants(tmp_path / "v")
    rc, out = cli(["patch", "cg::axpy", "--from", str(v["axpy"]), "--apply", "-C", str(app)])
    one_line_error(rc, out, "max_retries", "config.yaml:2")
    assert (app / "src/cg.cu").read_bytes() == original


def test_a_full_disk_during_mep_all_is_no_internal_error(heatcg_template, tmp_path, monkeypatch):
    import mepgen.mep.writer as writer
    from mepgen.cli import main

    app = shutil.copytree(heatcg_template, tmp_path / "app")

    def full(*a, **k):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(app / ".mepgen/meps"))

    monkeypatch.setattr(writer.tempfile, "mkdtemp", full)
    with pytest.raises(SystemExit) as e:
        main.main(["mep", "--all", "-C", str(app)])
    assert e.value.code not in (0, 70)
    assert not list((app / ".mepgen/meps").glob("*/mep.yaml")) if (app / ".mepgen/meps").is_dir() else True


def test_a_full_disk_while_converting_one_record_loses_that_record_alone(tmp_path, monkeypatch):
    """numpy reports a short write as OSError("Not enough free space ...") with no errno and no path: that kernel's
    outcome is `failed` with the folder it was written to, its half-written stage is gone, and the next record is
    still converted (capture/command.py, _one_record)."""
    from types import SimpleNamespace
    from mepgen.capture import command
    from mepgen.workspace import Workspace

    ws = Workspace(tmp_path)
    calls = []

    def convert(raw, plan, dest, **kw):
        calls.append(dest)
        stage = dest.parent / f".{dest.name}.tmp"
        (stage / "before").mkdir(parents=True)
        if len(calls) == 1:
            raise OSError("Not enough free space to write 1073741824 bytes after offset 128")
        return {"kernel": "b", "launched_as": "b()", "launch_index": 0, "grid": [1, 1, 1], "block": [1, 1, 1],
                "shared_mem": 0, "bytes_captured": 4, "capture_ms": 1.0, "params": [], "constants": []}

    monkeypatch.setattr(command, "convert", convert)
    monkeypatch.setattr(command, "outcome_kind", lambda run, t: "captured")
    monkeypatch.setattr(command, "typedef_map", lambda root, k: {})
    run = SimpleNamespace(target=lambda t: [], statuses=[])
    outs = [command._one_record(ws, {}, tmp_path, run, t, SimpleNamespace(choice=SimpleNamespace(kernel={
        "qualified_name": name, "id": name})), {}, 1 << 20, False) for t, name in enumerate(("a", "b"))]
    assert outs[0]["outcome"] == "failed"
    assert "Not enough free space to write 1073741824 bytes" in outs[0]["reason"]
    assert str(ws.mep_dir("a") / "data" / "captured") in outs[0]["reason"] and "--max-bytes" in outs[0]["reason"]
    assert not (ws.mep_dir("a") / "data" / ".captured.tmp").exists()
    assert outs[1]["outcome"] == "captured"


def test_an_os_error_without_a_path_names_no_placeholder():
    from mepgen.errors import os_error_message
    assert os_error_message(OSError("Not enough free space to write 8 bytes")) == \
        "Not enough free space to write 8 bytes"
    assert os_error_message(OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "/x/y.npy")).startswith("/x/y.npy: no space")
