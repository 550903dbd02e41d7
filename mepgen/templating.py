"""Where mepgen's Jinja2 templates come from: the templates/ folder beside the running mepgen/ when mepgen runs
from a source checkout (installed editable or not, so a second checkout or worktree renders its own templates),
else the installed package `mepgen.templates` (setup.cfg maps the top-level templates/ folder to it)."""
from __future__ import annotations

from pathlib import Path

import jinja2

_SOURCE_TREE = Path(__file__).resolve().parent.parent / "templates"


def template_loader(folder: str) -> jinja2.BaseLoader:
    """A loader for templates/FOLDER/."""
    if (_SOURCE_TREE / folder).is_dir():
        return jinja2.FileSystemLoader(str(_SOURCE_TREE / folder))
    return jinja2.PackageLoader("mepgen.templates", folder)
