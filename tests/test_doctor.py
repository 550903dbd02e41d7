"""`mepgen doctor`: what the machine allows to confine candidates and check memory, and how to get more."""
from __future__ import annotations

import json

from click.testing import CliRunner

from mepgen.cli import main
from mepgen.evaluate import doctor, landlock_level, memcheck, namespace_levels, probe_memo, sandbox


def test_doctor_names_every_level_and_the_one_auto_takes():
    done = CliRunner().invoke(main, ["doctor", "--json"])
    assert done.exit_code == 0, done.output
    r = json.loads(done.output)
    assert list(r["levels"]) == list(sandbox.LEVELS[:-1]) and r["auto"] == sandbox.strongest()[0]
    assert r["levels"]["rlimits"]["works"] is True
    assert r["levels"]["landlock"]["works"] == (landlock_level.abi() >= 1 and sandbox.landlock_works()[0])


def test_doctor_says_how_to_get_more(monkeypatch):
    monkeypatch.setattr(landlock_level, "abi", lambda: 0)
    monkeypatch.setattr(sandbox, "_unusable", lambda level: "" if level == "rlimits" else "not here")
    monkeypatch.setattr(sandbox, "strongest", lambda: ("rlimits", "bwrap is not installed"))
    monkeypatch.setattr(namespace_levels, "bwrap_executable", lambda: None)
    monkeypatch.setattr(memcheck, "executable", lambda: None)
    text = doctor.render(doctor.report())
    assert "apt-get install bubblewrap" in text and "Linux >= 5.13" in text and "compute-sanitizer NOT found" in text
    assert "auto takes: rlimits" in text and "landlock  no: not here" in text


def test_doctor_says_what_the_applications_config_asks_for(tmp_path):
    (tmp_path / ".mepgen").mkdir()
    (tmp_path / ".mepgen" / "config.yaml").write_text("evaluate:\n  sandbox: require\n")
    done = CliRunner().invoke(main, ["doctor", "-C", str(tmp_path), "--json"],
                              env={"MEPGEN_CONFIG": "", "XDG_CONFIG_HOME": str(tmp_path / "none")})
    assert done.exit_code == 0, done.output
    assert json.loads(done.output)["configured"] == {"app": str(tmp_path.resolve()), "evaluate.sandbox": "require"}
    text = CliRunner().invoke(main, ["doctor", "-C", str(tmp_path)],
                              env={"MEPGEN_CONFIG": "", "XDG_CONFIG_HOME": str(tmp_path / "none")}).output
    assert f"configured evaluate.sandbox: require (config of {tmp_path.resolve()})" in text
    assert CliRunner().invoke(main, ["doctor", "-C", str(tmp_path / "nope")]).exit_code == 2


def test_doctor_probes_afresh_and_says_where_optimize_remembers_it(monkeypatch, tmp_path):
    """doctor asks the GPU again (the memo is bypassed for its probes only) and names the file the optimizer reads."""
    monkeypatch.setenv("MEPGEN_PROBE_MEMO", "1")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    asked = []
    monkeypatch.setattr(sandbox, "strongest", lambda: asked.append(probe_memo.ask_again) or ("rlimits", ""))
    r = doctor.report()
    assert asked == [True] and probe_memo.ask_again is False
    assert r["gpu_probe_memo"] == str(tmp_path / "mepgen" / "gpu-policy.json")
    r["landlock_gpu"] = "GPU processes under Landlock ABI 7 of 7"
    assert f"until the next boot or driver: {tmp_path}" in doctor.render(r)
