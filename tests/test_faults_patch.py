"""Faults during `mepgen patch` (issue 40): a bad config, a second writer, a symlinked or 0750 source, a failed
write and a kill at every step leave the source original or fully patched, and the record says which."""
from __future__ import annotations

import errno
import json
import os
import threading
import time

import pytest

from mepgen.workspace import Workspace
from fault_tools import app, heatcg_template  # noqa: F401  (fixtures)
from fault_tools import KILLED, cli, read_only, variants



def manifests(app):
    return sorted(p.parent.name for p in (app / ".mepgen/patches").glob("*/manifest.json"))


def test_an_invalid_config_changes_nothing(app, tmp_path):
    v = variants(tmp_path / "v")
    original = (app / "src/cg.cu").read_bytes()
    (app / ".mepgen/config.yaml").write_text("llm:\n  max_retries: many\n")
    rc, out = cli(["patch", "cg::axpy", "--from", str(v["axpy"]), "--apply", "-C", str(app)])
    assert rc == 2 and "max_retries" in out, out
    assert (app / "src/cg.cu").read_bytes() == original     # was: patched, never validated
    assert manifests(app) == []


def test_a_second_writer_waits_for_the_lock(app, tmp_path):
    v = variants(tmp_path / "v")
    ws = Workspace(app)
    with ws.lock("test"):
        rc, out = cli(["patch", "cg::axpy", "--from", str(v["axpy"]), "--apply", "--no-validate", "-C", str(app)],
                      env={"MEPGEN_LOCK_TIMEOUT": "0.3"})
    assert rc == 2 and "another mepgen command (pid" in out and "mepgen test" in out, out
    assert manifests(app) == []


def test_two_patches_forced_to_overlap_both_land(app, tmp_path, monkeypatch):
    """The first patch is held between reading the file and writing it while the second one starts: the
    second waits for the lock, then patches the file that holds the first. Both revert."""
    import mepgen.patch.state as state
    from mepgen.cli import main

    v = variants(tmp_path / "v")
    original = (app / "src/cg.cu").read_bytes()
    inside, release = threading.Event(), threading.Event()
    real = state.write_into
    first = []

    def slow_write(path, data):
        if not first:
            first.append(path)
            inside.set()
            release.wait(10)
        real(path, data)

    monkeypatch.setattr(state, "write_into", slow_write)
    codes = {}

    def run(name, kernel):
        try:
            main.main(["patch", kernel, "--from", str(v[name]), "--apply", "--no-validate", "-C", str(app)],
                      standalone_mode=False)
            codes[name] = 0
        except Exception as e:  # noqa: BLE001
            codes[name] = repr(e)

    a = threading.Thread(target=run, args=("axpy", "cg::axpy"))
    a.start()
    assert inside.wait(30)
    b = threading.Thread(target=run, args=("xpay", "cg::xpay"))
    b.start()
    time.sleep(0.5)
    assert b.is_alive() and "xpay" not in codes         # waiting for the lock, not racing
    release.set()
    a.join(30)
    b.join(60)
    assert codes == {"axpy": 0, "xpay": 0}
    assert (app / "src/cg.cu").read_text().count("// the variant") == 2
    assert manifests(app) == ["cg.axpy", "cg.xpay"]
    for k in ("cg::axpy", "cg::xpay"):
        rc, out = cli(["patch", k, "--revert", "-C", str(app)])
        assert rc == 0, out
    assert (app / "src/cg.cu").read_bytes() == original


def test_a_symlinked_source_is_patched_in_its_target_with_its_mode(app, tmp_path):
    v = variants(tmp_path / "v")
    shared = tmp_path / "shared" / "cg.cu"
    shared.parent.mkdir()
    os.replace(app / "src/cg.cu", shared)
    os.symlink(shared, app / "src/cg.cu")
    os.chmod(shared, 0o750)
    original = shared.read_bytes()
    rc, out = cli(["patch", "cg::axpy", "--from", str(v["axpy"]), "--apply", "--no-validate", "-C", str(app)])
    assert rc == 0, out
    assert (app / "src/cg.cu").is_symlink() and "// the variant" in shared.read_text()
    assert os.stat(shared).st_mode & 0o7777 == 0o750
    rc, out = cli(["patch", "cg::axpy", "--revert", "-C", str(app)])
    assert rc == 0, out
    assert (app / "src/cg.cu").is_symlink() and shared.read_bytes() == original
    assert os.stat(shared).st_mode & 0o7777 == 0o750


