"""setup.cfg lists packages explicitly (templates/ ships as mepgen.templates): keep the list complete."""
from __future__ import annotations

import configparser
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_every_subpackage_is_listed_in_setup_cfg():
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    listed = set(cfg["options"]["packages"].split())
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "mepgen").rglob("__init__.py")}
    assert found - listed == set(), f"add these to [options] packages in setup.cfg: {sorted(found - listed)}"
    assert "mepgen.templates" in listed
    assert cfg["options"]["package_dir"].split() == ["mepgen.templates", "=", "templates"]


def test_parse_shim_is_package_data():
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    data = cfg["options.package_data"]["mepgen.parsing"]
    assert "shim/*.h" in data and "shim/builtin/*.h" in data
    assert (ROOT / "mepgen/parsing/shim/mepgen_cuda_shim.h").is_file()
