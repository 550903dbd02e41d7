#!/usr/bin/env python3
"""The adversarial suite: every cheating variant of an example kernel must be rejected, on a real GPU.

Variants live in tests/adversarial/<kernel id>/<name>.cu, each a whole kernel.cu whose first line says
what it does and what rejection to expect (`// ADVERSARY: ... | EXPECT: wrong_result`); `CONTROL`
variants are honest and must be accepted (so the suite cannot pass by rejecting everything).

    python3 bench/adversarial.py [--backend native|pycuda|both] [--app APP] [--record]

Without --app, examples/heatcg is copied to a temporary folder, extracted and the MEPs made with
`mepgen extract` and `mepgen mep`. --record writes bench/results/adversarial-<backend>.md. Exit 0 when
every adversary was rejected and every control accepted, 1 otherwise.
"""
from __future__ import annotations

import argparse
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mepgen.evaluate import Evaluator, Options  # noqa: E402
from mepgen.evaluate.batch import evaluate_many  # noqa: E402
from mepgen.spec import load_spec  # noqa: E402

SUITE = ROOT / "tests" / "adversarial"
#: what `mepgen mep` cannot infer for the example's kernels (axpy's n comes from a struct at run time)
MEP_ARGS = {"cg.axpy": ["--size", "N=1048576"]}
_HEADER = re.compile(r"//\s*(ADVERSARY|CONTROL):\s*(.*?)\s*\|\s*EXPECT:\s*([\w,]+)")


def variants(kernel_id: str) -> list[tuple[str, Path, str, set[str]]]:
    out = []
    for f in sorted((SUITE / kernel_id).glob("*.cu")):
        m = _HEADER.search(f.read_text().splitlines()[0])
        if not m:
            raise SystemExit(f"{f}: first line must be '// ADVERSARY: <what> | EXPECT: <status>'")
        out.append((f.stem, f, m.group(2), set(m.group(3).split(","))))
    return out


def mepgen(*args: str, cwd: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "mepgen.cli", *args], cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"mepgen {' '.join(args)} failed ({done.returncode}): {done.stderr.strip()}")


def prepare_app(app: Path | None, kernels: list[str]) -> Path:
    if app is not None:
        return app.resolve()
    target = Path(tempfile.mkdtemp(prefix="mepgen-adversarial-")) / "heatcg"
    shutil.copytree(ROOT / "examples" / "heatcg", target,
                    ignore=shutil.ignore_patterns(".mepgen", "build", "build-cmake", "compile_commands.json"))
    mepgen("extract", str(target), cwd=target)
    for k in kernels:
        mepgen("mep", k, *MEP_ARGS.get(k, []), cwd=target)
    return target


def run_suite(app: Path, backend: str, kernels: list[str], **options) -> list[dict]:
    """`options`: further evaluator Options (verify_on_device=False, baseline_once=False: the judge of old)."""
    rows = []
    for kid in kernels:
        mep_dir = app / ".mepgen" / "meps" / kid
        spec = load_spec(mep_dir / "mep.yaml")
        ev = Evaluator(spec, mep_dir, Options(backend=backend, rounds=3, use_cache=False, **options))
        try:
            ev.prepare()
            cases = variants(kid)
            results = evaluate_many(ev, [(name, f) for name, f, _, _ in cases])
        finally:
            ev.close()
        for (name, _, what, expect), r in zip(cases, results):
            control = expect == {"ok"}
            passed = r.ok if control else not r.ok
            rows.append({"kernel": kid, "variant": name, "what": what, "expected": "/".join(sorted(expect)),
                         "got": r.status, "stage": r.stage, "passed": passed,
                         "as_expected": r.status in expect,
                         "evidence": (r.feedback().splitlines() or [""])[0][:160]})
    return rows


def table(rows: list[dict], backend: str, seconds: float) -> str:
    lines = [f"# Adversarial suite, {backend} backend", "",
             f"{time.strftime('%Y-%m-%d %H:%M')} on {platform.node()} ({gpu_name()}), {seconds:.0f} s", "",
             "| kernel | variant | what it does | expected | got | stage | verdict | evidence |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        verdict = ("PASS" if r["as_expected"] else "pass (other reason)") if r["passed"] else "**FAIL**"
        lines.append(f"| {r['kernel']} | {r['variant']} | {r['what']} | {r['expected']} | {r['got']} | {r['stage']} "
                     f"| {verdict} | {r['evidence'].replace('|', '/')} |")
    bad = [r for r in rows if not r["passed"]]
    lines += ["", f"{len(rows) - len(bad)}/{len(rows)} passed" + (": FAILED " + ", ".join(
        f"{r['kernel']}/{r['variant']}" for r in bad) if bad else "")]
    return "\n".join(lines) + "\n"


def gpu_name() -> str:
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=30).stdout.strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        return "no GPU"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", choices=["native", "pycuda", "both"], default="native")
    ap.add_argument("--app", type=Path, help="An application whose MEPs exist already (default: examples/heatcg).")
    ap.add_argument("--kernels", nargs="*", default=sorted(p.name for p in SUITE.iterdir() if p.is_dir()))
    ap.add_argument("--record", action="store_true", help="Write bench/results/adversarial-<backend>.md.")
    args = ap.parse_args(argv)
    app = prepare_app(args.app, args.kernels)
    ok = True
    for backend in (["native", "pycuda"] if args.backend == "both" else [args.backend]):
        start = time.monotonic()
        rows = run_suite(app, backend, args.kernels)
        text = table(rows, backend, time.monotonic() - start)
        print(text)
        ok &= all(r["passed"] for r in rows)
        if args.record:
            out = ROOT / "bench" / "results" / f"adversarial-{backend}.md"
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(text)
            print(f"wrote {out}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
