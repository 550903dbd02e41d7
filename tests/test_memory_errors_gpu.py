"""Memory errors are verdicts, the same on both backends (tests/memory_errors/<kernel>/*.cu).

Each file's first line says what it does and what must happen:
`// OOB: <what> | EXPECT: out_of_bounds <buffer> <side>`: a write out of bounds, rejected by the guard zones on
both backends (runtime_fault, fault out_of_bounds naming the buffer and the side);
`// OOB: <what> | EXPECT: memcheck <buffer> <side>`: a read out of bounds: it changes nothing, so the evaluator
accepts it, and compute-sanitizer's memcheck (what optimize runs before naming a winner) rejects it, naming the
buffer and the side; `// CONTROL: <what> | EXPECT: ok`: honest, accepted by both and clean under memcheck.
On CPU only the headers are read; on a GPU (marker gpu) everything runs, on the example's MEPs."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from conftest import ROOT

SUITE = ROOT / "tests" / "memory_errors"
_HEADER = re.compile(r"//\s*(OOB|CONTROL):\s*(.*?)\s*\|\s*EXPECT:\s*(out_of_bounds|memcheck|ok)\s*(\S+)?\s*(after|before)?")
KERNELS = sorted(p.name for p in SUITE.iterdir() if p.is_dir())


def cases() -> list[dict]:
    out = []
    for kid in KERNELS:
        for f in sorted((SUITE / kid).glob("*.cu")):
            m = _HEADER.search(f.read_text().splitlines()[0])
            assert m, f"{f}: first line must be '// OOB|CONTROL: <what> | EXPECT: <verdict> [buffer side]'"
            out.append({"kernel": kid, "name": f.stem, "file": f, "expect": m.group(3), "buffer": m.group(4),
                        "side": m.group(5)})
    return out


def test_the_suite_covers_each_kind_of_memory_error():
    found = {(c["expect"], c["side"]) for c in cases()}
    assert {("out_of_bounds", "after"), ("out_of_bounds", "before"), ("memcheck", "after"),
            ("memcheck", "before"), ("ok", None)} <= found
    assert any("neighbour" in c["name"] for c in cases() if c["expect"] == "memcheck")
    assert any("neighbour" in c["name"] for c in cases() if c["expect"] == "out_of_bounds")
    for c in cases():
        assert (c["buffer"] is None) == (c["expect"] == "ok"), c["name"]


@pytest.fixture(scope="module")
def app():
    sys.path.insert(0, str(ROOT / "bench"))
    import adversarial
    return adversarial.prepare_app(None, KERNELS)


_VERDICTS: dict = {}


def verdicts(app: Path, backend: str) -> dict:
    """(kernel, name) -> EvalResult, each backend once per session."""
    if backend in _VERDICTS:
        return _VERDICTS[backend]
    from mepgen.evaluate import Evaluator, Options
    from mepgen.evaluate.batch import evaluate_many
    from mepgen.spec import load_spec
    out = {}
    for kid in KERNELS:
        mep = Path(app) / ".mepgen" / "meps" / kid
        ev = Evaluator(load_spec(mep / "mep.yaml"), mep, Options(backend=backend, rounds=2, use_cache=False))
        try:
            ev.prepare()
            mine = [c for c in cases() if c["kernel"] == kid]
            for c, r in zip(mine, evaluate_many(ev, [(c["name"], c["file"]) for c in mine])):
                out[(kid, c["name"])] = r
        finally:
            ev.close()
    _VERDICTS[backend] = out
    return out


def _backend(backend: str) -> None:
    if backend == "pycuda":
        pytest.importorskip("pycuda", reason="the pycuda backend needs mepgen[gpu]")


@pytest.mark.gpu
@pytest.mark.parametrize("backend", ["native", "pycuda"])
def test_writes_out_of_bounds_are_rejected_and_named(app, backend):
    _backend(backend)
    got = verdicts(app, backend)
    wrong = []
    for c in cases():
        r = got[(c["kernel"], c["name"])]
        if c["expect"] == "out_of_bounds":
            told = f"{'past the end' if c['side'] == 'after' else 'before the start'} of {c['buffer']}"
            if r.status != "runtime_fault" or r.fault.kind != "out_of_bounds" or told not in r.fault.message:
                wrong.append(f"{c['kernel']}/{c['name']}: {r.status} ({r.feedback()[:200]})")
        elif r.status != "ok":         # reads and controls: the evaluator's verdict is `ok` (memcheck's comes next)
            wrong.append(f"{c['kernel']}/{c['name']}: expected ok, got {r.status} ({r.feedback()[:200]})")
    assert not wrong, "\n".join(wrong)


@pytest.mark.gpu
def test_reads_out_of_bounds_are_found_by_memcheck_and_controls_are_clean(app, tmp_path):
    from mepgen.evaluate import Evaluator, Options, memcheck
    from mepgen.spec import load_spec
    if memcheck.executable() is None:
        pytest.skip("compute-sanitizer not found (it ships with the CUDA toolkit)")
    wrong, costs = [], []
    for kid in KERNELS:
        mep = Path(app) / ".mepgen" / "meps" / kid
        ev = Evaluator(load_spec(mep / "mep.yaml"), mep, Options(backend="native", use_cache=False))
        try:
            ev.prepare()
            native = ev.workers[0].backend
            for c in [c for c in cases() if c["kernel"] == kid]:
                built = native.compile(c["file"])
                assert not hasattr(built, "message"), getattr(built, "message", "")
                r = memcheck.check(native, built, ev.sets[0], tmp_path / kid / c["name"], ev.sandbox, 600)
                costs.append(f"{kid}/{c['name']}: {r.seconds:.1f} s")
                if c["expect"] == "ok":
                    ok = r.clean is True
                else:                   # reads and writes alike: memcheck names the buffer and the side
                    first = r.errors[0] if r.errors else {}
                    ok = r.clean is False and first.get("buffer") == c["buffer"] and first.get("side") == c["side"]
                if not ok:
                    wrong.append(f"{kid}/{c['name']}: clean={r.clean} {r.message} {r.errors[:1]}")
        finally:
            ev.close()
    print("memcheck cost per run:", "; ".join(costs))
    assert not wrong, "\n".join(wrong)


@pytest.mark.gpu
@pytest.mark.parametrize("level", ["auto", "landlock"])
def test_memcheck_on_the_timed_cubin_finds_what_the_harness_finds(app, level):
    """optimize's check where pycuda times the candidates (memcheck_worker.py): the pycuda worker itself under the
    sanitizer, exact allocations, the cubin that was timed: every read and write out of bounds is found and named
    by its buffer and side, every control is clean, as with the native harness (the test above); under the
    strongest level here and under Landlock (the sanitizer confined apart, the worker inside as always)."""
    from mepgen.evaluate import Evaluator, Options, memcheck, memcheck_worker, sandbox
    from mepgen.spec import load_spec
    _backend("pycuda")
    if memcheck.executable() is None:
        pytest.skip("compute-sanitizer not found (it ships with the CUDA toolkit)")
    if level == "landlock" and not sandbox.landlock_works()[0]:
        pytest.skip("no Landlock on this machine")
    wrong, costs = [], []
    for kid in KERNELS:
        mep = Path(app) / ".mepgen" / "meps" / kid
        ev = Evaluator(load_spec(mep / "mep.yaml"), mep, Options(backend="pycuda", use_cache=False, sandbox=level))
        try:
            ev.prepare()
            be = ev.workers[0].backend
            for c in [c for c in cases() if c["kernel"] == kid]:
                built = be.compile(c["file"])
                assert not hasattr(built, "message"), getattr(built, "message", "")
                r, launched = memcheck_worker.check(be, built, ev.sets[0], 600)
                costs.append(f"{kid}/{c['name']}: {r.seconds:.1f} s")
                first = r.errors[0] if r.errors else {}
                ok = launched and (r.clean is True if c["expect"] == "ok" else
                                   r.clean is False and (first.get("buffer"), first.get("side")) == (c["buffer"], c["side"]))
                if not ok:
                    wrong.append(f"{kid}/{c['name']}: launched={launched} clean={r.clean} {r.message} {r.errors[:1]}")
        finally:
            ev.close()
    print(f"memcheck on the cubin ({level}), cost per check:", "; ".join(costs))
    assert not wrong, "\n".join(wrong)


@pytest.mark.gpu
def test_both_backends_give_the_same_verdict_on_every_variant(app):
    _backend("pycuda")
    native, pycuda = verdicts(app, "native"), verdicts(app, "pycuda")
    differ = []
    for key in native:
        a, b = native[key], pycuda[key]
        va = (a.status, a.fault.kind if a.fault else None)
        vb = (b.status, b.fault.kind if b.fault else None)
        if va != vb:
            differ.append(f"{key}: native {va} ({a.feedback()[:120]}), pycuda {vb} ({b.feedback()[:120]})")
    assert not differ, "\n".join(differ)


@pytest.mark.gpu
@pytest.mark.parametrize("backend", ["native", "pycuda"])
def test_candidates_run_under_landlock_on_the_gpu(app, backend):
    """The level without namespaces, forced: the GPU works under it on both backends (the original, an honest
    variant), and the level is in every record."""
    from mepgen.evaluate import Evaluator, Options, sandbox
    from mepgen.evaluate.batch import evaluate_many
    from mepgen.spec import load_spec
    _backend(backend)
    if not sandbox.landlock_works()[0]:
        pytest.skip("no Landlock on this machine")
    mep = Path(app) / ".mepgen" / "meps" / "cg.axpy"
    ev = Evaluator(load_spec(mep / "mep.yaml"), mep, Options(backend=backend, rounds=2, use_cache=False,
                                                             sandbox="landlock"))
    try:
        ev.prepare()
        honest = SUITE / "cg.axpy" / "honest_float4.cu"
        oob = SUITE / "cg.axpy" / "writes_past_end.cu"
        good, bad = evaluate_many(ev, [("honest", honest), ("oob", oob)])
        base = ev.baseline_result()
    finally:
        ev.close()
    assert base.ok and good.ok and base.sandbox == good.sandbox == "landlock", good.feedback()
    assert bad.status == "runtime_fault" and bad.fault.kind == "out_of_bounds", bad.feedback()
