"""mepgen's configuration: YAML, validated strictly (an unknown key or a wrong type names the key and line).

Read in order, later overriding earlier: built-in defaults, the user's `~/.config/mepgen/config.yaml`
(`$XDG_CONFIG_HOME` respected), the application's `.mepgen/config.yaml`, and the file `$MEPGEN_CONFIG`
names. Every key is optional. Secrets are never stored here: the LLM key is read from the environment
variable that `llm.api_key_env` names.
"""
from __future__ import annotations

import copy
import os
from pathlib import Path

from .strict_yaml import load_doc, of_type, one_of, optional, record

DEFAULTS: dict = {
    "evaluate": {"backend": "auto", "timeout_s": 60.0, "compile_timeout_s": 300.0, "input_sets": 3,
                 "reps": 50, "warmup": 5, "min_gain": 0.02, "timing": "time", "sandbox": "auto",
                 "fidelity_tolerance": 0.25, "fidelity_floor_us": 10.0},
    "mep": {"arch": None, "ask_llm": False},
    "patch": {"validate_command": None},
    "tune": {"build_command": None, "check_command": None, "runs": 3, "time_limit_s": 60.0, "timeout_s": 1800.0},
    "llm": {"base_url": None, "model": None, "api_key_env": "OPENAI_API_KEY", "temperature": 0.2,
            "timeout_s": 120.0, "max_retries": 3},
}

_positive = lambda t: (lambda doc, kp, v: _check_positive(doc, kp, of_type(t)(doc, kp, v)))


_nonnegative = lambda t: (lambda doc, kp, v: _check_nonnegative(doc, kp, of_type(t)(doc, kp, v)))


def _check_nonnegative(doc, kp, v):
    if v < 0:
        raise doc.error(kp, f"must not be negative, not {v}")
    return v


def _check_positive(doc, kp, v):
    if v <= 0:
        raise doc.error(kp, f"must be positive, not {v}")
    return v


_SCHEMA = record({
    "evaluate": (record({
        "backend": (one_of("auto", "native", "pycuda"), False),
        "timeout_s": (_positive(float), False), "compile_timeout_s": (_positive(float), False),
        "input_sets": (_positive(int), False), "reps": (_positive(int), False), "warmup": (of_type(int), False),
        "min_gain": (of_type(float), False), "timing": (one_of("time", "count"), False),
        "sandbox": (one_of("auto", "require", "off", "bwrap", "landlock", "unshare", "rlimits"), False),
        "fidelity_tolerance": (_positive(float), False), "fidelity_floor_us": (_nonnegative(float), False)}), False),
    "mep": (record({"arch": (optional(of_type(str)), False), "ask_llm": (of_type(bool), False)}), False),
    "patch": (record({"validate_command": (optional(of_type(str)), False)}), False),
    "tune": (record({
        "build_command": (optional(of_type(str)), False), "check_command": (optional(of_type(str)), False),
        "runs": (_positive(int), False), "time_limit_s": (_positive(float), False),
        "timeout_s": (_positive(float), False)}), False),
    "llm": (record({
        "base_url": (optional(of_type(str)), False), "model": (optional(of_type(str)), False),
        "api_key_env": (of_type(str), False), "temperature": (of_type(float), False),
        "timeout_s": (_positive(float), False), "max_retries": (of_type(int), False)}), False),
})


def config_files(app_root: Path | None = None) -> list[Path]:
    base = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    files = [base / "mepgen" / "config.yaml"]
    if app_root is not None:
        files.append(Path(app_root) / ".mepgen" / "config.yaml")
    if os.environ.get("MEPGEN_CONFIG"):
        files.append(Path(os.environ["MEPGEN_CONFIG"]))
    return files


def load_config(app_root: Path | None = None, files: list[Path] | None = None) -> dict:
    """The merged configuration; a file named by $MEPGEN_CONFIG must exist, the others may not."""
    cfg = copy.deepcopy(DEFAULTS)
    explicit = os.environ.get("MEPGEN_CONFIG")
    for path in (files if files is not None else config_files(app_root)):
        if not path.is_file() and str(path) != explicit:
            continue
        doc = load_doc(path)
        data = _SCHEMA(doc, (), doc.data if doc.data is not None else {})
        for section, values in data.items():
            cfg[section].update(values)
    return cfg
