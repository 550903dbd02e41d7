"""The stages `tune` chains, each run as its own `mepgen` command (the same one a person would type), so that tune
sees only what the stages write: their JSON on stdout and their files under `.mepgen/`."""
from __future__ import annotations

import threading
import hashlib
import json
import subprocess
import sys
from pathlib import Path

import click

from ..errors import MepgenError


class StageResult:
    def __init__(self, code: int, doc, err_tail: str):
        self.code, self.doc, self.err_tail = code, doc, err_tail

    @property
    def last_error(self) -> str:
        lines = [l for l in self.err_tail.splitlines() if l.startswith("mepgen:")]
        return (lines[-1] if lines else (self.err_tail.strip().splitlines() or [f"exit {self.code}"])[-1])[:300]


def mepgen(args: list[str], log: Path, cwd: Path | None = None, echo: bool = True,
           timeout: float | None = None) -> StageResult:
    """`mepgen ARGS` in a child process: stderr goes to the log (and the terminal), stdout is parsed as JSON."""
    log.parent.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "mepgen.cli", *args]
    tail: list[str] = []
    with open(log, "a") as fh:
        fh.write(f"$ mepgen {' '.join(args)}\n")
        proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        chunks: list[str] = []
        reader = threading.Thread(target=lambda: chunks.append(proc.stdout.read()), daemon=True)
        reader.start()
        for line in proc.stderr:
            fh.write(line)
            fh.flush()
            tail = (tail + [line])[-30:]
            if echo:
                click.echo(f"  {line.rstrip()}", err=True)
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait()
        reader.join()
    out = "".join(chunks)
    doc = None
    start = min([i for i in (out.find("{"), out.find("[")) if i >= 0], default=-1)
    if start >= 0:
        try:
            doc = json.loads(out[start:])
        except json.JSONDecodeError:
            doc = None
    return StageResult(code, doc, "".join(tail))


def say(message: str) -> None:
    click.echo(f"mepgen tune: {message}", err=True)


def sources_unchanged(inventory: Path, app_root: Path) -> bool:
    """True when every file the inventory recorded still has the recorded content (extract need not run again)."""
    try:
        inv = json.loads(inventory.read_text())
    except (OSError, json.JSONDecodeError):
        return False
    for rel, digest in (inv.get("files") or {}).items():
        p = Path(app_root) / rel
        try:
            if hashlib.sha256(p.read_bytes()).hexdigest() != digest:
                return False
        except OSError:
            return False
    return True


def require(result: StageResult, what: str) -> None:
    if result.code != 0:
        raise MepgenError(f"{what} failed: {result.last_error}", exit_code=result.code if result.code in (3, 4) else 2)
