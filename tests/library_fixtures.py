"""MEPs of the example applications (heatcg, examples/kernels) for the library's tests, built once."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from mepgen.optimize.library.base import current_launch
from mepgen.optimize.library.source import KernelSource
from mepgen.spec import load_spec

REPO = Path(__file__).resolve().parents[1]
SIZES = ["--size", "N=4194304", "--size", "NROWS=4194304", "--size", "NNZ=20930584"]


def build_meps(root: Path) -> dict[str, Path]:
    out = {}
    for app, extra in (("heatcg", SIZES), ("kernels", [])):
        folder = root / app
        shutil.copytree(REPO / "examples" / app, folder)
        subprocess.run(["mepgen", "extract", "."], cwd=folder, check=True, capture_output=True)
        subprocess.run(["mepgen", "mep", "--all", *extra], cwd=folder, check=True, capture_output=True)
        for d in (folder / ".mepgen" / "meps").iterdir():
            out[d.name] = d
    return out


def load(mep: Path, text: str | None = None):
    spec = load_spec(mep / "mep.yaml")
    src = KernelSource(text if text is not None else (mep / "kernel.cu").read_text(), spec)
    return src, spec, current_launch(spec, None)
