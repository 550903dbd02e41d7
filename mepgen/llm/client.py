"""An OpenAI-compatible chat client with bounded retries and one clear message per failure.

Any server that speaks the chat-completions API works (`llm.base_url`, `llm.model`); the key is read from
the environment variable `llm.api_key_env` names and is never written anywhere: error messages and logs
carry the endpoint and model, never the key.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass

from ..errors import MepgenError


class LLMError(Exception):
    """A failed request, classified so the search can decide: retry later, switch proposer, or stop."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind  # unreachable | auth | rate_limited | timeout | bad_request | server | empty | truncated


@dataclass
class LLMSettings:
    base_url: str
    model: str
    api_key_env: str = "OPENAI_API_KEY"
    temperature: float = 0.2
    timeout_s: float = 120.0
    max_retries: int = 3
    retry_wait_s: float = 1.0

    @classmethod
    def from_config(cls, cfg: dict) -> "LLMSettings | None":
        llm = cfg["llm"]
        if not llm.get("base_url"):
            return None
        if not llm.get("model"):
            raise MepgenError("llm.base_url is set but llm.model is not: name the model to ask")
        return cls(base_url=llm["base_url"], model=llm["model"], api_key_env=llm["api_key_env"],
                   temperature=llm["temperature"], timeout_s=llm["timeout_s"], max_retries=llm["max_retries"])


class ChatClient:
    def __init__(self, settings: LLMSettings):
        try:
            import openai
        except ImportError:  # pragma: no cover - openai is a dependency
            raise MepgenError("the openai package is missing: pip install openai") from None
        self._openai = openai
        self.settings = settings
        key = os.environ.get(settings.api_key_env)
        if not key:
            # local OpenAI-compatible servers often need none; the client library insists on a string
            key = "unused"
        self._client = openai.OpenAI(base_url=settings.base_url, api_key=key, timeout=settings.timeout_s,
                                     max_retries=0)
        self.requests = 0

    def _classify(self, e: Exception) -> LLMError:
        o = self._openai
        where = f"{self.settings.base_url} (model {self.settings.model})"
        if isinstance(e, o.APITimeoutError):
            return LLMError("timeout", f"no answer from {where} within {self.settings.timeout_s:.0f} s")
        if isinstance(e, o.APIConnectionError):
            return LLMError("unreachable", f"cannot reach {where}: {e}")
        if isinstance(e, o.AuthenticationError) or isinstance(e, o.PermissionDeniedError):
            return LLMError("auth", f"{where} refused the key from ${self.settings.api_key_env} "
                                    f"(HTTP {getattr(e, 'status_code', '?')})")
        if isinstance(e, o.RateLimitError):
            return LLMError("rate_limited", f"{where} is rate limiting (HTTP 429)")
        if isinstance(e, o.NotFoundError):
            return LLMError("bad_request", f"{where}: not found (HTTP 404): check base_url and model")
        if isinstance(e, o.BadRequestError):
            return LLMError("bad_request", f"{where} rejected the request (HTTP 400): {_short(e)}")
        if isinstance(e, o.APIStatusError):
            return LLMError("server", f"{where} failed (HTTP {e.status_code})")
        return LLMError("server", f"{where}: malformed answer ({type(e).__name__}: {_short(e)})")

    def complete(self, messages: list[dict]) -> str:
        """The reply's text. Retries timeouts, rate limits, server errors and unreachable endpoints up to
        `max_retries` times with growing waits; an auth or request error, an empty or truncated reply is
        final at once."""
        last: LLMError | None = None
        for attempt in range(self.settings.max_retries + 1):
            if attempt:
                time.sleep(self.settings.retry_wait_s * 2 ** (attempt - 1))
            self.requests += 1
            try:
                r = self._client.chat.completions.create(model=self.settings.model, messages=messages,
                                                         temperature=self.settings.temperature)
            except Exception as e:  # classified below; nothing escapes unclassified
                last = self._classify(e)
                if last.kind in ("auth", "bad_request"):
                    raise last from None
                continue
            try:
                choice = r.choices[0]
                text = choice.message.content
                finish = choice.finish_reason
            except (AttributeError, IndexError, TypeError):
                last = LLMError("server", f"{self.settings.base_url}: the reply has no choices")
                continue
            if finish == "length":
                raise LLMError("truncated", "the reply was cut off at the model's length limit")
            if not text or not text.strip():
                raise LLMError("empty", "the reply was empty")
            return text
        raise last  # type: ignore[misc]


def _short(e: Exception) -> str:
    return str(e).splitlines()[0][:200]
