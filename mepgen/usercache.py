"""The user's cache folder of mepgen: `$XDG_CACHE_HOME/mepgen` (default `~/.cache/mepgen`), where what is worth
keeping between runs on one machine lives (the GPU's peaks, the landlock launcher, the GPU probe's answer, the
capture library, compiled size expressions, the cubins of mepgen's own kernels). Nothing a candidate runs can
write there."""
from __future__ import annotations

import os
from pathlib import Path


def folder(*parts: str) -> Path:
    """`$XDG_CACHE_HOME/mepgen/PARTS...` (not created here)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache", "mepgen", *parts)
