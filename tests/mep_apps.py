"""Small applications for `mepgen mep` tests: a one-file app written and extracted, and the command run in-process
(shared by the mep, extract and library tests; imported by name, tests/ is on sys.path through conftest.py)."""
from __future__ import annotations

import textwrap

from click.testing import CliRunner

from mepgen.cli import main
from mepgen.extract import ExtractOptions, extract


def run(*args):
    return CliRunner().invoke(main, ["mep", *map(str, args)])


def make_app(tmp_path, source: str):
    app = tmp_path / "app"
    (app / "src").mkdir(parents=True)
    (app / "src" / "k.cu").write_text(textwrap.dedent(source))
    extract(app, ExtractOptions(jobs=1))
    return app
