"""An OpenAI-compatible chat client: settings as the OpenAI SDK takes them, the SDK's own retries, and one clear
message per failure.

Any server that speaks the chat-completions API works. Settings come from the environment first, then from
mepgen's config file (`llm` section): the endpoint from `$OPENAI_BASE_URL` or `llm.base_url`, the model from
`$MEPGEN_LLM_MODEL`, `$OPENAI_MODEL` or `llm.model`, the key from the environment variable `llm.api_key_env`
names (`OPENAI_API_KEY`). An endpoint off this machine without a key is refused in one line; a loopback one
(a local vLLM or Ollama server) may go without, and then no Authorization header is sent at all. The key is
never written anywhere: error messages and logs carry the endpoint and model, never the key. Retries
(`llm.max_retries`) are the SDK's: exponential back-off that honours the server's Retry-After.
"""
from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass, field
from urllib.parse import urlparse

from ..errors import MepgenError

ENV_BASE_URL = "OPENAI_BASE_URL"
ENV_MODELS = ("MEPGEN_LLM_MODEL", "OPENAI_MODEL")


class LLMError(Exception):
    """A failed request, classified so the search can decide: retry later, switch proposer, or stop."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind  # unreachable | auth | rate_limited | timeout | bad_request | server | empty | truncated


def is_loopback(base_url: str) -> bool:
    """Whether the endpoint is on this machine (localhost, 127.0.0.0/8, ::1)."""
    host = (urlparse(base_url).hostname or "").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass
class LLMSettings:
    base_url: str
    model: str
    api_key_env: str = "OPENAI_API_KEY"
    temperature: float = 0.2
    timeout_s: float = 120.0
    max_retries: int = 3
    source: dict = field(default_factory=dict)     # where base_url and model came from, for `mepgen llm check`

    @classmethod
    def from_config(cls, cfg: dict, env: dict | None = None) -> "LLMSettings | None":
        """The environment's settings over the config file's; None when neither names an endpoint."""
        env = os.environ if env is None else env
        llm = cfg["llm"]
        source = {}
        base_url = env.get(ENV_BASE_URL) or llm.get("base_url")
        if not base_url:
            return None
        source["base_url"] = f"${ENV_BASE_URL}" if env.get(ENV_BASE_URL) else "llm.base_url"
        name = next((n for n in ENV_MODELS if env.get(n)), None)
        model = env[name] if name else llm.get("model")
        if not model:
            raise MepgenError(f"an LLM endpoint is set ({source['base_url']} = {base_url}) but no model: set "
                              f"${ENV_MODELS[0]} (or ${ENV_MODELS[1]}), or llm.model in mepgen's config.yaml")
        source["model"] = f"${name}" if name else "llm.model"
        return cls(base_url=base_url, model=model, api_key_env=llm["api_key_env"], temperature=llm["temperature"],
                   timeout_s=llm["timeout_s"], max_retries=llm["max_retries"], source=source)

    def key(self) -> str | None:
        """The key from the environment; None for a loopback endpoint without one; an error for a remote one."""
        key = os.environ.get(self.api_key_env)
        if key:
            return key
        if is_loopback(self.base_url):
            return None
        raise MepgenError(f"the LLM endpoint {self.base_url} is not on this machine and ${self.api_key_env} is "
                          f"empty: export the key (a local server, e.g. http://127.0.0.1:8000/v1, needs none)")


class ChatClient:
    def __init__(self, settings: LLMSettings):
        try:
            import openai     # about 0.7 s to import: loaded only when an LLM is asked
        except ImportError:  # pragma: no cover - openai is a dependency
            raise MepgenError("the openai package is missing: pip install openai") from None
        self._openai = openai
        self.settings = settings
        key = settings.key()
        # without a key (loopback only) the SDK still wants a string; the request then omits the header entirely
        self._headers = {} if key else {"Authorization": openai.Omit()}
        self.sends_key = bool(key)
        self.requests = 0

        def count(request):
            self.requests += 1
        http = openai.DefaultHttpxClient(event_hooks={"request": [count]})
        self._client = openai.OpenAI(base_url=settings.base_url, api_key=key or "no-key-sent",
                                     timeout=settings.timeout_s, max_retries=max(0, settings.max_retries),
                                     http_client=http)

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

    def complete(self, messages: list[dict], **extra) -> str:
        """The reply's text. The SDK retries timeouts, rate limits (after the server's Retry-After), server errors
        and unreachable endpoints up to `max_retries` times; an auth or request error, an empty or truncated
        reply is final at once."""
        try:
            r = self._client.chat.completions.create(model=self.settings.model, messages=messages,
                                                     temperature=self.settings.temperature,
                                                     extra_headers=self._headers, **extra)
        except Exception as e:  # classified below; nothing escapes unclassified
            raise self._classify(e) from None
        try:
            choice = r.choices[0]
            text = choice.message.content
            finish = choice.finish_reason
        except (AttributeError, IndexError, TypeError):
            raise LLMError("server", f"{self.settings.base_url}: the reply has no choices") from None
        if finish == "length":
            raise LLMError("truncated", "the reply was cut off at the model's length limit")
        if not text or not text.strip():
            raise LLMError("empty", "the reply was empty")
        return text

    def models(self) -> list[str]:
        """The model ids the endpoint lists (GET /models)."""
        try:
            return [m.id for m in self._client.models.list(extra_headers=self._headers)]
        except Exception as e:
            raise self._classify(e) from None


def _short(e: Exception) -> str:
    return str(e).splitlines()[0][:200]
