"""Every command the README shows is run here, as a newcomer would type it, on a fresh copy of the example: the
CPU-runnable ones everywhere, the GPU ones where a GPU is (each skip names its reason). Each line must exit with
the code its comment states (`# exit 3: ...`), else 0; the numbers the README claims are checked against the
output they come from."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from chat_server import ChatServer
from conftest import have_gpu

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"

#: lines never run here, and why (first match wins)
NEVER = [
    (r"^make test\b", "the test suite itself"),
    (r"pip install", "installs packages (CI's `make test` installs mepgen the same way)"),
    (r"\./build/myapp", "runs a hypothetical application (capture and tune are tested on the example by their own "
                        "GPU tests)"),
    (r"^mepgen (optimize|report)\b.*~/src/myapp", "follows the capture of the hypothetical application above"),
]
#: lines that need a GPU (run where there is one)
GPU = [r"\./mep\b", r"^mepgen run\b", r"^mepgen optimize\b(?!.*--dry-run)", r"^mepgen (patch|report)\b"]


def blocks() -> list[tuple[str, list[tuple[int, str]]]]:
    """(section title, [(line number, line)]) of each ```sh block, blocks of one section joined."""
    out: dict[str, list[tuple[int, str]]] = {}
    section, inside = "", False
    for no, line in enumerate(README.read_text().splitlines(), start=1):
        if line.startswith("## "):
            section = line[3:].strip()
        elif line.strip() == "```sh":
            inside = True
        elif line.strip() == "```":
            inside = False
        elif inside and line.strip():
            out.setdefault(section, []).append((no, line.strip()))
    return list(out.items())


def split(line: str) -> tuple[str, int]:
    """The command and the exit code its comment states (0 unless `# exit N`)."""
    cmd, _, comment = line.partition("  #")
    m = re.match(r"\s*exit (\d+)", comment)
    return cmd.strip(), int(m.group(1)) if m else 0


def skip_reason(cmd: str, gpu: bool) -> str | None:
    for pattern, why in NEVER:
        if re.search(pattern, cmd):
            return why
    if not gpu and any(re.search(p, cmd) for p in GPU):
        return "needs an NVIDIA GPU"
    if cmd.startswith("make demo") and shutil.which("nvcc") is None:
        return "make demo builds an MEP with nvcc, which is not on PATH"
    return None


def test_readme_is_short_and_its_commands_are_all_accounted_for():
    lines = README.read_text().splitlines()
    assert len(lines) <= 150, f"README.md has {len(lines)} lines"
    titles = [t for t, _ in blocks()]
    assert titles == ["Two commands", "Install", "Five minutes on the example", "Your own application",
                      "An LLM (optional)"], titles
    for _, block in blocks():
        for no, line in block:
            cmd, _ = split(line)
            assert cmd.startswith(("make ", "mepgen ", "cp ", "(cd ", "python3 -m pip", "export ")), \
                f"README.md:{no}: a command this test does not know how to run: {cmd}"


@pytest.fixture
def sandbox(tmp_path):
    """A fresh 'clone' holding only examples/heatcg, a `mepgen` on PATH that runs this checkout, HOME in tmp."""
    clone = tmp_path / "clone"
    ignore = shutil.ignore_patterns(".mepgen", "build", "build-cmake", "compile_commands.json")
    shutil.copytree(ROOT / "examples" / "heatcg", clone / "examples" / "heatcg", ignore=ignore)
    home = tmp_path / "home"
    shutil.copytree(ROOT / "examples" / "heatcg", home / "src" / "myapp", ignore=ignore)   # "your own application"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "mepgen").write_text(f"#!/bin/sh\nexec {sys.executable} -m mepgen.cli \"$@\"\n")
    (bin_dir / "mepgen").chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "MEPGEN_"))}
    env.update(PATH=f"{bin_dir}{os.pathsep}{env['PATH']}", PYTHONPATH=str(ROOT), HOME=str(home),
               XDG_CONFIG_HOME=str(home / ".config"), XDG_CACHE_HOME=str(tmp_path / "cache"))
    return {"clone": clone, "tmp": tmp_path, "env": env}


