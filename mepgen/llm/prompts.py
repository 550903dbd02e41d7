"""Prompts are Jinja templates in templates/prompts/, so a team can read and tune them without touching
code. Undefined variables are errors, not silently empty text."""
from __future__ import annotations

import functools

import jinja2

from ..templating import template_loader


@functools.lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    return jinja2.Environment(loader=template_loader("prompts"),
                              undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                              trim_blocks=False, lstrip_blocks=False, autoescape=False)


def render(name: str, **context) -> str:
    return environment().get_template(f"{name}.j2").render(**context)
