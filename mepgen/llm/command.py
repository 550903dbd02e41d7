"""`mepgen llm check`: one tiny request to the configured endpoint; prints where the settings came from, the model,
the latency and what the endpoint supports."""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import click

from ..errors import MepgenError
from ..exitcodes import CHECK_FAILED
from ..config import load_config
from .client import ChatClient, LLMError, LLMSettings, is_loopback
from ..workspace import Workspace


@click.group("llm")
def llm():
    """The LLM endpoint (OPENAI_BASE_URL / OPENAI_API_KEY / MEPGEN_LLM_MODEL, or the config's llm section)."""


@llm.command("check")
@click.option("-C", "--app", "app", type=click.Path(path_type=Path), default=None,
              help="The application whose .mepgen/config.yaml to read too (default: found upwards, if any).")
@click.option("--json-mode", "json_mode", is_flag=True,
              help="Also ask for a JSON-mode reply (response_format json_object): a second tiny request.")
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON.")
def check(app, json_mode, as_json):
    """Send one tiny chat request and print the model, the latency and what the endpoint supports.

    Exits 0 when the endpoint answered, 1 when it did not (unreachable, the key or the model refused), 2 when
    no endpoint is configured or one off this machine has no key.
    """

    root = Path(app) if app else _found_app()
    if app is not None and not root.is_dir():
        raise MepgenError(f"{app}: no such directory")
    settings = LLMSettings.from_config(load_config(root))
    if settings is None:
        raise MepgenError("no LLM endpoint: set $OPENAI_BASE_URL (and $MEPGEN_LLM_MODEL or $OPENAI_MODEL), or "
                          "llm.base_url and llm.model in mepgen's config.yaml (docs/llm.md)")
    client = ChatClient(settings)
    out = {"base_url": settings.base_url, "model": settings.model, "source": settings.source,
           "key": f"${settings.api_key_env}" if client.sends_key else
                  "none (loopback endpoint: no Authorization header)",
           "loopback": is_loopback(settings.base_url)}
    try:
        out["models"] = client.models()
    except LLMError as e:
        out["models"] = None
        out["models_error"] = str(e)
    t0 = time.monotonic()
    try:
        reply = client.complete([{"role": "user", "content": "Reply with the single word: ok"}], max_tokens=8)
        out["ok"], out["reply"] = True, reply.strip()[:80]
    except LLMError as e:
        out["ok"], out["error"], out["error_kind"] = False, str(e), e.kind
    out["latency_s"] = round(time.monotonic() - t0, 3)
    if out["ok"] and json_mode:
        try:
            text = client.complete([{"role": "user", "content": 'Reply with the JSON object {"ok": true}'}],
                                   response_format={"type": "json_object"}, max_tokens=16)
            json.loads(text)
            out["json_mode"] = True
        except (LLMError, ValueError) as e:
            out["json_mode"], out["json_mode_error"] = False, str(e)[:200]
    out["requests"] = client.requests
    if as_json:
        click.echo(json.dumps(out, indent=1))
    else:
        _print(out)
    if not out["ok"]:
        click.echo(f"mepgen: llm check: {out['error']}", err=True)
        sys.exit(CHECK_FAILED)


def _found_app() -> Path | None:
    try:
        return Workspace.find().app_root
    except MepgenError:
        return None


def _print(out: dict) -> None:
    src = out["source"]
    click.echo(f"endpoint: {out['base_url']} (from {src['base_url']})")
    click.echo(f"model:    {out['model']} (from {src['model']})")
    click.echo(f"key:      {out['key']}")
    if out["models"] is not None:
        listed = out["model"] in out["models"]
        click.echo(f"models:   {len(out['models'])} listed ({', '.join(out['models'][:5])}"
                   f"{', ...' if len(out['models']) > 5 else ''}); {out['model']} "
                   f"{'is' if listed else 'is NOT'} among them")
    else:
        click.echo(f"models:   no list ({out.get('models_error')})")
    if out["ok"]:
        click.echo(f"chat:     answered in {out['latency_s']:.2f} s: {out['reply']!r}")
    else:
        click.echo(f"chat:     FAILED after {out['latency_s']:.2f} s: {out['error']}")
    if "json_mode" in out:
        click.echo(f"json mode: {'yes' if out['json_mode'] else 'no (' + out.get('json_mode_error', '') + ')'}")
