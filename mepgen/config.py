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
    "tune": {"build_command": None, "check_command": None, "runs": 3, "time_limit_s": 60.0, "timeout_s": 1800.0,
             "min_share": 0.01},
    "llm": {"base_url": None, "model": None, "api_key_env": "OPENAI_API_KEY", "temperature": 0.2,
            "timeout_s": 120.0, "max_retries": 3},
}

def _in_range(t, low=None, high=None, low_open=False):
    """A number of type `t` within [low, high] (`low_open`: above low), checked at load with the key's line."""
    def check(doc, kp, v):
        v = of_type(t)(doc, kp, v)
        if v != v or (low is not None and (v <= low if low_open else v < low)) or (high is not None and v > high):
            if low is not None and high is not None:
                want = f"between {low} and {high}"
            elif low_open:
                want = "positive"
            else:
                want = f"at least {low}"
            raise doc.error(kp, f"must be {want}, not {v}")
        return v
    return check


_positive = lambda t: _in_range(t, 0, low_open=True)
_nonnegative = lambda t: _in_range(t, 0)


_SCHEMA = record({
    "evaluate": (record({
        "backend": (one_of("auto", "native", "pycuda"), False),
        "timeout_s": (_positive(float), False), "compile_timeout_s": (_positive(float), False),
        "input_sets": (_positive(int), False), "reps": (_positive(int), False), "warmup": (_in_range(int, 0), False),
        "min_gain": (_in_range(float, 0.0, 1.0), False), "timing": (one_of("time", "count"), False),
        "sandbox": (one_of("auto", "require", "off", "bwrap", "landlock", "unshare", "rlimits"), False),
        "fidelity_tolerance": (_positive(float), False), "fidelity_floor_us": (_nonnegative(float), False)}), False),
    "mep": (record({"arch": (optional(of_type(str)), False), "ask_llm": (of_type(bool), False)}), False),
    "patch": (record({"validate_command": (optional(of_type(str)), False)}), False),
    "tune": (record({
        "build_command": (optional(of_type(str)), False), "check_command": (optional(of_type(str)), False),
        "runs": (_positive(int), False), "time_limit_s": (_positive(float), False),
        "timeout_s": (_positive(float), False), "min_share": (_in_range(float, 0.0, 1.0), False)}), False),
    "llm": (record({
        "base_url": (optional(of_type(str)), False), "model": (optional(of_type(str)), False),
        "api_key_env": (of_type(str), False), "temperature": (_in_range(float, 0.0, 2.0), False),
        "timeout_s": (_positive(float), False), "max_retries": (_in_range(int, 0, 100), False)}), False),
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
