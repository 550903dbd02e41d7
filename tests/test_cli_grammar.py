"""One grammar: every command takes `-C APP`, `-v` and `--json` work before and after the subcommand, a renamed
flag's old spelling still works with a note, and each command exits with the code docs/exit-codes.md gives."""
from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from mepgen import exitcodes
from mepgen.cli import main

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    dst = tmp_path_factory.mktemp("grammar") / "heatcg"
    shutil.copytree(ROOT / "examples" / "heatcg", dst, ignore=shutil.ignore_patterns(".mepgen", "build"))
    r = CliRunner().invoke(main, ["extract", "-C", str(dst), "--json"])
    assert r.exit_code == 0, r.output
    assert CliRunner().invoke(main, ["mep", "-C", str(dst), "analysis::dense_matvec", "cg::xpay"]).exit_code == 3
    return dst


def invoke(*args, cwd: Path | None = None, env: dict | None = None):
    old = os.getcwd()
    try:
        if cwd is not None:
            os.chdir(cwd)
        try:
            runner = CliRunner(mix_stderr=False)       # click < 8.2
        except TypeError:
            runner = CliRunner()                       # click >= 8.2 keeps stderr apart itself
        return runner.invoke(main, list(args), env=env)
    finally:
        os.chdir(old)


def test_help_lists_every_exit_code_and_the_doc_agrees():
    r = invoke("--help")
    assert r.exit_code == 0
    doc = (ROOT / "docs" / "exit-codes.md").read_text()
    for code, _ in exitcodes.TABLE:
        assert re.search(rf"^\s+{code}\s+\S", r.stdout, re.M), f"exit code {code} missing from mepgen --help"
        assert f"| {code} |" in doc, f"exit code {code} missing from docs/exit-codes.md"
    assert len({c for c, _ in exitcodes.TABLE}) == len(exitcodes.TABLE)


def test_every_command_takes_dash_C():
    for name in main.list_commands(None):
        cmd = main.get_command(None, name)
        subs = cmd.commands.values() if hasattr(cmd, "commands") else [cmd]
        for sub in subs:
            flags = {o for p in sub.params for o in getattr(p, "opts", [])}
            assert "-C" in flags, f"`mepgen {name} {sub.name if sub is not cmd else ''}` has no -C"
            assert "-v" in flags, f"`mepgen {name}` does not take -v after the subcommand"


def test_extract_takes_the_folder_either_way(app, tmp_path):
    assert invoke("extract", str(app), "--json").exit_code == 0
    r = invoke("extract", "--json", cwd=app / "src")        # found upwards from a subfolder
    assert r.exit_code == 0 and json.loads(r.stdout)["inventory"] == str(app.resolve() / ".mepgen/inventory.json")
    r = invoke("extract", str(app), "-C", str(tmp_path))
    assert r.exit_code == exitcodes.USAGE and "two applications given" in r.stderr


def test_global_options_after_the_subcommand(app):
    before = invoke("--json", "list", "-C", str(app))
    after = invoke("list", "-C", str(app), "--json")
    assert before.exit_code == after.exit_code == 0
    assert json.loads(before.stdout) == json.loads(after.stdout)
    assert invoke("list", "-C", str(app), "-vv").exit_code == 0
    assert invoke("-v", "list", "-C", str(app)).exit_code == 0


@pytest.mark.parametrize("args, code", [
    (["ready", "--json"], exitcodes.NEEDS_PERSON),                  # heatcg's CG kernels need sizes
    (["mep", "analysis::dense_matvec", "--json"], exitcodes.OK),
    (["mep", "cg::xpay", "--json"], exitcodes.NEEDS_PERSON),
    (["mep", "no_such_kernel"], exitcodes.USAGE),
    (["list", "--bogus-option"], exitcodes.USAGE),
    (["run", "cg::xpay"], exitcodes.NEEDS_PERSON),                  # open todo: before any GPU is looked for
    (["optimize", "analysis::dense_matvec", "--dry-run", "--json"], exitcodes.OK),
    (["optimize", "analysis::dense_matvec", "--dry-run", "--profile"], exitcodes.OK),   # old spelling
    (["patch", "analysis::dense_matvec", "--json"], exitcodes.USAGE),   # the MEP's kernel is the original
    (["capture", "analysis::dense_matvec"], exitcodes.USAGE),        # no application to run
    (["report"], exitcodes.USAGE),                                   # no optimize run to report on yet
    (["llm", "check"], exitcodes.USAGE),                             # no endpoint configured
])
def test_documented_exit_codes_with_dash_C(app, args, code):
    n = 2 if args[0] == "llm" else 1
    r = invoke(*args[:n], "-C", str(app), *args[n:], cwd=app.parent,
               env={"MEPGEN_CONFIG": "", "XDG_CONFIG_HOME": str(app / "no-config")})
    assert r.exit_code == code, (r.stdout, r.stderr)
    if code and "--json" not in args:
        assert r.stderr.strip(), "a non-zero exit says why on stderr"
        assert "Traceback" not in r.stderr
    if "--json" in args and code in (exitcodes.OK, exitcodes.NEEDS_PERSON):
        json.loads(r.stdout)
    if "--profile" in args:
        assert "--ncu-metrics" in r.stderr


def test_no_gpu_is_exit_4_distinct_from_a_failed_check(app):
    """Exit 4 means only a missing GPU or toolchain; a patched application failing validation is 1."""
    from mepgen.patch import command as patch_command
    src = Path(patch_command.__file__).read_text()
    assert "exit_code=CHECK_FAILED" in src and "exit_code=4" not in src
    if shutil.which("nvidia-smi"):
        pytest.skip("a GPU may be here: the no-GPU exit is checked only where there is none")
    r = invoke("run", "-C", str(app), "analysis::dense_matvec", env={"PATH": os.environ["PATH"]})
    assert r.exit_code == exitcodes.NO_GPU, (r.stdout, r.stderr)
