"""The landlock level's GPU probe (sandbox.gpu_policy) is remembered per boot (evaluate/probe_memo.py): a second
`mepgen optimize` on the same machine starts no probe; another boot, driver, user or confinement source asks
again; `mepgen doctor` always asks again; a damaged or foreign memo is never trusted. CPU: the probes stood in."""
from __future__ import annotations

import json

import pytest

from mepgen.evaluate import gpu_probe, landlock_level, probe_memo, sandbox


@pytest.fixture
def memo(monkeypatch, tmp_path):
    monkeypatch.setenv("MEPGEN_PROBE_MEMO", "1")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(landlock_level, "abi", lambda: 6)
    monkeypatch.setattr(gpu_probe, "usable_here", lambda: True)
    monkeypatch.setattr(probe_memo, "ask_again", False)
    probes = []

    def refuses(level, cap=None, sockets=None):
        probes.append(sockets)
        return sockets == "none"          # as on the H200 host: the strict filter refused, AF_UNIX without connect not
    monkeypatch.setattr(sandbox, "_refuses_at", refuses)
    sandbox.gpu_policy.cache_clear()
    yield probes
    sandbox.gpu_policy.cache_clear()


def test_a_second_run_on_the_same_boot_starts_no_probe(memo, tmp_path):
    assert sandbox.gpu_policy() == (0, "unix-local") and memo == ["none", "unix-local"]
    sandbox.gpu_policy.cache_clear()          # a new process
    assert sandbox.gpu_policy() == (0, "unix-local") and memo == ["none", "unix-local"]
    assert json.loads((tmp_path / "mepgen" / "gpu-policy.json").read_text())["policy"] == [0, "unix-local"]


@pytest.mark.parametrize("change", ["boot", "abi", "source"])
def test_another_boot_abi_or_confinement_source_asks_again(memo, monkeypatch, change):
    sandbox.gpu_policy()
    sandbox.gpu_policy.cache_clear()
    real = probe_memo._read
    if change == "boot":
        monkeypatch.setattr(probe_memo, "_read", lambda p: "another-boot" if "boot_id" in p else real(p))
    elif change == "abi":
        monkeypatch.setattr(landlock_level, "abi", lambda: 7)
    else:
        monkeypatch.setattr(probe_memo, "_read", lambda p: real(p) + "//x" if p.endswith("confine_exec.c") else real(p))
    sandbox.gpu_policy()
    assert memo == ["none", "unix-local"] * 2


def test_doctor_asks_again_and_off_means_off(memo, monkeypatch):
    sandbox.gpu_policy()
    sandbox.gpu_policy.cache_clear()
    monkeypatch.setattr(probe_memo, "ask_again", True)
    sandbox.gpu_policy()
    assert len(memo) == 4
    monkeypatch.setattr(probe_memo, "ask_again", False)
    monkeypatch.setenv("MEPGEN_PROBE_MEMO", "0")
    sandbox.gpu_policy.cache_clear()
    sandbox.gpu_policy()
    assert len(memo) == 6


@pytest.mark.parametrize("content", ["not json", '{"key": "k", "policy": [0, "none"]}', "[1, 2]",
                                     None])
def test_a_damaged_or_foreign_memo_is_not_trusted(memo, tmp_path, content):
    f = tmp_path / "mepgen" / "gpu-policy.json"
    f.parent.mkdir(parents=True)
    if content is None:         # the right key, a rule that does not exist
        content = json.dumps({"key": probe_memo.key(6), "policy": [0, "everything"]})
    f.write_text(content)
    assert sandbox.gpu_policy() == (0, "unix-local") and memo == ["none", "unix-local"]


def test_no_usable_gpu_is_not_remembered(memo, monkeypatch, tmp_path):
    """A GPU that could not be asked (busy, not there yet) decides nothing: the next run asks."""
    monkeypatch.setattr(gpu_probe, "usable_here", lambda: False)
    assert sandbox.gpu_policy() == (0, "none") and memo == []
    assert not (tmp_path / "mepgen" / "gpu-policy.json").exists()
