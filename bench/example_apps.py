"""The bundled example applications as the GPU benchmarks run them: executable and run arguments."""
from __future__ import annotations

from pathlib import Path

# name of the folder under examples/ -> how to run the built application
EXAMPLES = {
    "heatcg": {"binary": "build/heatcg", "args": ["--steps", "5"]},
    "dense": {"binary": "build/dense", "args": []},      # a fixed number of steps; no options
}


def example(app: Path, steps: int | None = None) -> dict:
    """{'binary': Path, 'args': [...]} of an example application (`steps` overrides heatcg's --steps)."""
    conf = EXAMPLES.get(Path(app).name)
    if conf is None:
        raise SystemExit(f"no run settings for {Path(app).name}; known examples: {', '.join(EXAMPLES)}")
    args = list(conf["args"])
    if steps is not None and "--steps" in args:
        args[args.index("--steps") + 1] = str(steps)
    return {"binary": Path(app) / conf["binary"], "args": args}
