"""Configuration is strict: unknown keys and wrong types are errors naming key and line."""
from __future__ import annotations

import pytest

from mepgen.config import DEFAULTS, load_config
from mepgen.errors import MepgenError


def test_defaults_without_files(tmp_path, monkeypatch):
    monkeypatch.delenv("MEPGEN_CONFIG", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "none"))
    assert load_config(tmp_path) == DEFAULTS


def test_later_files_override_earlier(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    (tmp_path / "xdg" / "mepgen").mkdir(parents=True)
    (tmp_path / "xdg" / "mepgen" / "config.yaml").write_text("evaluate: {reps: 20, warmup: 2}\n")
    (tmp_path / ".mepgen").mkdir()
    (tmp_path / ".mepgen" / "config.yaml").write_text("evaluate: {reps: 30}\npatch: {validate_command: make test}\n")
    monkeypatch.delenv("MEPGEN_CONFIG", raising=False)
    cfg = load_config(tmp_path)
    assert cfg["evaluate"]["reps"] == 30 and cfg["evaluate"]["warmup"] == 2
    assert cfg["patch"]["validate_command"] == "make test"
    assert cfg["evaluate"]["backend"] == "auto" and cfg["evaluate"]["timing"] == "time"


@pytest.mark.parametrize("text, message", [
    ("evaluate:\n  backendd: pycuda\n", "config.yaml:2: evaluate.backendd: unknown key 'backendd'"),
    ("evaluate:\n  reps: many\n", "config.yaml:2: evaluate.reps: must be an integer"),
    ("evaluate:\n  backend: cuda\n", "config.yaml:2: evaluate.backend: 'cuda' is not one of auto, native, pycuda"),
    ("llm:\n  timeout_s: -1\n", "config.yaml:2: llm.timeout_s: must be positive"),
    ("evaluate: [1, 2\n", "not valid YAML"),
])
def test_bad_config_names_key_and_line(tmp_path, monkeypatch, text, message):
    path = tmp_path / "config.yaml"
    path.write_text(text)
    monkeypatch.setenv("MEPGEN_CONFIG", str(path))
    with pytest.raises(MepgenError) as e:
        load_config(None, files=[path])
    assert message in str(e.value)


def test_missing_explicit_config_is_an_error(tmp_path, monkeypatch):
    monkeypatch.setenv("MEPGEN_CONFIG", str(tmp_path / "absent.yaml"))
    with pytest.raises(MepgenError, match="absent.yaml not found"):
        load_config(tmp_path)
