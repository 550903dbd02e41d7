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


def test_every_template_file_is_package_data():
    """An installed (non-editable) mepgen renders from mepgen.templates: each file under templates/ that a
    template includes or the evaluator compiles (npy.h, l2_flush.h) must match a package_data pattern."""
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    patterns = cfg["options.package_data"]["mepgen.templates"].replace(",", " ").split()
    files = [p.relative_to(ROOT / "templates").as_posix() for p in (ROOT / "templates").rglob("*")
             if p.is_file() and p.suffix != ".py" and "__pycache__" not in p.parts]
    assert "harness/l2_flush.h" in files
    shipped = {p.relative_to(ROOT / "templates").as_posix() for pat in patterns for p in (ROOT / "templates").glob(pat)}
    missing = [f for f in files if f not in shipped]       # setuptools globs package_data as Path.glob does
    assert missing == [], f"add patterns for these to [options.package_data] mepgen.templates: {missing}"
