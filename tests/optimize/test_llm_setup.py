"""LLM setup as the OpenAI SDK does it: the environment before the config file, a remote endpoint needs a key and a
loopback one does not, the SDK's retries honour Retry-After, and `mepgen llm check` reports what the endpoint
supports. Every server here is tests/chat_server.py on 127.0.0.1: nothing reaches the internet."""
from __future__ import annotations

import json
import socket
import time

import pytest
from click.testing import CliRunner

from chat_server import ChatServer
from mepgen.cli import main
from mepgen.config import DEFAULTS
from mepgen.errors import MepgenError
from mepgen.llm.client import ChatClient, LLMError, LLMSettings, is_loopback

MSG = [{"role": "user", "content": "hi"}]


def cfg(**llm):
    return {**DEFAULTS, "llm": {**DEFAULTS["llm"], **llm}}


def test_environment_before_the_config_file():
    c = cfg(base_url="http://127.0.0.1:1/v1", model="from-file")
    s = LLMSettings.from_config(c, env={})
    assert (s.base_url, s.model, s.source) == ("http://127.0.0.1:1/v1", "from-file",
                                               {"base_url": "llm.base_url", "model": "llm.model"})
    env = {"OPENAI_BASE_URL": "http://localhost:2/v1", "OPENAI_MODEL": "openai-model"}
    s = LLMSettings.from_config(c, env=env)
    assert (s.base_url, s.model) == ("http://localhost:2/v1", "openai-model")
    assert s.source == {"base_url": "$OPENAI_BASE_URL", "model": "$OPENAI_MODEL"}
    s = LLMSettings.from_config(c, env={**env, "MEPGEN_LLM_MODEL": "mine"})
    assert s.model == "mine" and s.source["model"] == "$MEPGEN_LLM_MODEL"
    assert LLMSettings.from_config(cfg(), env={}) is None                      # nothing set: the library alone
    with pytest.raises(MepgenError, match=r"no model: set \$MEPGEN_LLM_MODEL"):
        LLMSettings.from_config(cfg(), env={"OPENAI_BASE_URL": "http://127.0.0.1:3/v1"})


def test_loopback_and_remote_endpoints():
    assert is_loopback("http://127.0.0.1:8000/v1") and is_loopback("http://localhost:11434/v1")
    assert is_loopback("http://[::1]:8000/v1") and is_loopback("http://127.9.9.9/v1")
    assert not is_loopback("https://api.openai.com/v1") and not is_loopback("http://10.0.0.5:8000/v1")


def test_a_remote_endpoint_without_a_key_is_one_clear_error(monkeypatch):
    monkeypatch.delenv("MEPGEN_TEST_KEY", raising=False)
    s = LLMSettings(base_url="https://llm.example.org/v1", model="m", api_key_env="MEPGEN_TEST_KEY")
    with pytest.raises(MepgenError) as e:
        ChatClient(s)                              # refused before any request: nothing is sent
    msg = str(e.value)
    assert "\n" not in msg and "$MEPGEN_TEST_KEY" in msg and "llm.example.org" in msg


def test_a_loopback_endpoint_without_a_key_sends_no_authorization(monkeypatch):
    monkeypatch.delenv("MEPGEN_TEST_KEY", raising=False)
    with ChatServer([{"content": "ok"}]) as srv:
        c = ChatClient(LLMSettings(base_url=srv.base_url, model="m", api_key_env="MEPGEN_TEST_KEY"))
        assert c.complete(MSG) == "ok" and not c.sends_key
        assert "authorization" not in srv.requests[0]["headers"]


