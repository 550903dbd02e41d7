"""Candidates and compilers run without secrets from mepgen's environment."""
from __future__ import annotations

import sys

from mepgen.evaluate import process


def test_children_do_not_see_api_keys(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-should-not-leak")
    monkeypatch.setenv("MY_SERVICE_TOKEN", "t0k3n")
    monkeypatch.setenv("MEPGEN_HARMLESS", "yes")
    done = process.run([sys.executable, "-c", "import os; print(sorted(os.environ))"], timeout=30)
    assert done.returncode == 0
    seen = done.stdout.decode() if isinstance(done.stdout, bytes) else done.stdout
    assert "MEPGEN_HARMLESS" in seen
    assert "OPENAI_API_KEY" not in seen and "MY_SERVICE_TOKEN" not in seen
