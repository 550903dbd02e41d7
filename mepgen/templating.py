"""Where mepgen's Jinja2 templates come from: the installed package `mepgen.templates` (setup.cfg maps the
top-level templates/ folder to it), or, when mepgen runs from a source checkout that was never installed
(PYTHONPATH=the checkout), that templates/ folder itself."""
from __future__ import annotations

from pathlib import Path

import jinja2

_SOURCE_TREE = Path(__file__).resolve().parent.parent / "templates"


def template_loader(folder: str) -> jinja2.BaseLoader:
    """A loader for templates/FOLDER/."""
    try:
        return jinja2.PackageLoader("mepgen.templates", folder)
    except (ModuleNotFoundError, ValueError):
        if (_SOURCE_TREE / folder).is_dir():
            return jinja2.FileSystemLoader(str(_SOURCE_TREE / folder))
        raise