def test_the_sdk_retries_after_retry_after(monkeypatch):
    monkeypatch.setenv("MEPGEN_TEST_KEY", "k")
    script = [{"status": 429, "headers": {"Retry-After": "1"}}, {"content": "after the wait"}]
    with ChatServer(script) as srv:
        c = ChatClient(LLMSettings(base_url=srv.base_url, model="m", api_key_env="MEPGEN_TEST_KEY", max_retries=2))
        assert c.complete(MSG) == "after the wait" and c.requests == 2
        gap = srv.requests[1]["at"] - srv.requests[0]["at"]
        assert 0.9 <= gap < 5, gap                 # the server's 1 s, not the SDK's own 0.5 s first back-off
    # a wait longer than the SDK accepts is not retried: the rate limit is reported at once
    with ChatServer([{"status": 429, "headers": {"Retry-After": "100000"}}] * 3) as srv:
        c = ChatClient(LLMSettings(base_url=srv.base_url, model="m", api_key_env="MEPGEN_TEST_KEY", max_retries=2))
        with pytest.raises(LLMError) as e:
            c.complete(MSG)
        assert e.value.kind == "rate_limited" and len(srv.requests) == 1


def invoke(*args, env=None):
    r = CliRunner().invoke(main, list(args), env=env)
    return r


def test_llm_check_reports_model_latency_and_what_the_endpoint_supports(tmp_path):
    with ChatServer([{"content": "ok"}, {"content": '{"ok": true}'}], models=["qwen2.5-coder", "llama3"]) as srv:
        env = {"OPENAI_BASE_URL": srv.base_url, "MEPGEN_LLM_MODEL": "qwen2.5-coder", "OPENAI_API_KEY": "",
               "MEPGEN_CONFIG": "", "XDG_CONFIG_HOME": str(tmp_path)}
        r = invoke("llm", "check", "-C", str(tmp_path), "--json-mode", "--json", env=env)
        assert r.exit_code == 0, r.output
        out = json.loads(r.stdout)
        assert out["ok"] and out["reply"] == "ok" and out["model"] == "qwen2.5-coder"
        assert out["models"] == ["qwen2.5-coder", "llama3"] and out["json_mode"] is True
        assert out["source"] == {"base_url": "$OPENAI_BASE_URL", "model": "$MEPGEN_LLM_MODEL"}
        assert 0 <= out["latency_s"] < 10 and out["loopback"] and out["key"].startswith("none")
        chat = [q for q in srv.requests if q["method"] == "POST"]
        assert chat[0]["json"]["model"] == "qwen2.5-coder" and chat[0]["json"]["max_tokens"] == 8
        assert chat[1]["json"]["response_format"] == {"type": "json_object"}
    with ChatServer([{"content": "ok"}], models=None) as srv:          # no /models: said, not fatal
        env.update(OPENAI_BASE_URL=srv.base_url)
        r = invoke("llm", "check", env=env)
        assert r.exit_code == 0 and "no list" in r.stdout and "answered in" in r.stdout


def test_llm_check_exit_codes(tmp_path):
    base = {"MEPGEN_CONFIG": "", "XDG_CONFIG_HOME": str(tmp_path), "OPENAI_API_KEY": ""}
    r = invoke("llm", "check", "-C", str(tmp_path), env=base)
    assert r.exit_code == 2 and "OPENAI_BASE_URL" in r.output              # nothing configured
    r = invoke("llm", "check", "-C", str(tmp_path),
               env={**base, "OPENAI_BASE_URL": "https://llm.example.org/v1", "OPENAI_MODEL": "m"})
    assert r.exit_code == 2 and "$OPENAI_API_KEY" in r.output               # remote without a key: nothing sent
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (tmp_path / ".mepgen").mkdir()
    (tmp_path / ".mepgen" / "config.yaml").write_text(
        f"llm: {{base_url: 'http://127.0.0.1:{port}/v1', model: m, max_retries: 0, timeout_s: 5}}\n")
    t0 = time.monotonic()
    r = invoke("llm", "check", "-C", str(tmp_path), env=base)               # from the application's config file
    assert r.exit_code == 1 and "cannot reach" in r.output and time.monotonic() - t0 < 20
