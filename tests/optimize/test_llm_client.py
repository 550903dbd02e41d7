"""The LLM path through the real openai client against a scripted chat-completions server on loopback."""
from __future__ import annotations

import socket

import pytest

from chat_server import ChatServer
from mepgen.config import DEFAULTS
from mepgen.errors import MepgenError
from mepgen.llm.client import ChatClient, LLMError, LLMSettings

MSG = [{"role": "user", "content": "make it faster"}]


def settings(url: str, **kw) -> LLMSettings:
    return LLMSettings(base_url=url, model="test-model", api_key_env="MEPGEN_TEST_KEY", timeout_s=kw.pop("timeout", 5),
                       max_retries=kw.pop("retries", 2), **kw)


def test_reply_text_and_what_the_client_sends(monkeypatch):
    monkeypatch.setenv("MEPGEN_TEST_KEY", "sk-secret-123")
    with ChatServer([{"content": "```cuda\n__global__ void k() {}\n```"}]) as srv:
        c = ChatClient(settings(srv.base_url, temperature=0.3))
        assert c.complete(MSG).startswith("```cuda")
        req = srv.requests[0]
        assert req["path"] == "/v1/chat/completions"
        assert req["json"]["model"] == "test-model" and req["json"]["temperature"] == 0.3
        assert req["json"]["messages"] == MSG
        assert req["headers"]["authorization"] == "Bearer sk-secret-123"


def test_rate_limit_and_server_errors_are_retried_boundedly(monkeypatch):
    script = [{"status": 429, "body": {"error": {"message": "slow down"}}},
              {"status": 503, "body": {"error": {"message": "busy"}}},
              {"content": "ok now"}]
    with ChatServer(script) as srv:
        c = ChatClient(settings(srv.base_url, retries=2))
        assert c.complete(MSG) == "ok now"
        assert c.requests == 3
    with ChatServer([{"status": 429}] * 5) as srv:
        c = ChatClient(settings(srv.base_url, retries=2))
        with pytest.raises(LLMError) as e:
            c.complete(MSG)
        assert e.value.kind == "rate_limited" and "HTTP 429" in str(e.value)
        assert len(srv.requests) == 3  # 1 + 2 retries, no more


def test_wrong_key_is_final_at_once_and_never_echoed(monkeypatch):
    monkeypatch.setenv("MEPGEN_TEST_KEY", "sk-wrong-456")
    with ChatServer([{"status": 401, "body": {"error": {"message": "bad key sk-wrong-456"}}}] * 3) as srv:
        c = ChatClient(settings(srv.base_url))
        with pytest.raises(LLMError) as e:
            c.complete(MSG)
        assert e.value.kind == "auth" and "$MEPGEN_TEST_KEY" in str(e.value)
        assert "sk-wrong-456" not in str(e.value)
        assert len(srv.requests) == 1


def test_unreachable_endpoint():
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    c = ChatClient(settings(f"http://127.0.0.1:{port}/v1", retries=1))
    with pytest.raises(LLMError) as e:
        c.complete(MSG)
    assert e.value.kind == "unreachable" and f"127.0.0.1:{port}" in str(e.value)


def test_slow_reply_times_out():
    with ChatServer([{"content": "late", "delay": 2.0}] * 2) as srv:
        c = ChatClient(settings(srv.base_url, timeout=0.5, retries=1))
        with pytest.raises(LLMError) as e:
            c.complete(MSG)
        assert e.value.kind == "timeout"


def test_truncated_empty_and_malformed_replies():
    with ChatServer([{"content": "```cuda\n__global__ void k(", "finish_reason": "length"}]) as srv:
        with pytest.raises(LLMError, match="cut off") as e:
            ChatClient(settings(srv.base_url)).complete(MSG)
        assert e.value.kind == "truncated"
    with ChatServer([{"content": "   "}]) as srv:
        with pytest.raises(LLMError) as e:
            ChatClient(settings(srv.base_url)).complete(MSG)
        assert e.value.kind == "empty"
    with ChatServer([{"raw": "<html>proxy error</html>"}] * 3) as srv:
        with pytest.raises(LLMError) as e:
            ChatClient(settings(srv.base_url, retries=1)).complete(MSG)
        assert e.value.kind == "server"


def test_settings_from_config():
    cfg = {**DEFAULTS, "llm": {**DEFAULTS["llm"]}}
    assert LLMSettings.from_config(cfg) is None  # no endpoint: mepgen's own library proposes
    cfg["llm"]["base_url"] = "http://127.0.0.1:9/v1"
    with pytest.raises(MepgenError, match="llm.model"):
        LLMSettings.from_config(cfg)
    cfg["llm"]["model"] = "m"
    s = LLMSettings.from_config(cfg)
    assert (s.base_url, s.model, s.api_key_env) == ("http://127.0.0.1:9/v1", "m", "OPENAI_API_KEY")