def test_a_full_disk_leaves_the_source_original_and_no_record(app, tmp_path, monkeypatch):
    import mepgen.workspace as workspace
    from mepgen.cli import main

    v = variants(tmp_path / "v")
    original = (app / "src/cg.cu").read_bytes()
    real_fsync = os.fsync

    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(workspace.os, "fsync", full)
    with pytest.raises(SystemExit) as e:
        main.main(["patch", "cg::axpy", "--from", str(v["axpy"]), "--apply", "--no-validate", "-C", str(app)])
    assert e.value.code == 2
    monkeypatch.setattr(workspace.os, "fsync", real_fsync)
    assert (app / "src/cg.cu").read_bytes() == original
    assert manifests(app) == [] and not list((app / ".mepgen/patches").glob("*/pending.json"))
    assert not [p for p in (app / "src").iterdir() if p.name.startswith(".")]   # no temporary file left


def test_a_read_only_source_folder_says_so_and_changes_nothing(app, tmp_path):
    v = variants(tmp_path / "v")
    original = (app / "src/cg.cu").read_bytes()
    with read_only(app / "src"):
        rc, out = cli(["patch", "cg::axpy", "--from", str(v["axpy"]), "--apply", "--no-validate", "-C", str(app)])
    assert rc == 2, out
    assert "cannot write src/cg.cu" in out and "unchanged" in out and "Traceback" not in out
    assert (app / "src/cg.cu").read_bytes() == original
    assert manifests(app) == []


@pytest.mark.parametrize("step", ["patch-after-backup", "patch-after-journal", "patch-after-source"])
def test_a_kill_at_each_step_of_apply_leaves_a_whole_state(app, tmp_path, step):
    v = variants(tmp_path / "v")
    original = (app / "src/cg.cu").read_bytes()
    args = ["patch", "cg::axpy", "--from", str(v["axpy"]), "--apply", "--no-validate", "-C", str(app)]
    rc, out = cli(args, env={"MEPGEN_KILL_AT": step})
    assert rc == KILLED, out
    text = (app / "src/cg.cu").read_bytes()
    assert text == original or b"// the variant" in text
    # the next command settles it: the record follows the file
    rc, out = cli(["patch", "cg::xpay", "--from", str(v["xpay"]), "--apply", "--no-validate", "-C", str(app)])
    assert rc == 0, out
    expect = ["cg.axpy", "cg.xpay"] if text != original else ["cg.xpay"]
    assert manifests(app) == expect
    rc, out = cli(["patch", "--all", "--revert", "-C", str(app)])
    assert rc == 0, out
    assert (app / "src/cg.cu").read_bytes() == original
    assert not list((app / ".mepgen/patches").glob("*/*.json"))


@pytest.mark.parametrize("step", ["revert-after-journal", "revert-after-source"])
def test_a_kill_at_each_step_of_revert_leaves_a_whole_state(app, tmp_path, step):
    v = variants(tmp_path / "v")
    original = (app / "src/cg.cu").read_bytes()
    for k in ("axpy", "xpay"):
        assert cli(["patch", f"cg::{k}", "--from", str(v[k]), "--apply", "--no-validate", "-C", str(app)])[0] == 0
    rc, out = cli(["patch", "cg::axpy", "--revert", "-C", str(app)], env={"MEPGEN_KILL_AT": step})
    assert rc == KILLED, out
    rc, out = cli(["patch", "cg::axpy", "--revert", "-C", str(app)])
    assert rc == 0, out
    assert (app / "src/cg.cu").read_text().count("// the variant") == 1
    rc, out = cli(["patch", "cg::xpay", "--revert", "-C", str(app)])
    assert rc == 0, out
    assert (app / "src/cg.cu").read_bytes() == original
    assert json.dumps(manifests(app)) == "[]"


def test_the_lock_is_reentrant_in_its_thread_only(tmp_path):
    from mepgen.errors import MepgenError

    ws = Workspace(tmp_path)
    seen = []

    def other():
        try:
            with ws.lock("other", timeout=0.2):
                seen.append("got it")
        except MepgenError as e:
            seen.append(str(e))

    with ws.lock("outer"):
        with ws.lock("inner"):           # ready -> extract: no deadlock
            t = threading.Thread(target=other)
            t.start()
            t.join(10)
    assert len(seen) == 1 and "another mepgen command (pid" in seen[0] and "mepgen outer" in seen[0]
    t = threading.Thread(target=other)
    t.start()
    t.join(10)
    assert seen[-1] == "got it"


def test_revert_all_after_a_kill_during_a_revert_takes_every_patch_out(app, tmp_path):
    v = variants(tmp_path / "v")
    original = (app / "src/cg.cu").read_bytes()
    for k in ("axpy", "xpay"):
        assert cli(["patch", f"cg::{k}", "--from", str(v[k]), "--apply", "--no-validate", "-C", str(app)])[0] == 0
    rc, _ = cli(["patch", "cg::xpay", "--revert", "-C", str(app)], env={"MEPGEN_KILL_AT": "revert-after-journal"})
    assert rc == KILLED
    rc, out = cli(["patch", "--all", "--revert", "-C", str(app)])
    assert rc == 0, out
    assert (app / "src/cg.cu").read_bytes() == original
    assert not list((app / ".mepgen/patches").glob("*/*.json"))