def run_block(sandbox, section: str, substitute=None) -> dict[str, subprocess.CompletedProcess | str]:
    """Runs the section's lines in one shell, in order, from the clone's root; returns per command its result (or
    the reason it was skipped)."""
    gpu = have_gpu()
    out: dict = {}
    block = dict(blocks())[section]
    tmp = sandbox["tmp"]
    script = ["cd " + str(sandbox["clone"])]
    for i, (no, line) in enumerate(block):
        cmd, code = split(line)
        why = skip_reason(cmd, gpu)
        if why:
            out[cmd] = f"skipped: {why}"
            continue
        run = cmd.replace("/tmp/heatcg-try", str(tmp / "heatcg-try"))
        if run.startswith("make demo"):   # the repository's Makefile on the fresh copy; mepgen is installed already
            run = f"make -C {ROOT} demo PIP=true EXAMPLE={sandbox['clone'] / 'examples/heatcg'}"
        if substitute:
            run = substitute(run)
        script.append(f"{run} > {tmp}/out{i} 2> {tmp}/err{i}; rc=$?; "
                      f"if [ $rc -ne {code} ]; then echo \"README.md:{no}: exit $rc, expected {code}: {cmd}\" >&2; "
                      f"cat {tmp}/err{i} >&2; exit 1; fi")
        out[cmd] = i
    done = subprocess.run(["bash", "-c", "\n".join(script)], capture_output=True, text=True, env=sandbox["env"],
                          timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    for cmd, i in list(out.items()):
        if isinstance(i, int):
            out[cmd] = ((tmp / f"out{i}").read_text(), (tmp / f"err{i}").read_text())
    print("\n".join(f"{c}: {r}" for c, r in out.items() if isinstance(r, str)))     # the skips and their reasons
    return out


def test_two_commands(sandbox):
    out = run_block(sandbox, "Two commands")
    if isinstance(out["make demo"], tuple):
        stdout, stderr = out["make demo"]
        assert "mep.yaml needs a person for: cg::xpay: params[2].value" in stderr     # "8 of 9 are complete"
        assert stderr.count("mep.yaml needs a person for:") == 1 and ";" not in stderr.split("person for:")[1].splitlines()[0]


def test_install(sandbox):
    assert all(isinstance(r, str) for r in run_block(sandbox, "Install").values())    # nothing runnable: said why


def test_five_minutes_on_the_example(sandbox):
    out = run_block(sandbox, "Five minutes on the example")
    ready_out = out["mepgen ready"][0]
    assert "9 kernels: 5 ready, 4 need a person, 0 cannot" in ready_out            # the README's "5 of 9 ready"
    assert all(ln.split()[1:3] == ["needs", "a"] for ln in ready_out.splitlines() if ln.startswith("cg::"))
    mep_err = next(v for k, v in out.items() if k.startswith("mepgen mep --all"))[1]
    needs = mep_err.split("mep.yaml needs a person for:")[1].splitlines()[0]
    assert needs.strip() == "cg::xpay: params[2].value"                          # "8 of 9 complete"
    assert "warp_per_row" in out["mepgen optimize analysis::dense_matvec --dry-run"][0]
    assert (sandbox["tmp"] / "heatcg-try/.mepgen/meps/analysis.dense_matvec/mep").is_file()


def test_your_own_application(sandbox):
    out = run_block(sandbox, "Your own application")
    assert "inventory.json" in out["mepgen extract -C ~/src/myapp"][0]
    assert "9 kernels: 5 ready" in out["mepgen ready -C ~/src/myapp"][0]


def test_an_llm(sandbox):
    with ChatServer([{"content": "ok"}], models=["Qwen/Qwen2.5-Coder-7B-Instruct"]) as srv:
        port = srv.httpd.server_address[1]
        out = run_block(sandbox, "An LLM (optional)", lambda c: c.replace("127.0.0.1:8000", f"127.0.0.1:{port}"))
    text = out["mepgen llm check"][0]
    assert "model:    Qwen/Qwen2.5-Coder-7B-Instruct (from $MEPGEN_LLM_MODEL)" in text and "answered in" in text
