"""On a GPU: a kernel whose only results are `__device__` variables (mep.yaml constants with role inout) is judged
on those: its original verifies, a variant that leaves one unwritten or writes it wrong fails, on both backends."""
from __future__ import annotations


import pytest

from device_outputs_app import MIN_AND_SUM_APP

pytestmark = pytest.mark.gpu

APP = MIN_AND_SUM_APP

VARIANTS = {
    "same": lambda t: t,
    # the sum never stored: `total` keeps what the input set gave it
    "no_total": lambda t: t.replace("if (threadIdx.x == 0) total = s;", ""),
    "wrong_lowest": lambda t: t.replace("lowest = m;", "lowest = m + 1;"),
    # four sums per thread before the shuffles: the same value within the float tolerance
    "unrolled": lambda t: t.replace("for (int i = threadIdx.x; i < n; i += 32) s += w[i];",
                                    "#pragma unroll 4\n  for (int i = threadIdx.x; i < n; i += 32) s += w[i];"),
}


@pytest.fixture(scope="module")
def mep(tmp_path_factory):
    from mepgen.extract import ExtractOptions, extract
    from mepgen.mep.generate import generate
    from mepgen.workspace import Workspace
    app = tmp_path_factory.mktemp("app")
    (app / "k.cu").write_text(APP)
    extract(app, ExtractOptions(jobs=1))
    (r,) = generate(Workspace(app), ["min_and_sum"], every=False, detect_gpu=True)
    assert [o.name for o in r.spec.outputs] == ["lowest", "total"]
    text = (r.path / "kernel.cu").read_text()
    folder = app / "variants"
    folder.mkdir()
    for name, edit in VARIANTS.items():
        changed = edit(text)
        assert name == "same" or changed != text, name
        (folder / f"{name}.cu").write_text(changed)
    return r.path, folder


@pytest.mark.parametrize("backend", ["native", "pycuda"])
def test_written_device_variables_are_the_outputs_judged(mep, backend):
    if backend == "pycuda":
        pytest.importorskip("pycuda", reason="the pycuda backend needs mepgen[gpu]")
    from mepgen.evaluate import Evaluator, Options
    from mepgen.spec import load_spec
    path, folder = mep
    ev = Evaluator(load_spec(path / "mep.yaml"), path, Options(backend=backend, use_cache=False))
    try:
        ev.prepare()
        base = ev.baseline_result()
        assert base.ok, base.feedback()
        got = {}
        for name in VARIANTS:
            res = ev.new_result(name, folder / f"{name}.cu")
            built = ev.compile(res, folder / f"{name}.cu")
            assert built is not None, res.feedback()
            got[name] = ev.check(res, built, ev.workers[0])
    finally:
        ev.close()
    assert got["same"].status == "ok", got["same"].feedback()
    assert got["unrolled"].status == "ok", got["unrolled"].feedback()
    for name, output in (("no_total", "total"), ("wrong_lowest", "lowest")):
        assert got[name].status == "wrong_result", got[name].feedback()
        assert {m.output for m in got[name].wrong.mismatches} == {output}, got[name].feedback()
