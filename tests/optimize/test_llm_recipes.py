"""docs/llm.md's recipes for a local vLLM and Ollama server: their exported settings, pointed at a loopback
chat-completions server serving the recipe's model name on the recipe's path, pass `mepgen llm check`."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from chat_server import ChatServer
from mepgen.cli import main

DOC = Path(__file__).resolve().parents[2] / "docs" / "llm.md"


def recipe(title: str) -> dict[str, str]:
    """The `export NAME=VALUE` lines of the doc's section `title`."""
    text = DOC.read_text()
    section = text.split(f"## {title}", 1)[1].split("\n## ", 1)[0]
    return dict(re.findall(r"^export (\w+)=(\S+)", section, re.M))


@pytest.mark.parametrize("title, url, model", [
    ("A local vLLM server", "http://127.0.0.1:8000/v1", "Qwen/Qwen2.5-Coder-7B-Instruct"),
    ("A local Ollama server", "http://127.0.0.1:11434/v1", "qwen2.5-coder:7b"),
])
def test_local_server_recipe(tmp_path, title, url, model):
    env = recipe(title)
    assert env == {"OPENAI_BASE_URL": url, "MEPGEN_LLM_MODEL": model}     # the doc says what this test runs
    with ChatServer([{"content": "ok"}], models=[model]) as srv:
        # the recipe's settings, with the port of the loopback stand-in (the path /v1 is the recipe's)
        env["OPENAI_BASE_URL"] = re.sub(r":\d+/", f":{srv.httpd.server_address[1]}/", env["OPENAI_BASE_URL"])
        r = CliRunner().invoke(main, ["llm", "check", "-C", str(tmp_path), "--json"],
                               env={**env, "OPENAI_API_KEY": "", "MEPGEN_CONFIG": "", "XDG_CONFIG_HOME": str(tmp_path)})
        assert r.exit_code == 0, r.output
        out = json.loads(r.stdout)
        assert out["ok"] and out["model"] == model and model in out["models"]
        assert all("authorization" not in q["headers"] for q in srv.requests)   # a local server needs no key
        assert srv.requests[-1]["path"] == "/v1/chat/completions"


def test_hosted_recipe_requires_its_key(tmp_path):
    env = recipe("A hosted endpoint")
    assert set(env) == {"OPENAI_BASE_URL", "OPENAI_API_KEY", "MEPGEN_LLM_MODEL"}
    r = CliRunner().invoke(main, ["llm", "check", "-C", str(tmp_path)],
                           env={**env, "OPENAI_API_KEY": "", "MEPGEN_CONFIG": "", "XDG_CONFIG_HOME": str(tmp_path)})
    assert r.exit_code == 2 and "$OPENAI_API_KEY is empty" in r.output      # refused before any request
